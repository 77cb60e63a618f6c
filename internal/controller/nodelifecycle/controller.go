package nodelifecycle

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
)

// ControllerName is the --controllers name.
const ControllerName = "node-lifecycle-controller"

// statusWorkers write node statuses in parallel within one monitor pass;
// dueWorkers write the due passes' (dueWriter). With a backlog of overdue
// nodes the due passes judge them all, so dueWorkers stand for both.
const (
	statusWorkers = 64
	dueWorkers    = 2 * statusWorkers
)

// taintPeriod is how often queued NoExecute taints are granted (upstream's
// 100 ms tainting pass).
const taintPeriod = 100 * time.Millisecond

// duePeriod is how often the controller looks for nodes whose grace period
// ended since the last monitor pass.
const duePeriod = 100 * time.Millisecond

const podsByNode = "spec.nodeName"

// ShellConfig configures the controller shell.
type ShellConfig struct {
	Core     Config
	Client   kubernetes.Interface
	Clock    clock.WithTicker
	Logger   *slog.Logger
	Registry prometheus.Registerer
	// Summaries, when set, gets a Summary after every monitor pass with
	// the WorstNodes nodes longest without a heartbeat (default 20).
	Summaries  SummarySink
	WorstNodes int
}

// SummarySink takes the Summary of each monitor pass. Record must not
// block: it is called from the monitor loop.
type SummarySink interface {
	Record(Summary)
}

// defaultWorstNodes is ShellConfig.WorstNodes when unset.
const defaultWorstNodes = 20

// Controller is the shell around Core: it feeds it the informers' nodes and
// leases every monitor period with the freshness of that view, and carries
// out what it decides through the API.
type Controller struct {
	cfg ShellConfig
	m   metrics

	mu      sync.Mutex // guards core, fresh, leading, summaryAt and summaryOwed
	core    *Core
	fresh   Freshness
	leading bool
	// summaryAt is when the last Summary was taken; summaryOwed: nodes
	// were marked between passes since.
	summaryAt   time.Time
	summaryOwed bool

	// seenMu guards leaseSeen: when the lease informer delivered each
	// node's current Lease (Observation.LeaseSeenAt).
	seenMu    sync.Mutex
	leaseSeen map[string]seenLease

	nodes      corelisters.NodeLister
	leases     coordinationlisters.LeaseLister
	leaseInf   cache.SharedIndexInformer
	pods       cache.Indexer
	noSchedule workqueue.TypedRateLimitingInterface[string]
	recorder   record.EventRecorder
}

type metrics struct {
	health, size, unhealthy *prometheus.GaugeVec
	evictions               *prometheus.CounterVec
	nodeHealth, allHealth   prometheus.Histogram
}

// NewController returns the controller and registers its metrics (SPEC NLC-19).
func NewController(cfg ShellConfig) (*Controller, error) {
	if err := cfg.Core.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.WorstNodes <= 0 {
		cfg.WorstNodes = defaultWorstNodes
	}
	cfg.Logger = cfg.Logger.With("controller", ControllerName)
	zone := []string{"zone"}
	m := metrics{
		health: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "node_collector", Name: "zone_health",
			Help: "Percentage of healthy nodes in every zone."}, zone),
		size: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "node_collector", Name: "zone_size",
			Help: "Number of nodes in every zone."}, zone),
		unhealthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "node_collector", Name: "unhealthy_nodes_in_zone",
			Help: "Number of not Ready nodes in every zone."}, zone),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "node_collector", Name: "evictions_total",
			Help: "Number of node NoExecute taintings (evictions) since the controller started."}, zone),
		nodeHealth: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "node_collector", Name: "update_node_health_duration_seconds",
			Help: "Seconds to update one node's health.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 8)}),
		allHealth: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "node_collector", Name: "update_all_nodes_health_duration_seconds",
			Help: "Seconds for one monitor pass over every node.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 8)}),
	}
	if cfg.Registry != nil {
		for _, c := range []prometheus.Collector{m.health, m.size, m.unhealthy, m.evictions, m.nodeHealth, m.allHealth} {
			if err := cfg.Registry.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return &Controller{cfg: cfg, m: m}, nil
}

// Name implements manager.Controller.
func (c *Controller) Name() string { return ControllerName }

// Prepare implements manager.Controller. Each term starts from a fresh
// core: every node gets a new grace period, existing taints are kept
// (SPEC P3-3).
func (c *Controller) Prepare(term *manager.Term) error {
	core, err := New(c.cfg.Core)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.core = core
	c.fresh = Freshness{MaxProbeAge: 2*c.cfg.Core.NodeMonitorPeriod + time.Second, MaxLag: c.cfg.Core.NodeMonitorPeriod + time.Second}
	c.mu.Unlock()
	ni := term.Informers.Core().V1().Nodes()
	li := term.Informers.Coordination().V1().Leases()
	c.nodes, c.leases, c.leaseInf = ni.Lister(), li.Lister(), li.Informer()
	pods, err := term.PodsByNodeIndexer()
	if err != nil {
		return err
	}
	c.pods = pods
	c.noSchedule = manager.NewQueue("node-noschedule-taints", c.cfg.Clock)
	c.leaseSeen = map[string]seenLease{}
	if _, err := li.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.noteLease(obj) },
		UpdateFunc: func(_, cur any) { c.noteLease(cur) },
		DeleteFunc: func(obj any) { c.forgetLease(obj) },
	}); err != nil {
		return err
	}
	_, err = ni.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueue(obj) },
		UpdateFunc: func(_, cur any) { c.enqueue(cur) },
	})
	return err
}

