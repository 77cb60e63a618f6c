package join

import (
	"testing"
	"time"
)

func TestDecideTakeover(t *testing.T) {
	now := time.Date(2031, 3, 14, 15, 9, 26, 0, time.UTC)
	keyA, keyB := []byte("key of A"), []byte("key of B")
	valid := &IssuedIdentity{Node: "n1", KeySHA256: keyA, NotAfter: now.Add(time.Hour)}
	expired := &IssuedIdentity{Node: "n1", KeySHA256: keyA, NotAfter: now.Add(-time.Second)}
	live := &NodeState{Exists: true, LeaseRenewed: now.Add(-10 * time.Second), LeaseDuration: 40 * time.Second}
	stale := &NodeState{Exists: true, LeaseRenewed: now.Add(-41 * time.Second), LeaseDuration: 40 * time.Second}
	noLease := &NodeState{Exists: true}
	deleted := &NodeState{}

	tests := []struct {
		name  string
		rec   *IssuedIdentity
		key   []byte
		state *NodeState
		want  takeoverVerdict
	}{
		{name: "a new key for a live node with a valid certificate is refused", rec: valid, key: keyB, state: live, want: refuseLive},
		{name: "the node's own key is admitted while it is live", rec: valid, key: keyA, state: live, want: admitSameKey},
		{name: "a new key is admitted once the Node is deleted", rec: valid, key: keyB, state: deleted, want: admit},
		{name: "a new key is admitted when the lease stopped renewing", rec: valid, key: keyB, state: stale, want: admit},
		{name: "a new key is admitted when the node has no lease", rec: valid, key: keyB, state: noLease, want: admit},
		{name: "a new key is admitted when the recorded certificate has expired", rec: expired, key: keyB, state: live, want: admit},
		{name: "a new key for a live node without a recorded identity is refused", key: keyB, state: live, want: refuseLive},
		{name: "a new key for a node that does not exist is admitted", key: keyB, state: deleted, want: admit},
		{name: "a bearer token for a live node with a valid certificate is refused", rec: valid, state: live, want: refuseLive},
		{name: "a bearer token for a node whose certificate expired is admitted", rec: expired, state: live, want: admit},
		{name: "a bearer token for a live node without a recorded certificate is admitted", state: live, want: admit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, needState := decideTakeover(tt.rec, tt.key, nil, now)
			if needState {
				got, needState = decideTakeover(tt.rec, tt.key, tt.state, now)
				if needState {
					t.Fatal("asked for the node's state again")
				}
			}
			if got != tt.want {
				t.Errorf("verdict = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseToken(t *testing.T) {
	tests := []struct {
		name   string
		token  string
		wantOK bool
	}{
		{name: "an id and a secret of the right lengths parse", token: "abc123.0123456789abcdef", wantOK: true},
		{name: "the server's hex node-token is not of this form", token: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
		{name: "upper case is refused", token: "ABC123.0123456789abcdef"},
		{name: "a short secret is refused", token: "abc123.0123456789abcde"},
		{name: "a long id is refused", token: "abc1234.0123456789abcdef"},
		{name: "another separator is refused", token: "abc123-0123456789abcdef"},
		{name: "the empty string is refused", token: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, secret, ok := ParseToken(tt.token)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			if ok && id+"."+secret != tt.token {
				t.Errorf("parts %q, %q do not make up %q", id, secret, tt.token)
			}
		})
	}
}
