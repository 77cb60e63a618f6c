package daemonset

import (
	"fmt"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodeplane/nodeplane/internal/controller/ownership"
	"github.com/nodeplane/nodeplane/internal/controller/replicaset"
)

// Names the controller uses, as upstream.
const (
	// ControllerName is the --controllers name and the event source.
	ControllerName = "daemonset-controller"

	ReasonSuccessfulCreate = ownership.ReasonSuccessfulCreate
	ReasonFailedCreate     = ownership.ReasonFailedCreate
	ReasonSuccessfulDelete = ownership.ReasonSuccessfulDelete
	ReasonFailedDelete     = ownership.ReasonFailedDelete
	// ReasonFailedDaemonPod is the warning event before a failed daemon
	// pod is deleted to be replaced.
	ReasonFailedDaemonPod = "FailedDaemonPod"
	ReasonSelectingAll    = "SelectingAll"

	// DefaultBurstReplicas caps the pods one sync creates or deletes.
	DefaultBurstReplicas = 250

	// FailedPodBackoff and MaxFailedPodBackoff space out the replacement
	// of a daemon pod that keeps failing on a node (e.g. the node agent
	// refuses it): 1 s, doubling, at most 15 min; reset after twice the
	// maximum without a failure.
	FailedPodBackoff    = time.Second
	MaxFailedPodBackoff = 15 * time.Minute
)

// Kind is the GroupVersionKind of the controller references to a DaemonSet.
var Kind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// Input is what one sync of a DaemonSet sees.
type Input struct {
	DS    *appsv1.DaemonSet
	Nodes []*corev1.Node
	// Pods are the namespace's pods the DaemonSet controls or that have no
	// controller; others are ignored.
	Pods []*corev1.Pod
	// Settled: the creations and deletions of earlier syncs have been
	// observed (ownership.Expectations).
	Settled bool
	// BurstReplicas caps creations and deletions (DefaultBurstReplicas
	// when ≤ 0).
	BurstReplicas int
	Now           time.Time
}

// Event is an event to record on the DaemonSet.
type Event struct {
	Type, Reason, Message string
}

// Plan is what one sync does, in order: record Events; patch Adopt and
// Release; create a pod (PodForNode with Hash) on each of Create; delete
// Delete; write Status; sync again after RequeueAfter when positive.
type Plan struct {
	Events  []Event
	Adopt   []*corev1.Pod
	Release []*corev1.Pod
	// Create are the names of the nodes that need a pod.
	Create []string
	Delete []*corev1.Pod
	// Hash is the template hash the new pods carry.
	Hash   string
	Status appsv1.DaemonSetStatus
	// RequeueAfter is the earliest of: a ready pod becoming available, a
	// failed pod's back-off running out.
	RequeueAfter time.Duration
}

// Core decides syncs. It keeps the back-off of nodes whose daemon pods
// keep failing; otherwise it is a pure function of its Input. Safe for
// concurrent use.
type Core struct {
	mu      sync.Mutex
	backoff map[string]backoff
}

type backoff struct {
	delay time.Duration
	last  time.Time
}

// New returns a Core with no back-off.
func New() *Core { return &Core{backoff: map[string]backoff{}} }

// Decide plans one sync of a DaemonSet. It returns an error only for a
// selector or maxUnavailable that does not parse (validation refuses both).
func (c *Core) Decide(in Input) (Plan, error) {
	ds := in.DS
	var p Plan
	if ds.DeletionTimestamp != nil {
		p.Status = ds.Status
		return p, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return p, fmt.Errorf("daemon set %s/%s selector: %w", ds.Namespace, ds.Name, err)
	}
	if sel.Empty() {
		p.Events = append(p.Events, Event{corev1.EventTypeWarning, ReasonSelectingAll, "This daemon set is selecting all pods. A non-empty selector is required."})
		p.Status = ds.Status
		return p, nil
	}
	s := &pass{c: c, in: in, ds: ds, placer: NewPlacer(ds), now: in.Now,
		hash: replicaset.TemplateHash(&ds.Spec.Template, ds.Status.CollisionCount),
		gen:  ds.Annotations[appsv1.DeprecatedTemplateGeneration],
	}
	claimed := ownership.Claim(ds, sel, in.Pods)
	p.Adopt, p.Release = claimed.Adopt, claimed.Release
	s.group(append(append([]*corev1.Pod(nil), claimed.Owned...), claimed.Adopt...))

	if in.Settled {
		s.manage()
		if len(s.create) == 0 && len(s.delete) == 0 && ds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
			if err := s.rollingUpdate(); err != nil {
				return p, err
			}
		}
	}
	burst := in.BurstReplicas
	if burst <= 0 {
		burst = DefaultBurstReplicas
	}
	p.Create = s.create[:min(len(s.create), burst)]
	p.Delete = s.delete[:min(len(s.delete), burst)]
	p.Events = append(p.Events, s.events...)
	p.Hash = s.hash
	p.Status = s.status()
	p.RequeueAfter = s.wake
	return p, nil
}

