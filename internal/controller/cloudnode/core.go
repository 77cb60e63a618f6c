package cloudnode

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/nodeplane/nodeplane/internal/nodelabels"
)

// Names the controller uses (SPEC §7, §10).
const (
	ControllerName = "cloud-node-controller"
	EventSource    = ControllerName

	TaintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"
	// AnnotationProvidedNodeIP is the kubelet's --node-ip when it runs
	// with --cloud-provider=external.
	AnnotationProvidedNodeIP = "alpha.kubernetes.io/provided-node-ip"

	EventSynced   = "Synced"
	MessageSynced = "Node synced successfully"
)

// Defaults (upstream cloud-controller-manager).
const (
	DefaultConcurrentNodeSyncs       = 1
	DefaultNodeStatusUpdateFrequency = 5 * time.Minute
)

// IsUninitialized reports whether node carries the uninitialized taint.
func IsUninitialized(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == TaintUninitialized {
			return true
		}
	}
	return false
}

// Initialize changes node (a copy the caller owns) as the provider's
// metadata says (CNC-1) and returns the addresses to write to its status.
// An error (the kubelet-provided IP is not among the provider's addresses)
// leaves the taint for a retry.
func Initialize(node *corev1.Node, md *cloudprovider.InstanceMetadata) ([]corev1.NodeAddress, error) {
	addrs := md.NodeAddresses
	if ip := node.Annotations[AnnotationProvidedNodeIP]; ip != "" {
		if err := providedIPAmong(ip, addrs); err != nil {
			return nil, err
		}
	}
	if node.Spec.ProviderID == "" {
		node.Spec.ProviderID = md.ProviderID
	}
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	set := func(value string, keys ...string) {
		if value == "" {
			return
		}
		for _, k := range keys {
			node.Labels[k] = value
		}
	}
	set(md.InstanceType, nodelabels.InstanceType, nodelabels.BetaInstanceType)
	set(md.Zone, nodelabels.Zone, nodelabels.BetaZone)
	set(md.Region, nodelabels.Region, nodelabels.BetaRegion)
	for k, v := range md.AdditionalLabels {
		if _, present := node.Labels[k]; present || reservedLabel(k) {
			continue
		}
		node.Labels[k] = v
	}
	node.Spec.Taints = slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t corev1.Taint) bool { return t.Key == TaintUninitialized })
	return addresses(node, addrs), nil
}

// reservedLabel: keys in the kubernetes.io and k8s.io namespaces.
func reservedLabel(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, d := range []string{"kubernetes.io", "k8s.io"} {
		if prefix == d || strings.HasSuffix(prefix, "."+d) {
			return true
		}
	}
	return false
}

func providedIPAmong(ip string, addrs []corev1.NodeAddress) error {
	want := net.ParseIP(ip)
	for _, a := range addrs {
		if got := net.ParseIP(a.Address); got != nil && want != nil && got.Equal(want) {
			return nil
		}
	}
	return fmt.Errorf("failed to get node address from cloud provider that matches ip: %s", ip)
}

// addresses is what status.addresses becomes: the provider's, keeping the
// node's Hostname address when the provider names none.
func addresses(node *corev1.Node, provider []corev1.NodeAddress) []corev1.NodeAddress {
	out := slices.Clone(provider)
	if slices.ContainsFunc(out, func(a corev1.NodeAddress) bool { return a.Type == corev1.NodeHostName }) {
		return out
	}
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeHostName {
			out = append(out, a)
		}
	}
	return out
}

// SyncAddresses returns the addresses an initialised node should have
// (CNC-2) and whether they differ from its status. No provider addresses
// means no change.
func SyncAddresses(node *corev1.Node, provider []corev1.NodeAddress) ([]corev1.NodeAddress, bool) {
	if len(provider) == 0 {
		return nil, false
	}
	if ip := node.Annotations[AnnotationProvidedNodeIP]; ip != "" && providedIPAmong(ip, provider) != nil {
		return nil, false
	}
	want := addresses(node, provider)
	return want, !slices.Equal(want, node.Status.Addresses)
}

// ReconcileLabels keeps the beta instance-type label equal to the stable
// one (CNC-3) on node (a copy the caller owns); it reports a change.
func ReconcileLabels(node *corev1.Node) bool {
	stable, ok := node.Labels[nodelabels.InstanceType]
	if !ok || node.Labels[nodelabels.BetaInstanceType] == stable {
		return false
	}
	node.Labels[nodelabels.BetaInstanceType] = stable
	return true
}
