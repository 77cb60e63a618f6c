package loadgen

import (
	"encoding/json"
	"testing"
)

func TestNewNodeIsRealistic(t *testing.T) {
	n := NewNode(NodeName("load-", 70_000), 70_000, t0)
	data, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 3000 || len(data) > 5000 {
		t.Errorf("node is %d bytes of JSON, want 3–5 KB like a kubelet's", len(data))
	}
	if got := len(n.Status.Conditions); got != 5 {
		t.Errorf("%d conditions, want 5", got)
	}
	if n.Labels["kubernetes.io/hostname"] != n.Name {
		t.Errorf("hostname label %q, want the node name %q", n.Labels["kubernetes.io/hostname"], n.Name)
	}
	if other := NewNode(NodeName("load-", 70_001), 70_001, t0); other.Spec.ProviderID == n.Spec.ProviderID || other.Status.Addresses[0] == n.Status.Addresses[0] {
		t.Error("two nodes share a provider ID or an address")
	}
}

func TestNewLeaseIsOwnedByItsNode(t *testing.T) {
	n := NewNode("load-node-000001", 1, t0)
	n.UID = "uid-1"
	l := NewLease(n.Name, t0, n)
	if l.Namespace != NodeLeaseNamespace || *l.Spec.HolderIdentity != n.Name || *l.Spec.LeaseDurationSeconds != 40 {
		t.Errorf("lease %s/%s holder %q duration %d, want %s/%s holder %q duration 40", l.Namespace, l.Name, *l.Spec.HolderIdentity, *l.Spec.LeaseDurationSeconds, NodeLeaseNamespace, n.Name, n.Name)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != "uid-1" || l.OwnerReferences[0].Kind != "Node" {
		t.Errorf("owner references %+v, want the node", l.OwnerReferences)
	}
	if l := NewLease("x", t0, nil); len(l.OwnerReferences) != 0 {
		t.Errorf("a lease without a node has owners %+v", l.OwnerReferences)
	}
}
