package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The node lifecycle and taint eviction controllers' metrics, as listed in
// docs/architecture.md ("Controller metrics"): name → type.
var controllerMetrics = map[string]string{
	"node_collector_zone_size":                                "gauge",
	"node_collector_zone_health":                              "gauge",
	"node_collector_unhealthy_nodes_in_zone":                  "gauge",
	"node_collector_evictions_total":                          "counter",
	"node_collector_update_node_health_duration_seconds":      "histogram",
	"node_collector_update_all_nodes_health_duration_seconds": "histogram",
	"taint_eviction_controller_pod_deletions_total":           "counter",
	"taint_eviction_controller_pod_deletion_duration_seconds": "histogram",
}

// TestControllerMetricsAndNeverPostedNodes scrapes the real /metrics of the
// server: every metric the docs list is there with its type, and the zone
// label is the zone key exactly as kube-controller-manager exports it —
// region + ":\x00:" + zone, "" for a node without zone labels — while
// `nodeplane zones` shows the readable form.
//
// The Nodes made by hand are created while no controller runs and are older
// than --node-startup-grace-period when the controllers start: they must be
// marked Unknown (NodeStatusNeverUpdated) on the first pass, not a whole
// startup grace period later.
func TestControllerMetricsAndNeverPostedNodes(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{apiOnly: true, args: shortLifecycle})
	cs := s.client()
	hand := map[string]map[string]string{
		"hand-r1z1": {corev1.LabelTopologyRegion: "r1", corev1.LabelTopologyZone: "z1"},
		"hand-bare": nil,
	}
	var newest time.Time
	for name, labels := range hand {
		n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := n.CreationTimestamp.Time; c.After(newest) {
			newest = c
		}
	}
	// Past the 8 s startup grace period (creationTimestamp has one-second
	// resolution), then start the controllers.
	eventually(t, 20*time.Second, "hand-made nodes older than the startup grace period", func() error {
		if age := time.Since(newest); age < 10*time.Second {
			return fmt.Errorf("%v old", age)
		}
		return nil
	})
	s.args = shortLifecycle
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	s.start()
	started := time.Now()
	cs = s.client()
	eventually(t, 20*time.Second, "hand-made nodes Unknown", func() error {
		for name := range hand {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if r := condition(n, corev1.NodeReady); r.Status != corev1.ConditionUnknown || r.Reason != "NodeStatusNeverUpdated" {
				return fmt.Errorf("%s Ready %+v", name, r)
			}
		}
		return nil
	})
	// The first pass runs as soon as the informers have synced; a whole
	// startup grace period (8 s) would mean the creation time was ignored.
	if d := time.Since(started); d > 5*time.Second {
		t.Errorf("hand-made nodes marked %v after the controllers started, want on the first pass", d)
	}
	t.Logf("hand-made nodes marked Unknown %v after the server was ready", time.Since(started).Round(10*time.Millisecond))

	control := startSim(t, s, "--nodes", "4", "--zones", "a,b", "--node-lease-duration", "4s", "--node-status-update-frequency", "1s")
	eventually(t, 60*time.Second, "4 Ready sim nodes", func() error {
		for i := 0; i < 4; i++ {
			n, err := cs.CoreV1().Nodes().Get(ctx, fmt.Sprintf("sim-%d", i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if condition(n, corev1.NodeReady).Status != corev1.ConditionTrue {
				return fmt.Errorf("%s not Ready", n.Name)
			}
		}
		return nil
	})
	post(t, control+"/pause?node=sim-0") // zone a

	keyA, keyB, keyR1 := ":\x00:a", ":\x00:b", "r1:\x00:z1"
	var body string
	eventually(t, 40*time.Second, "zone a's eviction counted and every zone's gauges right", func() error {
		raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return err
		}
		body = string(raw)
		want := []struct {
			name, zone string
			value      float64
		}{
			{"node_collector_zone_size", keyA, 2},
			{"node_collector_zone_size", keyB, 2},
			{"node_collector_zone_size", keyR1, 1},
			{"node_collector_zone_size", "", 1},
			{"node_collector_unhealthy_nodes_in_zone", keyA, 1},
			{"node_collector_unhealthy_nodes_in_zone", keyB, 0},
			{"node_collector_unhealthy_nodes_in_zone", keyR1, 1},
			{"node_collector_unhealthy_nodes_in_zone", "", 1},
			{"node_collector_zone_health", keyA, 50},
			{"node_collector_zone_health", keyB, 100},
			{"node_collector_zone_health", keyR1, 0},
			{"node_collector_zone_health", "", 0},
			{"node_collector_evictions_total", keyA, 1},
			{"node_collector_evictions_total", keyB, 0},
			{"node_collector_evictions_total", keyR1, 1},
			{"node_collector_evictions_total", "", 1},
		}
		for _, w := range want {
			got, ok := sample(body, w.name, `zone="`+w.zone+`"`)
			if !ok {
				return fmt.Errorf("no %s{zone=%q}", w.name, w.zone)
			}
			if got != w.value {
				return fmt.Errorf("%s{zone=%q} = %v, want %v", w.name, w.zone, got, w.value)
			}
		}
		return nil
	})
	for name, typ := range controllerMetrics {
		if !strings.Contains(body, "# TYPE "+name+" "+typ+"\n") {
			t.Errorf("/metrics has no %s %s", typ, name)
		}
	}
	for _, name := range []string{"node_collector_zone_size", "node_collector_zone_health", "node_collector_unhealthy_nodes_in_zone", "node_collector_evictions_total"} {
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, name+"{") && (strings.Contains(line, `zone="/`) || strings.Contains(line, `zone="r1/z1"`)) {
				t.Errorf("readable zone name in a metric label: %q", line)
			}
		}
	}
	for _, name := range []string{"taint_eviction_controller_pod_deletions_total", "node_collector_update_all_nodes_health_duration_seconds_count"} {
		if _, ok := sample(body, name, ""); !ok {
			t.Errorf("no sample of %s", name)
		}
	}

	// The readable form stays in `nodeplane zones`.
	var view struct {
		View struct {
			Zones []struct {
				Name string `json:"name"`
			} `json:"zones"`
		} `json:"view"`
	}
	out := s.mustKubectlLike(t, "zones", "-o", "json")
	if err := json.Unmarshal([]byte(out), &view); err != nil {
		t.Fatalf("zones -o json: %v\n%s", err, out)
	}
	names := map[string]bool{}
	for _, z := range view.View.Zones {
		names[z.Name] = true
	}
	for _, want := range []string{"/a", "/b", "r1/z1", ""} {
		if !names[want] {
			t.Errorf("nodeplane zones has no zone %q: %s", want, out)
		}
	}
}

