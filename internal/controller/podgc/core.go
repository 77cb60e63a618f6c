package podgc

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeplane/nodeplane/internal/podcondition"
)

// Names the controller uses (SPEC §5, §10.3, §10.5).
const (
	// ControllerName is the --controllers name.
	ControllerName = "pod-garbage-collector-controller"

	// Values of the reason label of the metrics.
	ReasonTerminated   = "terminated"
	ReasonOutOfService = "out-of-service"
	ReasonOrphaned     = "orphaned"
	ReasonUnscheduled  = "unscheduled"

	// MetricForceDeletes counts force deletions by {namespace, reason};
	// MetricForceDeleteErrors counts those that failed.
	MetricForceDeletes      = "pod_gc_collector_force_delete_pods_total"
	MetricForceDeleteErrors = "pod_gc_collector_force_delete_pod_errors_total"

	// ConditionReason and ConditionMessage go on the DisruptionTarget
	// condition of an orphaned pod.
	ConditionReason  = "DeletionByPodGC"
	ConditionMessage = "PodGC: node no longer exists"

	// evictedReason is the status.reason the kubelet gives pods it evicted.
	evictedReason = "Evicted"
)

// Config tunes the collector.
type Config struct {
	// TerminatedPodThreshold is --terminated-pod-gc-threshold: how many
	// terminated pods (phase other than Pending, Running and Unknown) may
	// exist before the oldest are deleted. Zero or less turns that rule off.
	TerminatedPodThreshold int
	// Quarantine is how long a node that pods are bound to must be missing
	// from the cache before the shell asks the API server whether it exists.
	// Upstream: 40 s. A pass sees it run out, so orphans go after
	// Quarantine plus up to one Period.
	Quarantine time.Duration
	// Period is how often the shell runs a pass (upstream gcCheckPeriod,
	// 20 s). The core does not use it.
	Period time.Duration
}

// DefaultConfig returns upstream's defaults.
func DefaultConfig() Config {
	return Config{TerminatedPodThreshold: 12500, Quarantine: 40 * time.Second, Period: 20 * time.Second}
}

// Deletion is one force deletion. The shell, if Fail, first patches the
// pod's status to FailedStatus (phase Failed, plus Condition if set), then
// deletes the pod with gracePeriodSeconds=0 (a UID precondition keeps a
// recreated namesake safe), counting MetricForceDeletes{namespace, reason}
// and, on error, MetricForceDeleteErrors. NotFound counts as done.
type Deletion struct {
	// Pod is the cached object; do not modify it.
	Pod    *corev1.Pod
	Reason string
	// Fail is set when the pod is not yet Succeeded or Failed: without a
	// kubelet nothing else would ever end its phase.
	Fail bool
	// Condition is written with the phase (orphaned pods only).
	Condition *corev1.PodCondition
}

// Ref names the pod.
func (d Deletion) Ref() types.NamespacedName {
	return types.NamespacedName{Namespace: d.Pod.Namespace, Name: d.Pod.Name}
}

// FailedStatus is the pod's status with phase Failed and, if set, Condition
// added or updated (lastTransitionTime now when its status changes;
// observedGeneration the pod's generation).
func (d Deletion) FailedStatus(now time.Time) corev1.PodStatus {
	st := *d.Pod.Status.DeepCopy()
	st.Phase = corev1.PodFailed
	if d.Condition == nil {
		return st
	}
	c := *d.Condition
	c.ObservedGeneration = d.Pod.Generation
	podcondition.Set(&st, c, now)
	return st
}

// Plan is one pass's work. The shell carries it out in PGC-1 order:
// Terminated, OutOfService, then GETs each node in Confirm and deletes
// Orphans(the ones that were NotFound), then Unscheduled. A pod appears at
// most once in the whole plan.
type Plan struct {
	Terminated   []Deletion
	OutOfService []Deletion
	// Confirm lists the nodes whose quarantine has run out, sorted.
	Confirm     []string
	Unscheduled []Deletion

	orphans map[string][]*corev1.Pod
}

// Orphans returns the deletions for the pods bound to the nodes in gone (the
// nodes of Confirm the API server says do not exist), sorted by namespace
// and name.
func (p Plan) Orphans(gone []string) []Deletion {
	var out []Deletion
	for _, n := range gone {
		for _, pod := range p.orphans[n] {
			d := forceDelete(pod, ReasonOrphaned)
			if d.Fail {
				d.Condition = &corev1.PodCondition{
					Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
					Reason: ConditionReason, Message: ConditionMessage,
				}
			}
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return lessName(out[i].Pod, out[j].Pod) })
	return out
}

