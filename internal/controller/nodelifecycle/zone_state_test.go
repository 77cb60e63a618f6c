package nodelifecycle

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestZoneKey(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"a node without topology labels is in the empty zone", nil, ""},
		{"region and zone make the key", map[string]string{corev1.LabelTopologyRegion: "r", corev1.LabelTopologyZone: "z"}, "r:\x00:z"},
		{"a zone alone still makes a key", map[string]string{corev1.LabelTopologyZone: "z"}, ":\x00:z"},
		{"a region alone still makes a key", map[string]string{corev1.LabelTopologyRegion: "r"}, "r:\x00:"},
		{"the deprecated beta labels win over the stable ones", map[string]string{
			corev1.LabelTopologyRegion: "r", corev1.LabelTopologyZone: "z",
			corev1.LabelFailureDomainBetaRegion: "old-r", corev1.LabelFailureDomainBetaZone: "old-z",
		}, "old-r:\x00:old-z"},
		{"an empty beta label still wins", map[string]string{
			corev1.LabelTopologyZone: "z", corev1.LabelFailureDomainBetaZone: "", corev1.LabelTopologyRegion: "r",
		}, "r:\x00:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ZoneKey(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: tt.labels}})
			if got != tt.want {
				t.Errorf("ZoneKey = %q, want %q", got, tt.want)
			}
		})
	}
	if got := ZoneName("r:\x00:z"); got != "r/z" {
		t.Errorf("ZoneName = %q, want r/z", got)
	}
}

func TestComputeZoneState(t *testing.T) {
	tests := []struct {
		name            string
		ready, notReady int
		want            ZoneState
	}{
		{"an empty zone is normal", 0, 0, StateNormal},
		{"a zone of Ready nodes is normal", 5, 0, StateNormal},
		{"a zone without a Ready node is fully disrupted", 0, 4, StateFullDisruption},
		{"a single not-ready node alone is a full disruption", 0, 1, StateFullDisruption},
		{"two not-ready nodes are never partial", 1, 2, StateNormal},
		{"two not-ready nodes are never partial, even beside a hundred percent threshold", 0 + 1, 2, StateNormal},
		{"three not-ready of five is partial", 2, 3, StatePartialDisruption},
		{"exactly the threshold (11 of 20) is partial", 9, 11, StatePartialDisruption},
		{"just below the threshold (11 of 21) is normal", 10, 11, StateNormal},
		{"half of the zone is normal", 3, 3, StateNormal},
		{"one Ready node keeps a large zone out of full disruption", 1, 99, StatePartialDisruption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := computeZoneState(tt.ready, tt.notReady, 0.55); got != tt.want {
				t.Errorf("computeZoneState(%d ready, %d not ready) = %s, want %s", tt.ready, tt.notReady, got, tt.want)
			}
		})
	}
}

func TestRateFor(t *testing.T) {
	c, _ := New(DefaultConfig())
	tests := []struct {
		name  string
		state ZoneState
		size  int
		want  float64
	}{
		{"a normal zone taints at the primary rate", StateNormal, 10, 0.1},
		{"a fully disrupted zone taints at the primary rate", StateFullDisruption, 10, 0.1},
		{"a partially disrupted large zone taints at the secondary rate", StatePartialDisruption, 51, 0.01},
		{"a partially disrupted zone of exactly 50 nodes is small and taints nothing", StatePartialDisruption, 50, 0},
		{"a partially disrupted small zone taints nothing", StatePartialDisruption, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.rateFor(tt.state, tt.size); got != tt.want {
				t.Errorf("rateFor(%s, %d) = %v, want %v", tt.state, tt.size, got, tt.want)
			}
		})
	}
}

// zoneOf builds a zone of ready + notReady nodes posting their status, plus
// extra options applied to each.
func (cl *cluster) zoneOf(zoneName string, ready, notReady int, opts ...nodeOpt) []string {
	var names []string
	for i := 0; i < ready+notReady; i++ {
		name := fmt.Sprintf("%s-%03d", zoneName, i)
		cl.join(name, append([]nodeOpt{inZone("r", zoneName)}, opts...)...)
		if i >= ready {
			cl.post(name, corev1.ConditionFalse)
		}
		names = append(names, name)
	}
	return names
}

// keepAlive has every listed agent renew its lease and repost its status.
func (cl *cluster) keepAlive(names []string) {
	for _, n := range names {
		cl.renew(n)
		cl.post(n, cl.ready(n))
	}
}

