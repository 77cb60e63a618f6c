package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// TestNodeIPAM runs the server with the range allocator on a dual-stack
// pair whose IPv4 range holds four /24 blocks, the first of them carved out
// by the service range, and checks what a user sees: nodes get one block
// per family in order; a pod on a real agent sees its node's ranges in
// NODEPLANE_POD_CIDR(S); a node that finds the IPv4 range exhausted gets
// the CIDRNotAvailable event and no range, and gets the deleted node's
// IPv4 block as soon as that node is deleted (the IPv6 search goes on from
// where it was: upstream's next-candidate order); the cidrset metrics count
// all of it.
func TestNodeIPAM(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{args: []string{
		"--allocate-node-cidrs", "--cluster-cidr", "10.244.0.0/22,fd00::/48",
		"--node-cidr-mask-size-ipv4", "24", "--service-cluster-ip-range", "10.244.0.0/24",
	}})
	cs := s.client()

	t.Run("nodes get one block per family, past the service range", func(t *testing.T) {
		createNode(t, cs, "ipam-a")
		waitPodCIDRs(t, cs, "ipam-a", "10.244.1.0/24", "fd00::/64")
	})

	t.Run("a pod sees its node's ranges in NODEPLANE_POD_CIDR and NODEPLANE_POD_CIDRS", func(t *testing.T) {
		startAgent(t, s, agentOptions{name: "ipam-agent", config: agentTestConfig})
		waitPodCIDRs(t, cs, "ipam-agent", "10.244.2.0/24", "fd00:0:0:1::/64")
		waitNodesReady(t, cs, 60*time.Second, "ipam-agent")
		s.mustKubectl(t, kubectlPath(t), "apply", "-f", writeManifest(t, podManifest("ipam-env", "ipam-agent",
			`echo "first=$NODEPLANE_POD_CIDR all=$NODEPLANE_POD_CIDRS"; sleep 60`)))
		waitPodPhase(t, cs, "ipam-env", corev1.PodRunning)
		want := "first=10.244.2.0/24 all=10.244.2.0/24,fd00:0:0:1::/64"
		eventually(t, 20*time.Second, "the pod's output", func() error {
			out, err := cs.CoreV1().Pods("default").GetLogs("ipam-env", &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil || !strings.Contains(string(out), want) {
				return fmt.Errorf("logs %q (%v), want %q", out, err, want)
			}
			return nil
		})
	})

	t.Run("an exhausted range gives CIDRNotAvailable, and a deleted node's block goes to the waiting node", func(t *testing.T) {
		createNode(t, cs, "ipam-b")
		waitPodCIDRs(t, cs, "ipam-b", "10.244.3.0/24", "fd00:0:0:2::/64")
		createNode(t, cs, "ipam-c")
		eventually(t, 20*time.Second, "the CIDRNotAvailable event of ipam-c", func() error {
			evs, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", "ipam-c").String()})
			if err != nil {
				return err
			}
			for _, e := range evs.Items {
				if e.Reason == "CIDRNotAvailable" && e.Type == corev1.EventTypeNormal && e.Source.Component == "cidrAllocator" &&
					e.Message == "Node ipam-c status is now: CIDRNotAvailable" && e.InvolvedObject.Kind == "Node" {
					return nil
				}
			}
			return fmt.Errorf("events of ipam-c: %+v", evs.Items)
		})
		if n, err := cs.CoreV1().Nodes().Get(ctx, "ipam-c", metav1.GetOptions{}); err != nil || len(n.Spec.PodCIDRs) > 0 || n.Spec.PodCIDR != "" {
			t.Fatalf("ipam-c with the range exhausted: %v %v %v", n.Spec.PodCIDR, n.Spec.PodCIDRs, err)
		}
		if err := cs.CoreV1().Nodes().Delete(ctx, "ipam-a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPodCIDRs(t, cs, "ipam-c", "10.244.1.0/24", "fd00:0:0:3::/64")
	})

	t.Run("the cidrset metrics count allocations and releases per cluster CIDR", func(t *testing.T) {
		raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		text := string(raw)
		for _, want := range []string{
			// the service block + ipam-a, ipam-agent, ipam-b, ipam-c
			`node_ipam_controller_cidrset_cidrs_allocations_total{clusterCIDR="10.244.0.0/22"} 5`,
			`node_ipam_controller_cidrset_cidrs_releases_total{clusterCIDR="10.244.0.0/22"} 1`,
			`node_ipam_controller_cidrset_usage_cidrs{clusterCIDR="10.244.0.0/22"} 1`,
			`node_ipam_controller_cidrset_max_cidrs{clusterCIDR="10.244.0.0/22"} 4`,
			`node_ipam_controller_cidrset_max_cidrs{clusterCIDR="fd00::/48"} 65536`,
			`node_ipam_controller_cidrset_cidrs_allocations_total{clusterCIDR="fd00::/48"} 4`,
			`node_ipam_controller_cidrset_allocation_tries_per_request_count{clusterCIDR="fd00::/48"} 4`,
		} {
			if !strings.Contains(text, want) {
				t.Errorf("/metrics lacks %q; node_ipam lines:\n%s", want, grepLines(text, "node_ipam_controller"))
			}
		}
	})

	t.Run("assigned pod CIDRs cannot be changed, even by an administrator", func(t *testing.T) {
		_, err := cs.CoreV1().Nodes().Patch(ctx, "ipam-b", "application/merge-patch+json",
			[]byte(`{"spec":{"podCIDR":"10.244.2.0/24","podCIDRs":["10.244.2.0/24","fd00:0:0:2::/64"]}}`), metav1.PatchOptions{})
		if err == nil || !strings.Contains(err.Error(), "may not change podCIDR") {
			t.Fatalf("changing ipam-b's podCIDRs: %v, want the immutability error", err)
		}
	})
}

// TestNodeIPAMBadFlags: the server refuses to start with upstream's text,
// naming the flag.
func TestNodeIPAMBadFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no cluster CIDR", []string{"--allocate-node-cidrs"}, "--cluster-cidr must be set when --allocate-node-cidrs is true"},
		{"a malformed cluster CIDR", []string{"--allocate-node-cidrs", "--cluster-cidr", "10.244.0.0/33"}, "--cluster-cidr: invalid CIDR[0]"},
		{"two IPv4 cluster CIDRs", []string{"--allocate-node-cidrs", "--cluster-cidr", "10.0.0.0/16,10.1.0.0/16"}, "they are not configured as dual stack"},
		{"--node-cidr-mask-size with dual stack", []string{"--allocate-node-cidrs", "--cluster-cidr", "10.0.0.0/16,fd00::/48", "--node-cidr-mask-size", "24"},
			"usage of --node-cidr-mask-size is not allowed with dual-stack clusters"},
		{"a node mask larger than the cluster range", []string{"--allocate-node-cidrs", "--cluster-cidr", "10.244.0.0/16", "--node-cidr-mask-size", "8"},
			"--node-cidr-mask-size: node CIDR mask /8 must be between"},
		{"an IPv6 range cut into too many blocks", []string{"--allocate-node-cidrs", "--cluster-cidr", "fd00::/32"},
			"--node-cidr-mask-size-ipv6: New CIDR set failed; the node CIDR size is too big"},
		{"three service ranges", []string{"--service-cluster-ip-range", "10.96.0.0/12,fd01::/108,10.97.0.0/16"}, "--service-cluster-ip-range can not contain more than two entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			args := append([]string{"server", "--data-dir", filepath.Join(t.TempDir(), "data"), "--listen", "127.0.0.1:0"}, tc.args...)
			out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
			if err == nil || ctx.Err() != nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("nodeplane %s: err %v, output:\n%s\nwant a refusal containing %q", strings.Join(args, " "), err, out, tc.want)
			}
		})
	}
}

func createNode(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitPodCIDRs waits until the node has exactly want as spec.podCIDRs (and
// the first as spec.podCIDR).
func waitPodCIDRs(t *testing.T, cs kubernetes.Interface, name string, want ...string) {
	t.Helper()
	eventually(t, 30*time.Second, "podCIDRs of "+name, func() error {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !slices.Equal(n.Spec.PodCIDRs, want) || n.Spec.PodCIDR != want[0] {
			return fmt.Errorf("node %s: podCIDR %q podCIDRs %v, want %v", name, n.Spec.PodCIDR, n.Spec.PodCIDRs, want)
		}
		return nil
	})
}