// TestStorageRequestLatencyByBackend scrapes the real /metrics of the
// server: nodeplane_storage_request_duration_seconds (docs/architecture.md,
// "Storage metrics") times the requests of both stores, etcd and the
// in-memory lease store, told apart by the backend label.
func TestStorageRequestLatencyByBackend(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{apiOnly: true})
	cs := s.client()
	lease, err := cs.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "timed"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holder := "me"
	lease.Spec.HolderIdentity = &holder
	if _, err := cs.CoordinationV1().Leases("default").Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	body := string(raw)
	const name = "nodeplane_storage_request_duration_seconds"
	if !strings.Contains(body, "# TYPE "+name+" histogram\n") {
		t.Errorf("/metrics has no histogram %s", name)
	}
	for _, series := range []string{
		`backend="memory",operation="create"`, // the Lease
		`backend="memory",operation="update"`,
		`backend="memory",operation="watch"`, // the watch cache's
		`backend="etcd",operation="create"`,  // what the server creates at start
	} {
		if v, ok := sample(body, name+"_count", series); !ok || v < 1 {
			t.Errorf("%s_count{%s} = %v (present %v), want at least 1", name, series, v, ok)
		}
	}
}

// sample returns the value of the sample `name{labels} value` (or
// `name value` with labels empty) in a text exposition.
func sample(body, name, labels string) (float64, bool) {
	prefix := name + " "
	if labels != "" {
		prefix = name + "{" + labels + "} "
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			f, err := strconv.ParseFloat(strings.Fields(v)[0], 64)
			return f, err == nil
		}
	}
	return 0, false
}