func TestZoneStatesThroughTheCore(t *testing.T) {
	tests := []struct {
		name            string
		ready, notReady int
		opts            []nodeOpt
		extraExcluded   int // excluded Ready nodes added to the zone
		wantState       ZoneState
		wantRate        float64
		wantSize        int
	}{
		{"a healthy zone is normal at the primary rate", 10, 1, nil, 0, StateNormal, 0.1, 11},
		{"a large zone in partial disruption slows to the secondary rate", 21, 30, nil, 0, StatePartialDisruption, 0.01, 51},
		{"a zone of exactly 50 nodes is small: partial disruption stops its taints", 20, 30, nil, 0, StatePartialDisruption, 0, 50},
		{"excluded Ready nodes do not count: the zone is fully disrupted", 0, 3, nil, 5, StateFullDisruption, 0.1, 3},
		{"excluded nodes do not count towards the size", 2, 3, nil, 60, StatePartialDisruption, 0, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := newCluster(t, DefaultConfig())
			cl.zoneOf("a", tt.ready, tt.notReady, tt.opts...)
			for i := 0; i < tt.extraExcluded; i++ {
				cl.join(fmt.Sprintf("a-x%02d", i), inZone("r", "a"), excluded())
			}
			// A second, healthy zone keeps the cluster out of master
			// disruption mode.
			cl.zoneOf("b", 3, 0)
			cl.monitor()
			z := cl.zone(zk("r", "a"))
			if z.State != tt.wantState || z.TaintRate != tt.wantRate || z.Size != tt.wantSize {
				t.Errorf("zone a: state %s rate %v size %d, want %s %v %d", z.State, z.TaintRate, z.Size, tt.wantState, tt.wantRate, tt.wantSize)
			}
		})
	}
}

func TestPartialDisruptionPacesTaintsAtTheSecondaryRate(t *testing.T) {
	cl := newCluster(t, DefaultConfig())
	all := append(cl.zoneOf("a", 21, 30), cl.zoneOf("b", 3, 0)...)
	var times []time.Duration
	for step := 0; step < 2500; step++ { // 250 s in 100 ms steps
		if step%50 == 0 {
			cl.keepAlive(all)
			cl.monitor()
		}
		for range cl.taint() {
			times = append(times, cl.now.Sub(t0))
		}
		cl.step(100 * time.Millisecond)
	}
	// The zone starts Initial with a full primary-rate bucket; the first
	// pass judges it partial and swaps to the secondary rate keeping that
	// token: one taint at once, then one every 100 s.
	want := []time.Duration{0, 100 * time.Second, 200 * time.Second}
	if fmt.Sprint(times) != fmt.Sprint(want) {
		t.Errorf("taints at %v, want %v", times, want)
	}
}

func TestNormalZonePacesTaintsAtThePrimaryRateAndZonesAreIndependent(t *testing.T) {
	cl := newCluster(t, DefaultConfig())
	a := cl.zoneOf("a", 20, 4)
	b := cl.zoneOf("b", 20, 2)
	all := append(a, b...)
	got := map[string][]time.Duration{}
	for step := 0; step < 400; step++ { // 40 s
		if step%50 == 0 {
			cl.keepAlive(all)
			cl.monitor()
		}
		for _, u := range cl.taint() {
			got[u.Zone] = append(got[u.Zone], cl.now.Sub(t0))
		}
		cl.step(100 * time.Millisecond)
	}
	wantA := []time.Duration{0, 10 * time.Second, 20 * time.Second, 30 * time.Second}
	wantB := []time.Duration{0, 10 * time.Second}
	if fmt.Sprint(got[zk("r", "a")]) != fmt.Sprint(wantA) || fmt.Sprint(got[zk("r", "b")]) != fmt.Sprint(wantB) {
		t.Errorf("taints zone a %v, zone b %v; want %v and %v", got[zk("r", "a")], got[zk("r", "b")], wantA, wantB)
	}
	if z := cl.zone(zk("r", "a")); z.Evictions != 4 {
		t.Errorf("zone a evictions = %d, want 4", z.Evictions)
	}
}

