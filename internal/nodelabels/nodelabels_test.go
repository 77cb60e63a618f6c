package nodelabels

import "testing"

func TestAllowedForNode(t *testing.T) {
	tests := []struct {
		name string
		key  string
		want bool
	}{
		{"an unprefixed key is free", "rack", true},
		{"a key in another domain is free", "example.com/rack", true},
		{"the hostname label is a kubelet label", Hostname, true},
		{"the zone label is a kubelet label", Zone, true},
		{"the beta instance type is a kubelet label", BetaInstanceType, true},
		{"a key in node.kubernetes.io is allowed", "node.kubernetes.io/pool", true},
		{"a key in a subdomain of kubelet.kubernetes.io is allowed", "a.kubelet.kubernetes.io/x", true},
		{"the node-role label is refused", "node-role.kubernetes.io/control-plane", false},
		{"an unknown kubernetes.io key is refused", "kubernetes.io/role", false},
		{"a k8s.io subdomain key is refused", "foo.k8s.io/bar", false},
		{"the node-restriction namespace is refused", "node-restriction.kubernetes.io/trusted", false},
		{"a subdomain of node-restriction is refused", "x.node-restriction.kubernetes.io/trusted", false},
		{"a look-alike domain is free", "notkubernetes.io/x", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AllowedForNode(tt.key); got != tt.want {
				t.Errorf("AllowedForNode(%q) = %v, want %v", tt.key, got, tt.want)
			}
		})
	}
}

func TestForbiddenIsSortedAndNilWhenAllAllowed(t *testing.T) {
	if got := Forbidden([]string{"a", Hostname}); got != nil {
		t.Errorf("Forbidden = %v, want nil", got)
	}
	got := Forbidden([]string{"kubernetes.io/role", "a", "foo.k8s.io/b"})
	if len(got) != 2 || got[0] != "foo.k8s.io/b" || got[1] != "kubernetes.io/role" {
		t.Errorf("Forbidden = %v", got)
	}
}
