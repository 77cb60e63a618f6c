package join_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/join"
)

// takeoverFixture is a join server with the takeover check on, and agent A
// joined as n1.
type takeoverFixture struct {
	*fixture
	identities *memIdentities
	nodes      *fakeNodes
	a          *join.Identity
	aConfig    join.ClientConfig
}

const takeoverCertTTL = 100 * time.Hour // plus one hour of backdating

func newTakeoverFixture(t *testing.T) *takeoverFixture {
	t.Helper()
	tf := &takeoverFixture{identities: newMemIdentities(), nodes: newFakeNodes()}
	tf.fixture = newFixture(t, fixtureOptions{certTTL: takeoverCertTTL, identities: tf.identities, nodes: tf.nodes})
	tf.aConfig = tf.clientConfig(t, "n1")
	var err error
	if tf.a, err = join.Ensure(context.Background(), tf.aConfig); err != nil {
		t.Fatalf("agent A joins a node that does not exist yet: %v", err)
	}
	tf.renewLease("n1")
	return tf
}

// renewLease makes node's Lease look renewed now.
func (tf *takeoverFixture) renewLease(node string) {
	tf.nodes.set(node, join.NodeState{Exists: true, LeaseRenewed: tf.clock.Now(), LeaseDuration: 40 * time.Second})
}

func recordedKeyIs(t *testing.T, tf *takeoverFixture, node string, cert *x509.Certificate) bool {
	t.Helper()
	rec, ok := tf.identities.get(node)
	if !ok {
		t.Fatalf("no identity recorded for %s", node)
	}
	der, err := x509.MarshalPKIXPublicKey(cert.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	want := sha256Sum(der)
	return bytes.Equal(rec.KeySHA256, want)
}

func TestTakeoverOfALiveNode(t *testing.T) {
	const refusal = `node "n1" is already joined with a live identity; delete the Node to re-join it`
	tests := []struct {
		name string
		// before runs after A joined and renewed its lease.
		before      func(tf *takeoverFixture)
		wantRefused bool
	}{
		{name: "a new key for a live node is refused", before: func(*takeoverFixture) {}, wantRefused: true},
		{name: "a new key is admitted once the admin deleted the Node", before: func(tf *takeoverFixture) {
			tf.nodes.set("n1", join.NodeState{})
		}},
		{name: "a new key is admitted when the lease stopped renewing", before: func(tf *takeoverFixture) {
			tf.clock.Step(41 * time.Second)
		}},
		{name: "a new key is admitted when the live identity's certificate has expired", before: func(tf *takeoverFixture) {
			tf.clock.Step(takeoverCertTTL + 2*time.Hour)
			tf.renewLease("n1") // somebody else keeps the lease going
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tf := newTakeoverFixture(t)
			tt.before(tf)
			b := tf.clientConfig(t, "n1") // fresh data dir: a new key
			id, err := join.Ensure(context.Background(), b)
			if tt.wantRefused {
				if err == nil || !strings.Contains(err.Error(), refusal) {
					t.Fatalf("Ensure: %v, want the refusal %q", err, refusal)
				}
				if !recordedKeyIs(t, tf, "n1", tf.a.Certificate()) {
					t.Error("the refused join changed n1's recorded identity")
				}
				return
			}
			if err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			if !recordedKeyIs(t, tf, "n1", id.Certificate()) {
				t.Error("the admitted join is not n1's recorded identity")
			}
		})
	}
}

func TestALiveNodeKeepsItsIdentity(t *testing.T) {
	t.Run("an agent re-joins with its own key when its certificate is due for renewal", func(t *testing.T) {
		tf := newTakeoverFixture(t)
		tf.clock.Step(85 * time.Hour) // less than a fifth left: Ensure re-joins with the token
		tf.renewLease("n1")
		id, err := join.Ensure(context.Background(), tf.aConfig)
		if err != nil {
			t.Fatalf("Ensure: %v", err)
		}
		if tf.count("v1/certificate") != 2 {
			t.Fatalf("certificate requests = %d, want a second join", tf.count("v1/certificate"))
		}
		if id.Certificate().SerialNumber.Cmp(tf.a.Certificate().SerialNumber) == 0 {
			t.Error("the certificate was not replaced")
		}
		if !recordedKeyIs(t, tf, "n1", id.Certificate()) {
			t.Error("the re-join is not n1's recorded identity")
		}
	})
	t.Run("a renewal records the node's new key", func(t *testing.T) {
		tf := newTakeoverFixture(t)
		if err := tf.a.Renew(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !recordedKeyIs(t, tf, "n1", tf.a.Certificate()) {
			t.Error("the renewed certificate's key is not recorded")
		}
		b := tf.clientConfig(t, "n1")
		if _, err := join.Ensure(context.Background(), b); err == nil {
			t.Error("a new key was admitted after the renewal")
		}
	})
	t.Run("a node bearer token is refused for a node whose live identity is a certificate", func(t *testing.T) {
		tf := newTakeoverFixture(t)
		cfg := tf.clientConfig(t, "n1")
		if _, _, err := join.RequestToken(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "already joined with a live identity") {
			t.Fatalf("RequestToken: %v, want the takeover refusal", err)
		}
	})
	t.Run("a node bearer token is issued again for a live simulated node", func(t *testing.T) {
		tf := newTakeoverFixture(t)
		cfg := tf.clientConfig(t, "sim-1")
		for i := range 2 {
			if _, _, err := join.RequestToken(context.Background(), cfg); err != nil {
				t.Fatalf("token %d: %v", i, err)
			}
			tf.renewLease("sim-1")
		}
	})
}