// pass is the working state of one Decide.
type pass struct {
	c      *Core
	in     Input
	ds     *appsv1.DaemonSet
	placer *Placer
	now    time.Time
	hash   string
	gen    string

	// byNode are the owned pods by target node, but pods that are both
	// terminating and ended (they are gone for all purposes).
	byNode map[string][]*corev1.Pod
	nodes  []*corev1.Node
	fits   map[string][2]bool

	create []string
	delete []*corev1.Pod
	events []Event
	wake   time.Duration
}

func (s *pass) group(owned []*corev1.Pod) {
	s.byNode = map[string][]*corev1.Pod{}
	for _, p := range owned {
		if p.DeletionTimestamp != nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) {
			continue
		}
		if n, ok := targetNode(p); ok {
			s.byNode[n] = append(s.byNode[n], p)
		}
	}
	for _, pods := range s.byNode {
		sort.SliceStable(pods, func(i, j int) bool { return scheduledThenOlder(pods[i], pods[j]) })
	}
	s.nodes = append([]*corev1.Node(nil), s.in.Nodes...)
	sort.Slice(s.nodes, func(i, j int) bool { return s.nodes[i].Name < s.nodes[j].Name })
	s.fits = make(map[string][2]bool, len(s.nodes))
	for _, n := range s.nodes {
		run, keep := s.placer.Fits(n)
		s.fits[n.Name] = [2]bool{run, keep}
	}
}

