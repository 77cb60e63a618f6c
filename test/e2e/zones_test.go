package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestZoneOutages uses nodeplane sim: a whole zone of 20 nodes (of 3 zones)
// goes silent → its nodes get NoExecute taints one at a time at the eviction
// rate, visible in `nodeplane zones`; it comes back → taints removed. Then
// every zone goes silent → no NoExecute taint at all (full disruption
// everywhere), and when they return no node is marked again.
func TestZoneOutages(t *testing.T) {
	ctx := context.Background()
	args := append(append([]string{}, shortLifecycle...), "--node-eviction-rate=1", "--leader-elect=false")
	s := startServer(t, serverOptions{args: args})
	cs := s.client()
	control := startSim(t, s, "--nodes", "60", "--zones", "a,b,c", "--node-lease-duration", "4s",
		"--node-status-update-frequency", "1s")
	zoneNodes := func(zone string) []corev1.Node {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.Set{"topology.kubernetes.io/zone": zone}.String()})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	noExecute := func(n corev1.Node) *corev1.Taint {
		for _, tn := range n.Spec.Taints {
			if tn.Effect == corev1.TaintEffectNoExecute {
				return &tn
			}
		}
		return nil
	}
	healthy := func() error {
		for _, z := range []string{"a", "b", "c"} {
			for _, n := range zoneNodes(z) {
				if condition(&n, corev1.NodeReady).Status != corev1.ConditionTrue || len(n.Spec.Taints) != 0 {
					return fmt.Errorf("%s: ready %s taints %v", n.Name, condition(&n, corev1.NodeReady).Status, n.Spec.Taints)
				}
			}
		}
		return nil
	}
	eventually(t, 60*time.Second, "60 Ready untainted nodes", healthy)
	post(t, control+"/pause?zone=b")

	eventually(t, 60*time.Second, "every zone-b node NoExecute-tainted", func() error {
		for _, n := range zoneNodes("b") {
			if noExecute(n) == nil {
				return fmt.Errorf("%s has no NoExecute taint yet", n.Name)
			}
		}
		return nil
	})
	var added []time.Time
	for _, n := range zoneNodes("b") {
		added = append(added, noExecute(n).TimeAdded.Time)
	}
	sort.Slice(added, func(i, j int) bool { return added[i].Before(added[j]) })
	for i := 1; i < len(added); i++ {
		// 1 taint/s; timeAdded has one-second resolution, so taints at
		// least 1 s apart never share a second.
		if !added[i].After(added[i-1]) {
			t.Errorf("taints %d and %d added in the same second (%v): faster than --node-eviction-rate=1", i-1, i, added[i])
		}
	}
	if span := added[len(added)-1].Sub(added[0]); span < 17*time.Second {
		t.Errorf("20 taints over %v, want about 19 s at 1/s", span)
	}
	for _, z := range []string{"a", "c"} {
		for _, n := range zoneNodes(z) {
			if len(n.Spec.Taints) != 0 {
				t.Errorf("node %s in healthy zone %s tainted: %v", n.Name, z, n.Spec.Taints)
			}
		}
	}
	zones := s.mustKubectlLike(t, "zones", "-o", "json")
	var view struct {
		Leading bool `json:"leading"`
		View    struct {
			Zones []struct {
				Name      string  `json:"name"`
				State     string  `json:"state"`
				Size      int     `json:"size"`
				Unhealthy int     `json:"unhealthy"`
				TaintRate float64 `json:"taintRate"`
			} `json:"zones"`
		} `json:"view"`
	}
	if err := json.Unmarshal([]byte(zones), &view); err != nil {
		t.Fatalf("nodeplane zones -o json: %v\n%s", err, zones)
	}
	if !view.Leading || len(view.View.Zones) != 3 {
		t.Fatalf("zones view: %s", zones)
	}
	for _, z := range view.View.Zones {
		if strings.HasSuffix(z.Name, "b") && (z.State != "FullDisruption" || z.Unhealthy != 20 || z.Size != 20) {
			t.Errorf("zone b in the view: %+v", z)
		}
		if !strings.HasSuffix(z.Name, "b") && z.State != "Normal" {
			t.Errorf("zone %s in the view: %+v", z.Name, z)
		}
	}
	if table := s.mustKubectlLike(t, "zones", "--nodes"); !strings.Contains(table, "FullDisruption") || !strings.Contains(table, "sim-01") {
		t.Errorf("nodeplane zones table:\n%s", table)
	}

	post(t, control+"/resume?zone=b")
	eventually(t, 30*time.Second, "zone b back: taints removed", healthy)

	// Every zone silent: full disruption everywhere, no NoExecute taints.
	for _, z := range []string{"a", "b", "c"} {
		post(t, control+"/pause?zone="+z)
	}
	eventually(t, 30*time.Second, "every node Unknown", func() error {
		for _, z := range []string{"a", "b", "c"} {
			for _, n := range zoneNodes(z) {
				if condition(&n, corev1.NodeReady).Status != corev1.ConditionUnknown {
					return fmt.Errorf("%s still %s", n.Name, condition(&n, corev1.NodeReady).Status)
				}
			}
		}
		return nil
	})
	never(t, 5*time.Second, "a node NoExecute-tainted while every zone is down", func() error {
		for _, z := range []string{"a", "b", "c"} {
			for _, n := range zoneNodes(z) {
				if tn := noExecute(n); tn != nil {
					return fmt.Errorf("node %s: %v", n.Name, tn)
				}
			}
		}
		return nil
	})
	for _, z := range []string{"a", "b", "c"} {
		post(t, control+"/resume?zone="+z)
	}
	eventually(t, 30*time.Second, "all back", healthy)
}

// mustKubectlLike runs a nodeplane subcommand with the server's admin
// kubeconfig.
func (s *serverProc) mustKubectlLike(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append(args, "--kubeconfig", s.kubeconfig())...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("nodeplane %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return string(b)
}