// noteLease records when a node's Lease arrived from the watch.
func (c *Controller) noteLease(obj any) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok || l.Namespace != corev1.NamespaceNodeLease {
		return
	}
	now := c.cfg.Clock.Now()
	c.seenMu.Lock()
	c.leaseSeen[l.Name] = seenLease{resourceVersion: l.ResourceVersion, at: now}
	c.seenMu.Unlock()
}

// seenLease is when the lease watch delivered one version of a Lease.
type seenLease struct {
	resourceVersion string
	at              time.Time
}

// stampLeaseSeen sets each observation's LeaseSeenAt to when the lease
// watch delivered that very version of its Lease. The informer's cache
// shows a new version before its handlers have run, so a version not
// noted yet gets none and counts from now: stamping it with the previous
// version's delivery would start the node's grace one renewal too early.
func (c *Controller) stampLeaseSeen(obs []Observation) {
	c.seenMu.Lock()
	defer c.seenMu.Unlock()
	for i := range obs {
		if l := obs[i].Lease; l != nil {
			if s, ok := c.leaseSeen[l.Name]; ok && s.resourceVersion == l.ResourceVersion {
				obs[i].LeaseSeenAt = s.at
			}
		}
	}
}

func (c *Controller) forgetLease(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if l, ok := obj.(*coordinationv1.Lease); ok && l.Namespace == corev1.NamespaceNodeLease {
		c.seenMu.Lock()
		delete(c.leaseSeen, l.Name)
		c.seenMu.Unlock()
	}
}

// Run implements manager.Controller.
func (c *Controller) Run(ctx context.Context) {
	recorder, stopEvents := manager.EventRecorder(ctx, c.cfg.Client, EventSource)
	defer stopEvents()
	c.recorder = recorder
	// The queue must shut down before the workers are waited for (defers
	// run last-in first-out): do it as soon as the term ends.
	go func() {
		<-ctx.Done()
		c.noSchedule.ShutDown()
	}()
	c.mu.Lock()
	c.leading = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.leading = false
		c.mu.Unlock()
	}()

	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(3)
	go func() {
		defer wg.Done()
		for c.nextNoSchedule(ctx) {
		}
	}()
	due := newDueWriter(c.applyStatusUpdate, c.finish)
	due.start(ctx, &wg)
	every := func(d time.Duration, step func(context.Context)) {
		defer wg.Done()
		t := c.cfg.Clock.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				step(ctx)
			}
		}
	}
	go every(taintPeriod, c.taintPass)
	go every(duePeriod, func(ctx context.Context) { c.duePass(ctx, due) })
	t := c.cfg.Clock.NewTicker(c.cfg.Core.NodeMonitorPeriod)
	defer t.Stop()
	for {
		c.monitorPass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// View returns the zones view, and whether this server is leading.
func (c *Controller) View() (View, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.core == nil || !c.leading {
		return View{}, false
	}
	return c.core.View(c.cfg.Clock.Now()), true
}

// Leading reports whether this server runs the controller now.
func (c *Controller) Leading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core != nil && c.leading
}

// probe asks storage for the current lease revision (a quorum read).
func (c *Controller) probe(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, c.cfg.Core.NodeMonitorPeriod)
	defer cancel()
	at := c.cfg.Clock.Now()
	list, err := c.cfg.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(pctx, metav1.ListOptions{Limit: 1})
	rv := ""
	if err == nil {
		rv = list.ResourceVersion
	}
	c.mu.Lock()
	c.fresh.Probe(at, rv, err)
	c.mu.Unlock()
}

