package nodelifecycle

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestAPassDecidesTheSameWhateverOrderTheInformersListIn drives two
// controllers through one history — nodes joining, going silent together
// (equal due times), coming back, leaving and joining again — one given
// its observations in name order, the other shuffled anew each pass. A pass
// sorts only the lists it returns, so every result must match, list order
// included.
func TestAPassDecidesTheSameWhateverOrderTheInformersListIn(t *testing.T) {
	sorted, shuffled := newCluster(t, DefaultConfig()), newCluster(t, DefaultConfig())
	rng := rand.New(rand.NewPCG(7, 7))
	both := func(f func(cl *cluster)) { f(sorted); f(shuffled) }
	names := make([]string, 40)
	for i := range names {
		names[i] = fmt.Sprintf("n%02d", i)
	}
	both(func(cl *cluster) {
		for i, name := range names {
			cl.join(name, inZone("r", fmt.Sprintf("z%d", i%3)))
		}
	})
	for pass := 0; pass < 40; pass++ {
		both(func(cl *cluster) {
			cl.step(5 * time.Second)
			for i, name := range names {
				if _, ok := cl.nodes[name]; !ok {
					continue
				}
				// Nodes 0–11 go silent at 20 s and come back at 120 s;
				// node 12 leaves at 60 s and joins again at 90 s.
				silent := i < 12 && pass >= 4 && pass < 24
				if !silent {
					cl.renew(name)
				}
				if i < 12 && pass == 24 {
					cl.post(name, corev1.ConditionTrue)
				}
			}
			if pass == 12 {
				cl.remove(names[12])
			}
			if pass == 18 {
				cl.join(names[12], inZone("r", "z0"))
			}
		})
		a := sorted.observations()
		sort.Slice(a, func(i, j int) bool { return a[i].Node.Name < a[j].Node.Name })
		b := shuffled.observations()
		rng.Shuffle(len(b), func(i, j int) { b[i], b[j] = b[j], b[i] })
		ra, rb := sorted.monitorWith(a), shuffled.monitorWith(b)
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("pass %d: results differ with the informers' order\nname order: %+v\nshuffled:   %+v", pass, ra, rb)
		}
		ta, tb := sorted.taint(), shuffled.taint()
		if !reflect.DeepEqual(ta, tb) {
			t.Fatalf("pass %d: tainting steps differ: %+v vs %+v", pass, ta, tb)
		}
	}
	if len(sorted.statusUpdates) < 12 || len(sorted.taints) == 0 {
		t.Fatalf("the history marked %d nodes and changed %d taints: it must mark and taint some to compare anything", len(sorted.statusUpdates), len(sorted.taints))
	}
}

// TestANodeSeenUnchangedIsStillJudgedAsTimePasses: a pass works out what it
// reads from a Node once per version of it. A node whose Node and Lease stay
// the same objects from pass to pass must still be marked when its grace
// ends, and a new version of its Node (the agent posting again) must still
// count as a sign of life.
func TestANodeSeenUnchangedIsStillJudgedAsTimePasses(t *testing.T) {
	cl := newCluster(t, DefaultConfig())
	cl.join("quiet", inZone("r", "a"))
	cl.join("live", inZone("r", "a"))
	cl.monitor()
	node, lease := cl.nodes["quiet"], cl.leases["quiet"]
	for range 9 {
		cl.step(5 * time.Second)
		cl.renew("live")
		if res := cl.monitor(); len(res.StatusUpdates) != 0 {
			t.Fatalf("at %v: marked %s before the 50 s grace ended", cl.now.Sub(t0), res.StatusUpdates[0].Node.Name)
		}
		if cl.nodes["quiet"] != node || cl.leases["quiet"] != lease {
			t.Fatal("the test's quiet node changed")
		}
	}
	// 45 s: the agent posts again (a new Node, same Lease): a sign of life,
	// seen by the pass at 50 s.
	cl.post("quiet", corev1.ConditionTrue)
	for range 11 {
		cl.step(5 * time.Second)
		cl.renew("live")
		if res := cl.monitor(); len(res.StatusUpdates) != 0 {
			t.Fatalf("at %v: marked %s, whose agent posted at 45 s", cl.now.Sub(t0), res.StatusUpdates[0].Node.Name)
		}
	}
	// 105 s: the grace from the pass that saw the post ended at 100 s.
	cl.step(5 * time.Second)
	cl.renew("live")
	res := cl.monitor()
	if len(res.StatusUpdates) != 1 || res.StatusUpdates[0].Node.Name != "quiet" {
		t.Fatalf("at %v: StatusUpdates = %+v, want quiet marked Unknown", cl.now.Sub(t0), res.StatusUpdates)
	}
}