// scheduledThenOlder orders a node's daemon pods: bound ones first, then
// by creation, then by name.
func scheduledThenOlder(a, b *corev1.Pod) bool {
	if (a.Spec.NodeName != "") != (b.Spec.NodeName != "") {
		return a.Spec.NodeName != ""
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// manage gives every eligible node one pod: create where missing; where
// pods may stay, delete failed ones (with back-off), succeeded ones and
// all but the oldest extra running one; where they may not, delete them;
// delete unbound pods aimed at nodes that no longer exist.
func (s *pass) manage() {
	for _, n := range s.nodes {
		f := s.fits[n.Name]
		run, keep := f[0], f[1]
		pods := s.byNode[n.Name]
		switch {
		case run && len(pods) == 0:
			s.create = append(s.create, n.Name)
		case keep:
			var running []*corev1.Pod
			for _, p := range pods {
				switch {
				case p.DeletionTimestamp != nil:
				case p.Status.Phase == corev1.PodFailed:
					if s.failedPod(n.Name, p) {
						s.delete = append(s.delete, p)
					}
				case p.Status.Phase == corev1.PodSucceeded:
					s.delete = append(s.delete, p)
				default:
					running = append(running, p)
				}
			}
			if len(running) > 1 {
				s.delete = append(s.delete, running[1:]...)
			}
		default:
			for _, p := range pods {
				if p.DeletionTimestamp == nil {
					s.delete = append(s.delete, p)
				}
			}
		}
	}
	names := make([]string, 0, len(s.byNode))
	for name := range s.byNode {
		if _, ok := s.fits[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		for _, p := range s.byNode[name] {
			if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
				s.delete = append(s.delete, p)
			}
		}
	}
}

// failedPod decides whether a failed daemon pod on node is deleted now
// (with a FailedDaemonPod event) or left until its node's back-off runs
// out.
func (s *pass) failedPod(node string, p *corev1.Pod) bool {
	key := string(s.ds.UID) + "/" + node
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	for k, b := range s.c.backoff {
		if s.now.Sub(b.last) > 2*MaxFailedPodBackoff {
			delete(s.c.backoff, k)
		}
	}
	b, ok := s.c.backoff[key]
	if ok && s.now.Sub(b.last) < b.delay {
		s.wakeIn(b.last.Add(b.delay).Sub(s.now))
		return false
	}
	if ok {
		b.delay = min(2*b.delay, MaxFailedPodBackoff)
	} else {
		b.delay = FailedPodBackoff
	}
	b.last = s.now
	s.c.backoff[key] = b
	s.events = append(s.events, Event{corev1.EventTypeWarning, ReasonFailedDaemonPod,
		fmt.Sprintf("Found failed daemon pod %s/%s on node %s, will try to kill it", p.Namespace, p.Name, node)})
	return true
}

// rollingUpdate deletes old-template pods so they are replaced, keeping
// at most maxUnavailable nodes (of those that should run a pod; rounded
// up) without an available pod. An old pod that is not available anyway
// goes at once. maxSurge is not supported: it counts as 0.
func (s *pass) rollingUpdate() error {
	desired := 0
	for _, f := range s.fits {
		if f[0] {
			desired++
		}
	}
	var maxUnavailable int
	if ru := s.ds.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		v, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, desired, true)
		if err != nil {
			return fmt.Errorf("daemon set %s/%s maxUnavailable: %w", s.ds.Namespace, s.ds.Name, err)
		}
		maxUnavailable = v
	}
	if desired > 0 && maxUnavailable == 0 {
		maxUnavailable = 1
	}
	names := make([]string, 0, len(s.byNode))
	for name := range s.byNode {
		names = append(names, name)
	}
	sort.Strings(names)
	unavailable := 0
	var replaceNow, candidates []*corev1.Pod
	for _, name := range names {
		var newPod, oldPod *corev1.Pod
		mixed := false
		for _, p := range s.byNode[name] {
			if p.DeletionTimestamp != nil {
				continue
			}
			slot := &oldPod
			if s.updated(p) {
				slot = &newPod
			}
			if *slot != nil {
				mixed = true
			}
			*slot = p
		}
		switch {
		case mixed, newPod == nil && oldPod == nil, newPod != nil && oldPod != nil:
			// manage sorts this node out; it counts as unavailable.
			unavailable++
		case newPod != nil:
			if !replicaset.PodAvailable(newPod, s.ds.Spec.MinReadySeconds, s.now) {
				unavailable++
			}
		case !replicaset.PodAvailable(oldPod, s.ds.Spec.MinReadySeconds, s.now):
			replaceNow = append(replaceNow, oldPod)
		case unavailable < maxUnavailable:
			candidates = append(candidates, oldPod)
		}
	}
	room := min(max(maxUnavailable-unavailable, 0), len(candidates))
	s.delete = append(append(s.delete, replaceNow...), candidates[:room]...)
	return nil
}

// updated reports whether p was made from the current template: its hash
// label, or its template generation label, matches.
func (s *pass) updated(p *corev1.Pod) bool {
	return p.Labels[HashLabel] == s.hash || (s.gen != "" && p.Labels[GenerationLabel] == s.gen)
}

// status counts, over the nodes, the DaemonSet's status; each node's
// oldest pod speaks for it.
func (s *pass) status() appsv1.DaemonSetStatus {
	st := appsv1.DaemonSetStatus{
		ObservedGeneration: s.ds.Generation,
		CollisionCount:     s.ds.Status.CollisionCount,
		Conditions:         append([]appsv1.DaemonSetCondition(nil), s.ds.Status.Conditions...),
	}
	for _, n := range s.nodes {
		run := s.fits[n.Name][0]
		pods := s.byNode[n.Name]
		if !run {
			if len(pods) > 0 {
				st.NumberMisscheduled++
			}
			continue
		}
		st.DesiredNumberScheduled++
		if len(pods) == 0 {
			continue
		}
		st.CurrentNumberScheduled++
		p := pods[0]
		if wait, ready := replicaset.UntilAvailable(p, s.ds.Spec.MinReadySeconds, s.now); ready {
			st.NumberReady++
			if wait == 0 {
				st.NumberAvailable++
			} else {
				s.wakeIn(wait)
			}
		}
		if s.updated(p) {
			st.UpdatedNumberScheduled++
		}
	}
	st.NumberUnavailable = st.DesiredNumberScheduled - st.NumberAvailable
	return st
}

func (s *pass) wakeIn(d time.Duration) {
	if d > 0 && (s.wake == 0 || d < s.wake) {
		s.wake = d
	}
}

// Forget drops the back-off of a DaemonSet that is gone.
func (c *Core) Forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	prefix := string(uid) + "/"
	for k := range c.backoff {
		if len(k) > len(prefix) && k[:len(prefix)] == prefix {
			delete(c.backoff, k)
		}
	}
}