func (c *Controller) monitorPass(ctx context.Context) {
	start := c.cfg.Clock.Now()
	c.probe(ctx)
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	obs := c.observations(nodes)
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	c.fresh.Seen(c.leaseInf.LastSyncResourceVersion())
	fresh, why := c.fresh.Fresh(now)
	res := c.core.Monitor(now, fresh, obs)
	sum, ok := c.summary(now, true)
	c.mu.Unlock()
	if ok {
		c.cfg.Summaries.Record(sum)
	}
	if !fresh {
		c.cfg.Logger.Warn("view of node heartbeats is stale: marking no node unhealthy", "why", why)
	}
	c.apply(ctx, res)
	c.m.allHealth.Observe(c.cfg.Clock.Since(start).Seconds())
}

// duePass marks the nodes whose grace period ended since the last monitor
// pass without waiting for the next one (Core.DueNodes, Core.MonitorDue).
// When no node is due it only takes the lock and looks at the plan's head.
// It hands the result to due and does not wait for its writes: the next
// pass judges the nodes due by then while they are out.
func (c *Controller) duePass(ctx context.Context, due *dueWriter) {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	res, judged := c.judgeDue(now)
	// The zone view follows the marks, at most once a second; one owed
	// after the last marks of a burst is taken as soon as that allows.
	c.summaryOwed = c.summaryOwed || len(res.StatusUpdates) > 0
	sum, ok := c.summary(now, c.summaryOwed && now.Sub(c.summaryAt) >= summaryEvery)
	c.mu.Unlock()
	if ok {
		c.cfg.Summaries.Record(sum)
	}
	if judged {
		due.submit(ctx, res)
	}
}

// judgeDue has the nodes due by now judged, if any and if the view is
// fresh; c.mu must be held.
func (c *Controller) judgeDue(now time.Time) (PassResult, bool) {
	names := c.core.DueNodes(now)
	if len(names) == 0 {
		return PassResult{}, false
	}
	// The freshness of the view as of now: a pass's probe the lease watch
	// had not reached at the pass must not count as lag here once the
	// watch has passed it. On a stale view the due nodes stay planned.
	c.fresh.Seen(c.leaseInf.LastSyncResourceVersion())
	if fresh, _ := c.fresh.Fresh(now); !fresh {
		return PassResult{}, false
	}
	nodes := make([]*corev1.Node, 0, len(names))
	for _, name := range names {
		if n, err := c.nodes.Get(name); err == nil {
			nodes = append(nodes, n)
		}
	}
	return c.core.MonitorDue(now, true, c.observations(nodes)), true
}

// observations pairs each node with its Lease as the informers show them,
// stamped with when the lease watch delivered that Lease (stampLeaseSeen).
func (c *Controller) observations(nodes []*corev1.Node) []Observation {
	obs := make([]Observation, 0, len(nodes))
	leases := c.leases.Leases(corev1.NamespaceNodeLease)
	for _, n := range nodes {
		o := Observation{Node: n}
		if l, err := leases.Get(n.Name); err == nil {
			o.Lease = l
		}
		obs = append(obs, o)
	}
	c.stampLeaseSeen(obs)
	return obs
}

// summaryEvery is the least time between a Summary and one taken after
// nodes were marked between passes: at 100,000 nodes a Summary costs about
// 25 ms, and nodes are marked every 100 ms while a zone goes dark.
const summaryEvery = time.Second

// summary takes a Summary for the sink, if there is one and take; c.mu
// must be held.
func (c *Controller) summary(now time.Time, take bool) (Summary, bool) {
	if c.cfg.Summaries == nil || !take {
		return Summary{}, false
	}
	c.summaryAt, c.summaryOwed = now, false
	return c.core.Summary(now, c.cfg.WorstNodes), true
}

// apply carries out a monitor pass's result.
func (c *Controller) apply(ctx context.Context, res PassResult) {
	c.finish(ctx, res, c.writeStatuses(ctx, res.StatusUpdates))
}

