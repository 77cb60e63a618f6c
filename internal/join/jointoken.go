package join

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"time"
)

// Join tokens besides the server's node-token file have the form
// <id>.<secret>: an id of TokenIDLen and a secret of TokenSecretLen
// characters from [a-z0-9] (about 83 bits). The id is public: it names the
// token in `nodeplane token list` and in the cluster-info request, so that
// the server knows which token the agent holds without the agent revealing
// any of its secret. The server keeps only a hash of the secret part.
const (
	TokenIDLen     = 6
	TokenSecretLen = 16
	tokenAlphabet  = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// ErrTokenNotFound: no join token has the id (never created, or deleted).
var ErrTokenNotFound = errors.New("join token not found")

// ErrTokenExpired: the join token was valid once but has expired. It is
// returned together with ErrTokenRejected (errors.Is matches both).
var ErrTokenExpired = errors.New("join token expired")

// TokenRecord is what the cluster keeps of a join token: never the secret
// itself.
type TokenRecord struct {
	// ID is the public part of the token.
	ID string `json:"id"`
	// SecretHash is TokenSecretHash of the secret part.
	SecretHash []byte `json:"secretHash"`
	// CAMAC is the cluster-info MAC of the CA (CAHash) computed with the
	// whole token when it was made, so that the server can answer
	// cluster-info for it without keeping the secret (a MAC of a public
	// certificate reveals nothing usable).
	CAMAC []byte `json:"caMAC"`
	// CAHash is the SHA-256 of the CA PEM the MAC covers.
	CAHash []byte `json:"caSHA256"`
	// Expires is when the token stops being accepted; nil means never.
	Expires *time.Time `json:"expires,omitempty"`
	// Description is the administrator's note.
	Description string `json:"description,omitempty"`
	// Created is when the token was made.
	Created time.Time `json:"created"`
}

// Expired reports whether the token is expired at now.
func (r TokenRecord) Expired(now time.Time) bool {
	return r.Expires != nil && !now.Before(*r.Expires)
}

// TokenStore looks join tokens up by id. Get returns an error matching
// ErrTokenNotFound for an unknown id. Implemented by package joinstate.
type TokenStore interface {
	Token(ctx context.Context, id string) (TokenRecord, error)
}

// ParseToken splits a join token of the form <id>.<secret>. ok is false for
// anything else (the server's node-token, for one).
func ParseToken(token string) (id, secret string, ok bool) {
	if len(token) != TokenIDLen+1+TokenSecretLen || token[TokenIDLen] != '.' {
		return "", "", false
	}
	id, secret = token[:TokenIDLen], token[TokenIDLen+1:]
	if !validTokenChars(id) || !validTokenChars(secret) {
		return "", "", false
	}
	return id, secret, true
}

// ValidTokenID reports whether id has the form of a join token id.
func ValidTokenID(id string) bool { return len(id) == TokenIDLen && validTokenChars(id) }

func validTokenChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// tokenSecretPrefix separates the stored hash from any other use of the
// secret.
const tokenSecretPrefix = "nodeplane-join-token-v1\n"

// TokenSecretHash is what the cluster stores of a token's secret part.
func TokenSecretHash(secret string) []byte {
	sum := sha256.Sum256([]byte(tokenSecretPrefix + secret))
	return sum[:]
}

// NewTokenRecord makes a random join token and the record to store for it:
// caPEM is the cluster CA the token's cluster-info MAC covers, expires nil
// for a token that never expires.
func NewTokenRecord(caPEM []byte, now time.Time, expires *time.Time, description string) (token string, rec TokenRecord, err error) {
	id, err := randomTokenString(TokenIDLen)
	if err != nil {
		return "", TokenRecord{}, err
	}
	secret, err := randomTokenString(TokenSecretLen)
	if err != nil {
		return "", TokenRecord{}, err
	}
	token = id + "." + secret
	caHash := sha256.Sum256(caPEM)
	return token, TokenRecord{
		ID:          id,
		SecretHash:  TokenSecretHash(secret),
		CAMAC:       clusterInfoMAC(token, caPEM),
		CAHash:      caHash[:],
		Expires:     expires,
		Description: description,
		Created:     now,
	}, nil
}

func randomTokenString(n int) (string, error) {
	b := make([]byte, n)
	max := big.NewInt(int64(len(tokenAlphabet)))
	for i := range b {
		v, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", fmt.Errorf("generate join token: %w", err)
		}
		b[i] = tokenAlphabet[v.Int64()]
	}
	return string(b), nil
}

// clusterInfoQuery is the query of a cluster-info request: the node name
// (for the server's log) and, for a token of the form <id>.<secret>, its
// public id, so that the server answers with that token's MAC.
func clusterInfoQuery(nodeName, token string) url.Values {
	q := url.Values{"nodeName": {nodeName}}
	if id, _, ok := ParseToken(token); ok {
		q.Set("tokenID", id)
	}
	return q
}
