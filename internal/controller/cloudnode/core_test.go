package cloudnode_test

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/nodeplane/nodeplane/internal/controller/cloudnode"
)

func uninitialized() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "user", Effect: corev1.TaintEffectNoSchedule},
			{Key: cloudnode.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "n1"}, {Type: corev1.NodeInternalIP, Address: "192.168.0.9"}}},
	}
}

var md = &cloudprovider.InstanceMetadata{
	ProviderID: "docker://abc", InstanceType: "small", Zone: "z1", Region: "r1",
	NodeAddresses:    []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.17.0.5"}},
	AdditionalLabels: map[string]string{"rack": "r7", "kubernetes.io/hostname": "evil", "x.k8s.io/y": "no", "kubernetes.io/hostnamex": "no"},
}

func TestInitialize(t *testing.T) {
	tests := []struct {
		name       string
		node       func() *corev1.Node
		md         *cloudprovider.InstanceMetadata
		wantErr    string
		wantID     string
		wantLabels map[string]string
		wantAddrs  []corev1.NodeAddress
	}{
		{
			name: "an uninitialized node gets provider ID, labels, addresses, and loses the taint",
			node: uninitialized, md: md, wantID: "docker://abc",
			wantLabels: map[string]string{
				"kubernetes.io/hostname": "n1", "rack": "r7",
				"node.kubernetes.io/instance-type": "small", "beta.kubernetes.io/instance-type": "small",
				"topology.kubernetes.io/zone": "z1", "failure-domain.beta.kubernetes.io/zone": "z1",
				"topology.kubernetes.io/region": "r1", "failure-domain.beta.kubernetes.io/region": "r1",
			},
			wantAddrs: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.17.0.5"}, {Type: corev1.NodeHostName, Address: "n1"}},
		},
		{
			name: "an existing provider ID is kept and unknown metadata sets no labels",
			node: func() *corev1.Node { n := uninitialized(); n.Spec.ProviderID = "docker://mine"; return n },
			md:   &cloudprovider.InstanceMetadata{ProviderID: "docker://abc"}, wantID: "docker://mine",
			wantLabels: map[string]string{"kubernetes.io/hostname": "n1"},
			wantAddrs:  []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "n1"}},
		},
		{
			name: "a provided node IP among the provider's addresses is accepted",
			node: func() *corev1.Node {
				n := uninitialized()
				n.Annotations = map[string]string{cloudnode.AnnotationProvidedNodeIP: "172.17.0.5"}
				return n
			},
			md: md, wantID: "docker://abc",
		},
		{
			name: "a provided node IP the provider does not know keeps the taint",
			node: func() *corev1.Node {
				n := uninitialized()
				n.Annotations = map[string]string{cloudnode.AnnotationProvidedNodeIP: "10.1.1.1"}
				return n
			},
			md: md, wantErr: "failed to get node address from cloud provider that matches ip: 10.1.1.1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tt.node()
			addrs, err := cloudnode.Initialize(n, tt.md)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cloudnode.IsUninitialized(n) || len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "user" {
				t.Errorf("taints %+v, want only the user's", n.Spec.Taints)
			}
			if n.Spec.ProviderID != tt.wantID {
				t.Errorf("providerID %q, want %q", n.Spec.ProviderID, tt.wantID)
			}
			if tt.wantLabels != nil && !reflect.DeepEqual(n.Labels, tt.wantLabels) {
				t.Errorf("labels %v\nwant %v", n.Labels, tt.wantLabels)
			}
			if tt.wantAddrs != nil && !reflect.DeepEqual(addrs, tt.wantAddrs) {
				t.Errorf("addresses %v, want %v", addrs, tt.wantAddrs)
			}
		})
	}
}

func TestSyncAddresses(t *testing.T) {
	n := uninitialized()
	n.Spec.Taints = nil
	tests := []struct {
		name     string
		provider []corev1.NodeAddress
		changed  bool
	}{
		{"no provider addresses changes nothing", nil, false},
		{"the same addresses in another order are rewritten in the provider's order",
			[]corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.9"}}, true},
		{"a new address is a change", []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, changed := cloudnode.SyncAddresses(n, tt.provider); changed != tt.changed {
				t.Errorf("changed = %v, want %v", changed, tt.changed)
			}
		})
	}
	// Order matters for the status: the provider's first, then the kept Hostname.
	same := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.9"}, {Type: corev1.NodeHostName, Address: "n1"}}
	n.Status.Addresses = same
	if _, changed := cloudnode.SyncAddresses(n, same[:1]); changed {
		t.Error("unchanged addresses reported as a change")
	}
}

func TestReconcileLabels(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"node.kubernetes.io/instance-type": "big", "beta.kubernetes.io/instance-type": "small"}}}
	if !cloudnode.ReconcileLabels(n) || n.Labels["beta.kubernetes.io/instance-type"] != "big" {
		t.Fatalf("labels %v", n.Labels)
	}
	if cloudnode.ReconcileLabels(n) {
		t.Fatal("second reconcile changed something")
	}
	if cloudnode.ReconcileLabels(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"beta.kubernetes.io/instance-type": "small"}}}) {
		t.Fatal("no stable label, yet a change")
	}
}
