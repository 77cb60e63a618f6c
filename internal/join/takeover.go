package join

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrIdentityNotFound: no identity was recorded for the node.
var ErrIdentityNotFound = errors.New("no node identity recorded")

// ErrIdentityConflict: the recorded identity changed since it was read.
var ErrIdentityConflict = errors.New("node identity changed concurrently")

// IssuedIdentity is the certificate the join server last issued to a node
// (at a join or a renewal). It is how the server knows a node's current
// key.
type IssuedIdentity struct {
	// Node is the node name.
	Node string `json:"node"`
	// KeySHA256 is the SHA-256 of the certificate's public key
	// (SubjectPublicKeyInfo, DER).
	KeySHA256 []byte `json:"keySHA256"`
	// NotAfter is when the certificate expires.
	NotAfter time.Time `json:"notAfter"`
}

// IdentityStore records the identity issued to each node. Identity returns
// an error matching ErrIdentityNotFound when there is none, and a version
// to pass to PutIdentity (0 when there is none); PutIdentity fails with an
// error matching ErrIdentityConflict when the record's version is no
// longer version. Implemented by package joinstate.
type IdentityStore interface {
	Identity(ctx context.Context, node string) (IssuedIdentity, int64, error)
	PutIdentity(ctx context.Context, id IssuedIdentity, version int64) error
}

// NodeState is what the takeover check needs to know about a node, read
// through the API.
type NodeState struct {
	// Exists: the Node object exists.
	Exists bool
	// LeaseRenewed is the spec.renewTime of the node's Lease in
	// kube-node-lease (zero if there is none); LeaseDuration its
	// spec.leaseDurationSeconds.
	LeaseRenewed  time.Time
	LeaseDuration time.Duration
}

// leaseLive reports whether the lease was renewed within its duration.
func (s NodeState) leaseLive(now time.Time) bool {
	return !s.LeaseRenewed.IsZero() && now.Before(s.LeaseRenewed.Add(s.LeaseDuration))
}

// NodeReader reads a node's state through the API. Implemented by package
// joinstate over client-go.
type NodeReader interface {
	NodeState(ctx context.Context, node string) (NodeState, error)
}

// keySHA256 fingerprints a public key.
func keySHA256(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return sum[:], nil
}

// takeoverVerdict is the outcome of a takeover decision.
type takeoverVerdict int

const (
	// admit: nothing live stands in the way.
	admit takeoverVerdict = iota
	// admitSameKey: the joining key is the node's current one.
	admitSameKey
	// refuseLive: the node has a live, different identity.
	refuseLive
)

// decideTakeover is the pure core of the takeover check for a request to
// become node's identity. rec is the recorded identity (nil if none), key
// the joining key's fingerprint (nil for a node bearer token, which has no
// key), state the node as the API sees it (nil if it was not needed yet:
// the decision then says needState).
//
// A node has a live identity when its Node exists, its Lease was renewed
// within the lease duration and its recorded certificate has not expired
// (with no record, any renewing node counts as live: its identity predates
// the records or is not a certificate). Such a node is only re-joined with
// its own key; the administrator deletes the Node to hand the name to
// another. Bearer tokens (the simulator's) are refused only for a node
// whose live identity is a recorded certificate: they carry no key to tell
// their holders apart, and the simulator asks again for the nodes it runs.
func decideTakeover(rec *IssuedIdentity, key []byte, state *NodeState, now time.Time) (v takeoverVerdict, needState bool) {
	if rec != nil && key != nil && string(rec.KeySHA256) == string(key) {
		return admitSameKey, false
	}
	certLive := rec != nil && now.Before(rec.NotAfter)
	if key == nil && !certLive {
		return admit, false
	}
	if rec != nil && !certLive {
		return admit, false
	}
	if state == nil {
		return admit, true
	}
	if !state.Exists || !state.leaseLive(now) {
		return admit, false
	}
	return refuseLive, false
}

// alreadyJoined is the 409 for a node with a live identity.
func alreadyJoined(node string) *metav1.Status {
	return statusFor(http.StatusConflict, metav1.StatusReasonConflict,
		fmt.Sprintf("node %q is already joined with a live identity; delete the Node to re-join it", node),
		&metav1.StatusDetails{Name: node, Kind: "nodes"})
}
