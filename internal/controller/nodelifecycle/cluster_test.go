package nodelifecycle

import (
	"sort"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// t0 is the start of every test's controller clock.
var t0 = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

// cluster is a fake API for the core: nodes and leases that the test's
// "agents" write and that the core's actions are applied to, the way the
// shell would. Objects are replaced, never modified in place, like an
// informer cache's.
type cluster struct {
	t      testing.TB
	now    time.Time
	core   *Core
	fresh  bool
	nodes  map[string]*corev1.Node
	leases map[string]*coordinationv1.Lease

	// Recorded actions.
	statusUpdates []StatusUpdate
	taints        []TaintUpdate // every applied NoExecute change, in order
	events        []string      // "Reason node"
	podMarks      []string      // nodes whose pods were marked NotReady
	// failStatus / failTaint make the next write for a node fail.
	failStatus map[string]bool
	failTaint  map[string]bool
	failPods   map[string]bool
	// failed lists the nodes whose status or taint writes failed on
	// request.
	failed map[string]bool
	// leaseSeen: when set, observations carry when each Lease was last
	// renewed as its LeaseSeenAt, as the shell's watch would deliver it
	// (seen); else none, and a renewal counts from the pass that sees it.
	leaseSeen bool
	seen      map[string]time.Time
	// duringWrites, when set, runs after Monitor (or MonitorDue, when it
	// has status writes) has decided and before its status writes are
	// visible, as the shell's 100 ms tainting step does while a pass or a
	// check is still writing.
	duringWrites func()
}

func newCluster(t testing.TB, cfg Config) *cluster {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &cluster{
		t: t, now: t0, core: c, fresh: true,
		nodes: map[string]*corev1.Node{}, leases: map[string]*coordinationv1.Lease{},
		failStatus: map[string]bool{}, failTaint: map[string]bool{}, failPods: map[string]bool{},
		failed: map[string]bool{}, seen: map[string]time.Time{},
	}
}

// observation is the named node as the informers show it now.
func (cl *cluster) observation(name string) Observation {
	o := Observation{Node: cl.nodes[name], Lease: cl.leases[name]}
	if cl.leaseSeen && o.Lease != nil {
		o.LeaseSeenAt = cl.seen[name]
	}
	return o
}

// nodeOpt shapes a node at creation.
type nodeOpt func(*corev1.Node)

func inZone(region, zone string) nodeOpt {
	return func(n *corev1.Node) {
		n.Labels[corev1.LabelTopologyRegion] = region
		n.Labels[corev1.LabelTopologyZone] = zone
	}
}

func excluded() nodeOpt {
	return func(n *corev1.Node) { n.Labels[LabelExcludeDisruption] = "" }
}

func withTaints(ts ...corev1.Taint) nodeOpt {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, ts...) }
}

// createdAgo makes the node d older than now (default: created now).
func createdAgo(d time.Duration) nodeOpt {
	return func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(n.CreationTimestamp.Add(-d)) }
}

// add creates a node with no conditions (a manually created Node, or an
// agent's before its first status), created now unless an option says
// otherwise.
func (cl *cluster) add(name string, opts ...nodeOpt) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{}, CreationTimestamp: metav1.NewTime(cl.now),
	}}
	for _, o := range opts {
		o(n)
	}
	cl.nodes[name] = n
}

// join creates a node whose agent posted Ready=True and a lease just now.
func (cl *cluster) join(name string, opts ...nodeOpt) {
	cl.add(name, opts...)
	cl.post(name, corev1.ConditionTrue)
	cl.renew(name)
}

// post is the agent posting its Ready condition with a new heartbeat.
func (cl *cluster) post(name string, status corev1.ConditionStatus) {
	cl.postAt(name, status, cl.now)
}

// postAt posts with the agent's own clock reading hb (which may be skewed).
func (cl *cluster) postAt(name string, status corev1.ConditionStatus, hb time.Time) {
	n := cl.nodes[name].DeepCopy()
	at := metav1.NewTime(hb)
	c := readyCondition(n)
	if c == nil {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady})
		c = &n.Status.Conditions[len(n.Status.Conditions)-1]
		c.LastTransitionTime = at
	}
	if c.Status != status {
		c.LastTransitionTime = at
	}
	c.Status, c.LastHeartbeatTime, c.Reason, c.Message = status, at, "KubeletReady", "kubelet is posting ready status"
	cl.nodes[name] = n
}

// renew is the agent renewing its lease with renewTime = now.
func (cl *cluster) renew(name string) { cl.renewAt(name, cl.now) }

func (cl *cluster) renewAt(name string, at time.Time) {
	mt := metav1.NewMicroTime(at)
	cl.seen[name] = cl.now
	cl.leases[name] = &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
		Spec:       coordinationv1.LeaseSpec{RenewTime: &mt},
	}
}

func (cl *cluster) remove(name string) {
	delete(cl.nodes, name)
	delete(cl.leases, name)
}

func (cl *cluster) observations() []Observation {
	obs := make([]Observation, 0, len(cl.nodes))
	for name := range cl.nodes {
		obs = append(obs, cl.observation(name))
	}
	// Informers list in no particular order; the core must not care.
	sort.Slice(obs, func(i, j int) bool { return obs[i].Node.Name > obs[j].Node.Name })
	return obs
}