// Core remembers since when each missing node has been missing. It is not
// safe for concurrent use; passes do not overlap.
type Core struct {
	cfg          Config
	missingSince map[string]time.Time
}

// New returns a Core with no node in quarantine.
func New(cfg Config) *Core {
	return &Core{cfg: cfg, missingSince: map[string]time.Time{}}
}

// Plan decides one pass over all pods and nodes in the caches at now.
func (c *Core) Plan(now time.Time, pods []*corev1.Pod, nodes []*corev1.Node) Plan {
	var p Plan
	done := map[types.UID]bool{}
	take := func(d Deletion) Deletion {
		done[d.Pod.UID] = true
		return d
	}

	// PGC-5: terminated pods beyond the threshold, evicted first, then oldest.
	if c.cfg.TerminatedPodThreshold > 0 {
		var terminated []*corev1.Pod
		for _, pod := range pods {
			if isTerminated(pod) {
				terminated = append(terminated, pod)
			}
		}
		if excess := len(terminated) - c.cfg.TerminatedPodThreshold; excess > 0 {
			sortForDeletion(terminated)
			for _, pod := range terminated[:excess] {
				p.Terminated = append(p.Terminated, take(forceDelete(pod, ReasonTerminated)))
			}
		}
	}

	byName := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}

	// PGC-2: terminating pods on a not-Ready node with the out-of-service taint.
	var oos []*corev1.Pod
	for _, pod := range pods {
		if done[pod.UID] || pod.DeletionTimestamp == nil {
			continue
		}
		if n := byName[pod.Spec.NodeName]; n != nil && !isReady(n) && hasTaintKey(n, corev1.TaintNodeOutOfService) {
			oos = append(oos, pod)
		}
	}
	sortForDeletion(oos)
	for _, pod := range oos {
		p.OutOfService = append(p.OutOfService, take(forceDelete(pod, ReasonOutOfService)))
	}

	// PGC-3: pods bound to nodes missing from the cache, after quarantine.
	missing := map[string][]*corev1.Pod{}
	for _, pod := range pods {
		if n := pod.Spec.NodeName; n != "" && byName[n] == nil && !done[pod.UID] {
			missing[n] = append(missing[n], pod)
		}
	}
	for n := range c.missingSince {
		if _, ok := missing[n]; !ok {
			delete(c.missingSince, n) // back in the cache, or no pod left on it
		}
	}
	for n, ps := range missing {
		since, ok := c.missingSince[n]
		if !ok {
			c.missingSince[n] = now
			continue
		}
		if now.Sub(since) >= c.cfg.Quarantine {
			p.Confirm = append(p.Confirm, n)
			if p.orphans == nil {
				p.orphans = map[string][]*corev1.Pod{}
			}
			p.orphans[n] = ps
		}
	}
	sort.Strings(p.Confirm)

	// PGC-4: terminating pods that were never scheduled.
	for _, pod := range pods {
		if !done[pod.UID] && pod.DeletionTimestamp != nil && pod.Spec.NodeName == "" {
			p.Unscheduled = append(p.Unscheduled, take(forceDelete(pod, ReasonUnscheduled)))
		}
	}
	sort.Slice(p.Unscheduled, func(i, j int) bool { return lessName(p.Unscheduled[i].Pod, p.Unscheduled[j].Pod) })
	return p
}

// Quarantined returns since when each node in quarantine has been missing.
func (c *Core) Quarantined() map[string]time.Time {
	out := make(map[string]time.Time, len(c.missingSince))
	for n, t := range c.missingSince {
		out[n] = t
	}
	return out
}

func forceDelete(pod *corev1.Pod, reason string) Deletion {
	return Deletion{Pod: pod, Reason: reason, Fail: pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed}
}

// isTerminated is upstream's test: any phase but Pending, Running and
// Unknown, so an empty phase counts too.
func isTerminated(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodPending, corev1.PodRunning, corev1.PodUnknown:
		return false
	}
	return true
}

func isEvicted(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed && pod.Status.Reason == evictedReason
}

// sortForDeletion orders pods as upstream: evicted first, then by creation,
// then by name.
func sortForDeletion(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if ea, eb := isEvicted(a), isEvicted(b); ea != eb {
			return ea
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

func lessName(a, b *corev1.Pod) bool {
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

func isReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasTaintKey(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
