package join

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
)

// nodeTokenPrefix starts every node bearer token; it names the format's
// version and lets NodeTokens tell its tokens from others.
const nodeTokenPrefix = "npn1."

// minSigningKeyBytes is the shortest signing key NewNodeTokens accepts.
const minSigningKeyBytes = 32

// nodeTokenPayload is what a node bearer token asserts.
type nodeTokenPayload struct {
	Node string `json:"node"`
	// Exp is the expiry in Unix seconds.
	Exp int64 `json:"exp"`
}

// NodeTokens issues and authenticates node bearer tokens (see the package
// documentation for the format). It is an authn.Authenticator: a bearer
// token of its format with a valid signature and a future expiry is the
// node system:node:<name> in groups system:nodes and system:authenticated;
// an expired, malformed or wrongly signed one is an error matching
// authn.ErrInvalidToken; any other request (no bearer token, or one that is
// not of this format) is not its business, so an authn.Union goes on to the
// next authenticator. Safe for concurrent use.
type NodeTokens struct {
	key   []byte
	clock clock.PassiveClock
}

// NewNodeTokens returns the authenticator for tokens signed with key (at
// least 32 bytes; pki.Cluster.NodeTokenSigningKey), judging expiry by clk
// (nil: the real clock).
func NewNodeTokens(key []byte, clk clock.PassiveClock) (*NodeTokens, error) {
	if len(key) < minSigningKeyBytes {
		return nil, fmt.Errorf("node token signing key has %d bytes, want at least %d", len(key), minSigningKeyBytes)
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &NodeTokens{key: append([]byte(nil), key...), clock: clk}, nil
}

// issue returns a token for nodeName that expires at expires (whole
// seconds, rounded down).
func (t *NodeTokens) issue(nodeName string, expires time.Time) (string, error) {
	payload, err := json.Marshal(nodeTokenPayload{Node: nodeName, Exp: expires.Unix()})
	if err != nil {
		return "", fmt.Errorf("encode node token: %w", err)
	}
	signed := nodeTokenPrefix + base64.RawURLEncoding.EncodeToString(payload)
	return signed + "." + base64.RawURLEncoding.EncodeToString(t.mac(signed)), nil
}

func (t *NodeTokens) mac(signed string) []byte {
	m := hmac.New(sha256.New, t.key)
	m.Write([]byte(signed))
	return m.Sum(nil)
}

// Authenticate implements authn.Authenticator.
func (t *NodeTokens) Authenticate(r *http.Request) (*authn.User, bool, error) {
	token, ok := bearerToken(r)
	if !ok || !strings.HasPrefix(token, nodeTokenPrefix) {
		return nil, false, nil
	}
	nodeName, err := t.verify(token)
	if err != nil {
		return nil, false, err
	}
	return &authn.User{
		Name:   NodeUser(nodeName),
		Groups: []string{authn.GroupNodes, authn.GroupAuthenticated},
	}, true, nil
}

// verify checks a token of our format and returns its node name. Errors
// match authn.ErrInvalidToken.
func (t *NodeTokens) verify(token string) (string, error) {
	signed, sig, ok := cutLast(token, ".")
	if !ok {
		return "", fmt.Errorf("%w: malformed node token", authn.ErrInvalidToken)
	}
	gotMAC, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(gotMAC, t.mac(signed)) {
		return "", fmt.Errorf("%w: node token signature does not verify", authn.ErrInvalidToken)
	}
	// Signed by us from here on: decoding failures are bugs, not attacks,
	// but are still refused.
	p, err := decodeNodeTokenPayload(signed)
	if err != nil {
		return "", fmt.Errorf("%w: %w", authn.ErrInvalidToken, err)
	}
	if exp := time.Unix(p.Exp, 0); !t.clock.Now().Before(exp) {
		return "", fmt.Errorf("%w: node token for %q expired at %s", authn.ErrInvalidToken, p.Node, exp.UTC().Format(time.RFC3339))
	}
	return p.Node, nil
}

// TokenExpiry returns when a node bearer token expires, without verifying
// its signature (the caller holds the token it was given; the server does
// the verifying). A client uses it to request a new token in time.
func TokenExpiry(token string) (time.Time, error) {
	signed, _, ok := cutLast(token, ".")
	if !ok || !strings.HasPrefix(signed, nodeTokenPrefix) {
		return time.Time{}, errors.New("not a node bearer token")
	}
	p, err := decodeNodeTokenPayload(signed)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(p.Exp, 0), nil
}

// decodeNodeTokenPayload decodes the "npn1.<payload>" part of a token.
func decodeNodeTokenPayload(signed string) (nodeTokenPayload, error) {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(signed, nodeTokenPrefix))
	if err != nil {
		return nodeTokenPayload{}, fmt.Errorf("decode node token payload: %w", err)
	}
	var p nodeTokenPayload
	if err := json.Unmarshal(raw, &p); err != nil {
		return nodeTokenPayload{}, fmt.Errorf("decode node token payload: %w", err)
	}
	if p.Node == "" {
		return nodeTokenPayload{}, errors.New("node token names no node")
	}
	return p, nil
}

// cutLast splits s around the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header (scheme case-insensitive), or ok=false if there is none.
func bearerToken(r *http.Request) (token string, ok bool) {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(rest)
	return token, token != ""
}