// monitor runs a pass and carries out its result like the shell.
func (cl *cluster) monitor() PassResult {
	return cl.monitorWith(cl.observations())
}

func (cl *cluster) monitorWith(obs []Observation) PassResult {
	res := cl.core.Monitor(cl.now, cl.fresh, obs)
	if cl.duringWrites != nil {
		cl.duringWrites()
	}
	cl.apply(res)
	return res
}

// due runs the shell's check between passes: the nodes whose grace period
// ended since the last pass are judged from their current Node and Lease
// and the result carried out. It returns the names judged too.
func (cl *cluster) due() (PassResult, []string) {
	names := cl.core.DueNodes(cl.now)
	var obs []Observation
	for _, name := range names {
		if _, ok := cl.nodes[name]; ok {
			obs = append(obs, cl.observation(name))
		}
	}
	res := cl.core.MonitorDue(cl.now, cl.fresh, obs)
	if cl.duringWrites != nil && len(res.StatusUpdates) > 0 {
		cl.duringWrites()
	}
	cl.apply(res)
	return res, names
}

// apply carries out a pass's result like the shell.
func (cl *cluster) apply(res PassResult) {
	for _, name := range res.Registered {
		cl.events = append(cl.events, ReasonRegisteredNode+" "+name)
	}
	for _, name := range res.Removed {
		cl.events = append(cl.events, ReasonRemovingNode+" "+name)
	}
	for _, u := range res.StatusUpdates {
		name := u.Node.Name
		if cl.failStatus[name] {
			delete(cl.failStatus, name)
			cl.failed[name] = true
			cl.core.StatusUpdateFailed(name)
			continue
		}
		if _, ok := cl.nodes[name]; !ok {
			continue
		}
		// UpdateStatus writes the status only.
		n := cl.nodes[name].DeepCopy()
		n.Status = *u.Node.Status.DeepCopy()
		cl.nodes[name] = n
		cl.statusUpdates = append(cl.statusUpdates, u)
		if u.NotReady {
			cl.events = append(cl.events, ReasonNodeNotReady+" "+name)
			cl.markPods(name)
		}
	}
	for _, name := range res.MarkPodsNotReady {
		cl.markPods(name)
	}
	for _, u := range res.TaintUpdates {
		if cl.failed[u.Node] {
			cl.core.TaintNotApplied(u, false)
			continue
		}
		cl.applyTaint(u, false)
	}
}

func (cl *cluster) markPods(name string) {
	if cl.failPods[name] {
		delete(cl.failPods, name)
		cl.core.PodMarkingFailed(name)
		return
	}
	cl.podMarks = append(cl.podMarks, name)
}

// taint runs the tainting step and applies its updates.
func (cl *cluster) taint() []TaintUpdate {
	var applied []TaintUpdate
	for _, u := range cl.core.Taint(cl.now, cl.fresh) {
		if cl.applyTaint(u, true) {
			applied = append(applied, u)
		}
	}
	return applied
}

// applyTaint writes a NoExecute change like the shell: with guard (an
// update from Taint) skipped and reported if the node's Ready status moved
// on; failed on request.
func (cl *cluster) applyTaint(u TaintUpdate, guard bool) bool {
	n, ok := cl.nodes[u.Node]
	if !ok {
		return false
	}
	if guard && len(u.Add) > 0 && readyStatus(n) != u.Ready {
		cl.core.TaintNotApplied(u, false)
		return false
	}
	if cl.failTaint[u.Node] {
		delete(cl.failTaint, u.Node)
		cl.failed[u.Node] = true
		cl.core.TaintNotApplied(u, true)
		return false
	}
	n = n.DeepCopy()
	var kept []corev1.Taint
	for _, t := range n.Spec.Taints {
		drop := false
		for _, r := range append(append([]corev1.Taint(nil), u.Remove...), u.Add...) {
			if t.Key == r.Key && t.Effect == r.Effect {
				drop = true
			}
		}
		if !drop {
			kept = append(kept, t)
		}
	}
	n.Spec.Taints = append(kept, u.Add...)
	cl.nodes[u.Node] = n
	cl.taints = append(cl.taints, u)
	return true
}

// step advances the clock by d.
func (cl *cluster) step(d time.Duration) { cl.now = cl.now.Add(d) }

// noExecute is the controller NoExecute taint key on a node ("" if none).
func (cl *cluster) noExecute(name string) string {
	s, _ := noExecuteOf(cl.nodes[name])
	return s.key()
}

func (cl *cluster) ready(name string) corev1.ConditionStatus {
	return readyStatus(cl.nodes[name])
}

func (cl *cluster) zone(key string) ZoneView {
	for _, z := range cl.core.View(cl.now).Zones {
		if z.Zone == key {
			return z
		}
	}
	cl.t.Fatalf("zone %q not in view", key)
	return ZoneView{}
}

// adds lists the nodes that got a NoExecute taint added, in order.
func adds(us []TaintUpdate) []string {
	var out []string
	for _, u := range us {
		if len(u.Add) > 0 {
			out = append(out, u.Node)
		}
	}
	return out
}

func zk(region, zone string) string { return region + ":\x00:" + zone }

func noExecuteTaint(key string, at time.Time) corev1.Taint {
	ta := metav1.NewTime(at)
	return corev1.Taint{Key: key, Effect: corev1.TaintEffectNoExecute, TimeAdded: &ta}
}