// writeStatuses makes a pass's status writes and returns the nodes whose
// write was not made.
func (c *Controller) writeStatuses(ctx context.Context, updates []StatusUpdate) map[string]bool {
	// Status writes go out in parallel (upstream uses 8 node update
	// workers): a zone going dark means thousands of writes in one pass.
	// Each worker takes the next write until none is left, so a worker's
	// stack, grown by its first write, serves the others.
	var failedMu sync.Mutex
	failed := map[string]bool{}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(statusWorkers, len(updates)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(updates)) {
					return
				}
				u := updates[i]
				if !c.applyStatusUpdate(ctx, u) {
					failedMu.Lock()
					failed[u.Node.Name] = true
					failedMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return failed
}

// finish does what follows a pass's status writes; failed are the nodes
// whose write was not made.
func (c *Controller) finish(ctx context.Context, res PassResult, failed map[string]bool) {
	if res.FreshGrace {
		c.cfg.Logger.Info("every node gets a fresh grace period")
	}
	for _, name := range res.Registered {
		c.recorder.Event(nodeRef(name), corev1.EventTypeNormal, ReasonRegisteredNode, RegisteredNodeMessage(name))
	}
	for _, name := range res.Removed {
		c.recorder.Event(nodeRef(name), corev1.EventTypeNormal, ReasonRemovingNode, RemovingNodeMessage(name))
	}
	for _, name := range res.MarkPodsNotReady {
		c.markPods(ctx, name, false)
	}
	for _, u := range res.TaintUpdates {
		if failed[u.Node] {
			c.mu.Lock()
			c.core.TaintNotApplied(u, false)
			c.mu.Unlock()
			continue
		}
		c.applyTaint(ctx, u)
	}
	for _, z := range res.ZoneChanges {
		c.cfg.Logger.Info("controller detected that zone is now in new state", "zone", ZoneName(z.Zone), "state", z.To)
	}
	switch res.Disruption {
	case DisruptionEntered:
		c.cfg.Logger.Warn("all zones are fully disrupted: no NoExecute taints until one recovers")
	case DisruptionExited:
		c.cfg.Logger.Info("a zone recovered from full disruption")
	}
	// The zone label is the zone key itself, region + ":\x00:" + zone (""
	// for unlabelled nodes), as kube-controller-manager exports it, so
	// recording rules written against upstream work unchanged; only
	// `nodeplane zones` prints the readable form.
	for _, z := range res.Zones {
		c.m.health.WithLabelValues(z.Zone).Set(z.Health)
		c.m.size.WithLabelValues(z.Zone).Set(float64(z.Size))
		c.m.unhealthy.WithLabelValues(z.Zone).Set(float64(z.Unhealthy))
		c.m.evictions.WithLabelValues(z.Zone).Add(0)
	}
	for _, key := range res.VanishedZones {
		c.m.health.DeleteLabelValues(key)
		c.m.size.DeleteLabelValues(key)
		c.m.unhealthy.DeleteLabelValues(key)
	}
}

// applyStatusUpdate writes one StatusUpdate of a pass and does what
// follows it (the NodeNotReady event, the node's pods); it reports whether
// the write was made.
func (c *Controller) applyStatusUpdate(ctx context.Context, u StatusUpdate) bool {
	start := c.cfg.Clock.Now()
	if err := c.writeUnknown(ctx, u.Node); err != nil {
		if errors.Is(err, errNodeReported) {
			c.cfg.Logger.Info("node posted its status while being marked Unknown: judged again next pass", "node", u.Node.Name)
		} else {
			c.cfg.Logger.Warn("mark node unknown", "node", u.Node.Name, "err", err)
		}
		c.mu.Lock()
		c.core.StatusUpdateFailed(u.Node.Name)
		c.mu.Unlock()
		return false
	}
	c.m.nodeHealth.Observe(c.cfg.Clock.Since(start).Seconds())
	c.cfg.Logger.Info("node stopped posting status: conditions Unknown", "node", u.Node.Name)
	if u.NotReady {
		c.recorder.Event(nodeRef(u.Node.Name), corev1.EventTypeNormal, ReasonNodeNotReady, NodeNotReadyMessage(u.Node.Name))
		c.markPods(ctx, u.Node.Name, true)
	}
	return true
}

// errNodeReported ends writeUnknown without a write: the node posted its
// status after it was judged, so the next monitor pass decides again from
// what it posted.
var errNodeReported = errors.New("node posted its status after it was judged")

// writeUnknown writes the Unknown conditions (node is the marked copy,
// MarkUnknown), re-reading the node on a failed write (SPEC NLC-7). On a
// re-read it writes nothing when the node is already Unknown (an earlier
// attempt whose answer was lost, or another writer) and returns
// errNodeReported when the node's Ready heartbeat is newer than the one it
// was judged by: a node that just reported must not be marked Unknown.
func (c *Controller) writeUnknown(ctx context.Context, node *corev1.Node) error {
	judged := readyCondition(node)
	first, readFailed := true, false
	err := retry.OnError(nodeWriteRetries, func(err error) bool { return !readFailed && !errors.Is(err, errNodeReported) }, func() error {
		if !first {
			fresh, err := c.cfg.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
			if err != nil {
				readFailed = true
				return err
			}
			if reportedSince(fresh, judged) {
				return errNodeReported
			}
			marked := MarkUnknown(fresh, c.cfg.Clock.Now())
			if marked == nil {
				return nil
			}
			node = marked
		}
		first = false
		return c.putStatus(ctx, node)
	})
	if !readFailed && apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// putStatus writes node's status. The answer, the written Node, is not
// needed: through the client's REST client it is not decoded (with 50,000
// nodes going dark that is 50,000 Nodes decoded and dropped). A client
// without one (a fake in tests) writes through the typed client.
func (c *Controller) putStatus(ctx context.Context, node *corev1.Node) error {
	core := c.cfg.Client.CoreV1()
	if rc, ok := core.RESTClient().(*rest.RESTClient); ok && rc != nil {
		return rc.Put().Resource("nodes").Name(node.Name).SubResource("status").Body(node).Do(ctx).Error()
	}
	_, err := core.Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

// reportedSince tells whether fresh carries a Ready condition, not Unknown,
// with a heartbeat later than the one of judged (the Ready condition the
// node was judged by; nil when it had none).
func reportedSince(fresh *corev1.Node, judged *corev1.NodeCondition) bool {
	r := readyCondition(fresh)
	if r == nil || r.Status == corev1.ConditionUnknown {
		return false
	}
	return judged == nil || r.LastHeartbeatTime.After(judged.LastHeartbeatTime.Time)
}

// markPods sets Ready=False on every pod of the node (SPEC NLC-9).
func (c *Controller) markPods(ctx context.Context, node string, events bool) {
	objs, err := c.pods.ByIndex(manager.PodsByNode, node)
	if err != nil {
		return
	}
	failed := false
	for _, o := range objs {
		p := o.(*corev1.Pod).DeepCopy()
		changed := false
		for i := range p.Status.Conditions {
			cond := &p.Status.Conditions[i]
			if cond.Type == corev1.PodReady && cond.Status != corev1.ConditionFalse {
				cond.Status = corev1.ConditionFalse
				cond.LastTransitionTime = metav1.NewTime(c.cfg.Clock.Now())
				changed = true
			}
		}
		if !changed {
			continue
		}
		if _, err := c.cfg.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			failed = true
			continue
		}
		if events {
			c.recorder.Event(p, corev1.EventTypeWarning, ReasonNodeNotReady, PodNotReadyMessage)
		}
	}
	if failed {
		c.mu.Lock()
		c.core.PodMarkingFailed(node)
		c.mu.Unlock()
	}
}

func (c *Controller) taintPass(ctx context.Context) {
	c.mu.Lock()
	c.fresh.Seen(c.leaseInf.LastSyncResourceVersion())
	fresh, _ := c.fresh.Fresh(c.cfg.Clock.Now())
	updates := c.core.Taint(c.cfg.Clock.Now(), fresh)
	c.mu.Unlock()
	for _, u := range updates {
		c.applyTaint(ctx, u)
	}
}

// applyTaint writes one NoExecute change as a read-modify-write of
// spec.taints.
func (c *Controller) applyTaint(ctx context.Context, u TaintUpdate) {
	if u.Ready != "" {
		if n, err := c.nodes.Get(u.Node); err != nil || readyStatus(n) != u.Ready {
			c.mu.Lock()
			c.core.TaintNotApplied(u, false)
			c.mu.Unlock()
			return
		}
	}
	err := c.updateTaints(ctx, u.Node, u.Add, u.Remove)
	if err != nil {
		c.cfg.Logger.Warn("update NoExecute taints", "node", u.Node, "err", err)
		c.mu.Lock()
		c.core.TaintNotApplied(u, !apierrors.IsNotFound(err))
		c.mu.Unlock()
		return
	}
	if u.Eviction {
		c.m.evictions.WithLabelValues(u.Zone).Inc()
	}
	for _, t := range u.Add {
		c.cfg.Logger.Info("tainted node", "node", u.Node, "taint", t.Key+":"+string(t.Effect))
	}
}

// updateTaints adds (replacing the same key and effect) and removes taints
// on the live node, retrying on conflicts.
func (c *Controller) updateTaints(ctx context.Context, name string, add, remove []corev1.Taint) error {
	return c.updateNode(ctx, name, func(n *corev1.Node) bool {
		next, changed := editTaints(n.Spec.Taints, add, remove)
		n.Spec.Taints = next
		return changed
	})
}

// nodeWriteRetries is how many times a node write re-reads the node and
// tries again (conflicts for updateNode, any error for writeUnknown), at
// once.
var nodeWriteRetries = wait.Backoff{Steps: 5, Factor: 1}

// updateNode applies mutate to the node and writes it unless mutate reports
// no change. The first try starts from a copy of the informer's Node, as
// upstream's taint helpers start from the API server's cache: the taints
// and labels written were decided from that Node, and reading it from the
// API first cost a GET of the whole Node per write — 200,000 of them while
// 100,000 new nodes lose their not-ready NoSchedule taint. A conflict (the
// cached Node was not the latest) or a node the cache lacks reads it from
// the API.
func (c *Controller) updateNode(ctx context.Context, name string, mutate func(*corev1.Node) bool) error {
	nodes := c.cfg.Client.CoreV1().Nodes()
	first := true
	return retry.RetryOnConflict(nodeWriteRetries, func() error {
		var n *corev1.Node
		if first {
			first = false
			if cached, err := c.nodes.Get(name); err == nil {
				n = cached.DeepCopy()
			}
		}
		if n == nil {
			var err error
			if n, err = nodes.Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		if !mutate(n) {
			return nil
		}
		_, err := nodes.Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

func editTaints(have, add, remove []corev1.Taint) ([]corev1.Taint, bool) {
	same := func(a, b corev1.Taint) bool { return a.Key == b.Key && a.Effect == b.Effect }
	out := make([]corev1.Taint, 0, len(have)+len(add))
	changed := false
	for _, t := range have {
		drop := false
		for _, r := range append(append([]corev1.Taint(nil), remove...), add...) {
			if same(t, r) {
				drop = true
			}
		}
		if drop {
			changed = true
			continue
		}
		out = append(out, t)
	}
	for _, a := range add {
		out = append(out, a)
		changed = true
	}
	if changed && len(add) > 0 && len(remove) == 0 {
		// Re-adding exactly what is there is no change.
		changed = !sameTaints(have, out)
	}
	return out, changed
}

func sameTaints(a, b []corev1.Taint) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		found := false
		for _, y := range b {
			if x.Key == y.Key && x.Effect == y.Effect && x.Value == y.Value {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (c *Controller) enqueue(obj any) {
	if n, ok := obj.(*corev1.Node); ok {
		c.noSchedule.Add(n.Name)
	}
}

// nextNoSchedule keeps one node's condition NoSchedule taints (SPEC NLC-11)
// and beta os/arch labels in line.
func (c *Controller) nextNoSchedule(ctx context.Context) bool {
	name, quit := c.noSchedule.Get()
	if quit {
		return false
	}
	defer c.noSchedule.Done(name)
	n, err := c.nodes.Get(name)
	if err != nil {
		c.noSchedule.Forget(name)
		return true
	}
	add, remove := NoScheduleTaints(n, c.cfg.Clock.Now())
	if len(add) > 0 || len(remove) > 0 {
		if err := c.updateTaints(ctx, name, add, remove); err != nil && !apierrors.IsNotFound(err) {
			c.noSchedule.AddRateLimited(name)
			return true
		}
	}
	if lbl := BetaLabels(n); len(lbl) > 0 {
		if err := c.addLabels(ctx, name, lbl); err != nil && !apierrors.IsNotFound(err) {
			c.noSchedule.AddRateLimited(name)
			return true
		}
	}
	c.noSchedule.Forget(name)
	return true
}

func (c *Controller) addLabels(ctx context.Context, name string, lbl map[string]string) error {
	return c.updateNode(ctx, name, func(n *corev1.Node) bool {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		for k, v := range lbl {
			n.Labels[k] = v
		}
		return true
	})
}

func nodeRef(name string) *corev1.ObjectReference {
	// UID = name, as the kubelet and upstream's controller refer to nodes in events.
	return &corev1.ObjectReference{Kind: "Node", Name: name, UID: types.UID(name), APIVersion: "v1"}
}