func TestAllZonesFullyDisrupted(t *testing.T) {
	cl := newCluster(t, DefaultConfig())
	a := cl.zoneOf("a", 4, 0)
	b := cl.zoneOf("b", 3, 0)
	x := "x-excluded"
	cl.join(x, inZone("r", "a"), excluded())
	all := append(append([]string{}, a...), b...)
	cl.monitor()
	// Zone b's first node goes NotReady and is tainted.
	cl.post(b[0], corev1.ConditionFalse)
	cl.monitor()
	cl.taint()
	if cl.noExecute(b[0]) != corev1.TaintNodeNotReady {
		t.Fatalf("b0 taint = %q, want not-ready", cl.noExecute(b[0]))
	}

	// Every counted node goes NotReady: master disruption mode.
	cl.step(5 * time.Second)
	for _, n := range all {
		cl.post(n, corev1.ConditionFalse)
	}
	cl.renew(x)
	res := cl.monitor()
	if res.Disruption != DisruptionEntered {
		t.Fatalf("Disruption = %v, want entered", res.Disruption)
	}
	for _, n := range all {
		if got := cl.noExecute(n); got != "" {
			t.Errorf("%s keeps NoExecute %q in master disruption mode", n, got)
		}
	}
	for i := 0; i < 300; i++ {
		cl.step(100 * time.Millisecond)
		if got := cl.taint(); len(got) != 0 {
			t.Fatalf("tainted %v while every zone is down", adds(got))
		}
	}
	for _, z := range cl.core.View(cl.now).Zones {
		if z.State != StateFullDisruption || z.TaintRate != 0 {
			t.Errorf("zone %s: %s at rate %v, want FullDisruption at 0", z.Name, z.State, z.TaintRate)
		}
	}

	// 45 s in, one node is Ready again: the mode ends and every node gets a
	// fresh grace period, so x (silent since it last renewed) is not marked
	// Unknown 50 s after its last renewal.
	cl.step(15 * time.Second) // t0+50
	cl.keepAlive(all)
	cl.post(a[0], corev1.ConditionTrue)
	res = cl.monitor()
	if res.Disruption != DisruptionExited || !res.FreshGrace {
		t.Fatalf("Disruption = %v, FreshGrace = %v; want exited with a fresh grace", res.Disruption, res.FreshGrace)
	}
	for cl.now.Before(t0.Add(100 * time.Second)) {
		cl.step(5 * time.Second)
		cl.keepAlive(all)
		cl.monitor()
		if cl.ready(x) == corev1.ConditionUnknown {
			t.Fatalf("x marked Unknown at +%v, within the grace period that restarted at +50s", cl.now.Sub(t0))
		}
	}
	cl.step(10 * time.Second)
	cl.keepAlive(all)
	cl.monitor()
	if cl.ready(x) != corev1.ConditionUnknown {
		t.Errorf("x Ready = %q at +%v, want Unknown after the fresh grace period", cl.ready(x), cl.now.Sub(t0))
	}
	// Zone b is still fully disrupted beside a living zone: it taints at
	// the primary rate, zone a (partial, small) not at all.
	if z := cl.zone(zk("r", "b")); z.State != StateFullDisruption || z.TaintRate != 0.1 {
		t.Errorf("zone b: %s at %v, want FullDisruption at 0.1", z.State, z.TaintRate)
	}
	if z := cl.zone(zk("r", "a")); z.State != StatePartialDisruption || z.TaintRate != 0 {
		t.Errorf("zone a: %s at %v, want PartialDisruption at 0", z.State, z.TaintRate)
	}
}

func TestAZoneAppearingDuringMasterDisruptionJoinsIt(t *testing.T) {
	cl := newCluster(t, DefaultConfig())
	a := cl.zoneOf("a", 0, 2)
	cl.monitor()
	if !cl.core.View(cl.now).AllZonesDisrupted {
		t.Fatal("a cluster whose only zone is down is not in master disruption mode")
	}
	cl.step(5 * time.Second)
	c := cl.zoneOf("c", 0, 1)
	cl.keepAlive(a)
	res := cl.monitor()
	if res.Disruption != DisruptionUnchanged {
		t.Errorf("Disruption = %v, want unchanged", res.Disruption)
	}
	if z := cl.zone(zk("r", "c")); z.State != StateFullDisruption || z.TaintRate != 0 {
		t.Errorf("new zone c: %s at %v, want FullDisruption at 0", z.State, z.TaintRate)
	}
	// A new zone with a Ready node ends the mode (upstream would not
	// notice, the new zone being Initial).
	cl.step(5 * time.Second)
	cl.zoneOf("d", 1, 0)
	cl.keepAlive(append(a, c...))
	res = cl.monitor()
	if res.Disruption != DisruptionExited {
		t.Errorf("Disruption = %v, want exited", res.Disruption)
	}
	if z := cl.zone(zk("r", "a")); z.TaintRate != 0.1 {
		t.Errorf("zone a rate after the mode = %v, want 0.1", z.TaintRate)
	}
}

func TestZoneMetricsAndVanishedZones(t *testing.T) {
	cl := newCluster(t, DefaultConfig())
	cl.zoneOf("a", 3, 1)
	cl.zoneOf("b", 1, 0)
	res := cl.monitor()
	want := []ZoneMetrics{{Zone: zk("r", "a"), Size: 4, Unhealthy: 1, Health: 75}, {Zone: zk("r", "b"), Size: 1, Unhealthy: 0, Health: 100}}
	if fmt.Sprint(res.Zones) != fmt.Sprint(want) {
		t.Errorf("Zones = %v, want %v", res.Zones, want)
	}
	cl.remove("b-000")
	cl.step(5 * time.Second)
	res = cl.monitor()
	if fmt.Sprint(res.VanishedZones) != fmt.Sprint([]string{zk("r", "b")}) || len(res.Zones) != 1 {
		t.Errorf("after zone b emptied: Zones %v, VanishedZones %q", res.Zones, res.VanishedZones)
	}
	if fmt.Sprint(res.Removed) != "[b-000]" {
		t.Errorf("Removed = %v, want [b-000]", res.Removed)
	}
}
