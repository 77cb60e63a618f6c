package join

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// causeTokenExpired marks the Status of an expired join token, so that the
// agent can say so without matching the message.
const causeTokenExpired metav1.CauseType = "JoinTokenExpired"

// tokenExpired is the 401 for an expired join token.
func tokenExpired(id string) *metav1.Status {
	return statusFor(http.StatusUnauthorized, metav1.StatusReasonUnauthorized, ErrTokenExpired.Error(),
		&metav1.StatusDetails{Name: id, Kind: "JoinToken", Causes: []metav1.StatusCause{{Type: causeTokenExpired, Message: ErrTokenExpired.Error()}}})
}

// isTokenExpiredStatus reports whether st says the join token expired.
func isTokenExpiredStatus(st metav1.Status) bool {
	if st.Details == nil {
		return false
	}
	for _, c := range st.Details.Causes {
		if c.Type == causeTokenExpired {
			return true
		}
	}
	return false
}

// unavailable is a 503 for state the server could not read or write; the
// agent retries.
func unavailable(what string, err error) *metav1.Status {
	st := apierrors.NewServiceUnavailable(fmt.Sprintf("%s: %v", what, err)).ErrStatus
	return &st
}

// checkSecret checks a join token: the server's node-token, or a token of
// the form <id>.<secret> found in the token store, whose secret hash
// matches and which has not expired. The reason is for the log only.
func (s *Server) checkSecret(ctx context.Context, token string) (st *metav1.Status, reason string) {
	if token == "" {
		return tokenRejected(), "missing join token"
	}
	// Hashing first makes the comparison constant-time in the length too.
	got := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(got[:], s.secretSum[:]) == 1 {
		return nil, ""
	}
	id, secret, ok := ParseToken(token)
	if !ok || s.tokenStore == nil {
		return tokenRejected(), "wrong join token"
	}
	rec, err := s.tokenStore.Token(ctx, id)
	if errors.Is(err, ErrTokenNotFound) {
		return tokenRejected(), "unknown join token id " + id
	}
	if err != nil {
		return unavailable("read join token", err), "token store: " + err.Error()
	}
	if subtle.ConstantTimeCompare(TokenSecretHash(secret), rec.SecretHash) != 1 {
		return tokenRejected(), "wrong secret for join token " + id
	}
	if rec.Expired(s.clock.Now()) {
		return tokenExpired(id), "join token " + id + " expired"
	}
	return nil, ""
}

// clusterInfoMACFor returns the cluster-info MAC for the token the agent
// names by its id: the one computed when the token was made. An empty or
// unknown id gets the node-token's MAC (an agent holding another token
// then finds that the MAC does not verify, as with a wrong token).
func (s *Server) clusterInfoMACFor(ctx context.Context, tokenID string, caPEM []byte) ([]byte, *metav1.Status) {
	if tokenID == "" || s.tokenStore == nil || !ValidTokenID(tokenID) {
		return clusterInfoMAC(s.secret, caPEM), nil
	}
	rec, err := s.tokenStore.Token(ctx, tokenID)
	if errors.Is(err, ErrTokenNotFound) {
		return clusterInfoMAC(s.secret, caPEM), nil
	}
	if err != nil {
		return nil, unavailable("read join token", err)
	}
	if rec.Expired(s.clock.Now()) {
		return nil, tokenExpired(tokenID)
	}
	if sum := sha256.Sum256(caPEM); !bytes.Equal(sum[:], rec.CAHash) {
		return nil, statusFor(http.StatusUnauthorized, metav1.StatusReasonUnauthorized,
			fmt.Sprintf("join token %s was made for another cluster CA; create a new one", tokenID), nil)
	}
	return rec.CAMAC, nil
}

// admitCertificate runs the takeover check for a join of node with key
// pub. It returns the version of the node's identity record to replace.
func (s *Server) admitCertificate(ctx context.Context, node string, pub crypto.PublicKey) (int64, *metav1.Status) {
	if s.identities == nil {
		return 0, nil
	}
	key, err := keySHA256(pub)
	if err != nil {
		return 0, badField("csr", err)
	}
	return s.admit(ctx, node, key)
}

// admitNodeToken runs the takeover check for a node bearer token.
func (s *Server) admitNodeToken(ctx context.Context, node string) *metav1.Status {
	if s.identities == nil {
		return nil
	}
	_, st := s.admit(ctx, node, nil)
	return st
}

func (s *Server) admit(ctx context.Context, node string, key []byte) (int64, *metav1.Status) {
	var rec *IssuedIdentity
	got, version, err := s.identities.Identity(ctx, node)
	switch {
	case err == nil:
		rec = &got
	case errors.Is(err, ErrIdentityNotFound):
	default:
		return 0, unavailable("read node identity", err)
	}
	now := s.clock.Now()
	v, needState := decideTakeover(rec, key, nil, now)
	if needState {
		state, err := s.nodes.NodeState(ctx, node)
		if err != nil {
			return 0, unavailable("read node "+node, err)
		}
		v, _ = decideTakeover(rec, key, &state, now)
	}
	if v == refuseLive {
		return 0, alreadyJoined(node)
	}
	return version, nil
}

// recordIdentity records the certificate just issued to node, replacing
// the record at version.
func (s *Server) recordIdentity(ctx context.Context, node string, pub crypto.PublicKey, notAfter time.Time, version int64) *metav1.Status {
	if s.identities == nil {
		return nil
	}
	key, err := keySHA256(pub)
	if err != nil {
		return badField("csr", err)
	}
	err = s.identities.PutIdentity(ctx, IssuedIdentity{Node: node, KeySHA256: key, NotAfter: notAfter}, version)
	if errors.Is(err, ErrIdentityConflict) {
		return statusFor(http.StatusConflict, metav1.StatusReasonConflict,
			fmt.Sprintf("node %q was joined or renewed concurrently; try again", node), &metav1.StatusDetails{Name: node, Kind: "nodes"})
	}
	if err != nil {
		return unavailable("record node identity", err)
	}
	return nil
}

// renewVersion returns the version of node's identity record, for a
// renewal to replace whatever is there.
func (s *Server) renewVersion(ctx context.Context, node string) (int64, *metav1.Status) {
	if s.identities == nil {
		return 0, nil
	}
	_, version, err := s.identities.Identity(ctx, node)
	if err != nil && !errors.Is(err, ErrIdentityNotFound) {
		return 0, unavailable("read node identity", err)
	}
	return version, nil
}
