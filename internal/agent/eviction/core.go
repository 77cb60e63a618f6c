// Package eviction is the agent's node-pressure eviction manager (the
// kubelet's eviction manager): it compares the eviction signals observed on
// the host (memory.available, nodefs.available, nodefs.inodesFree,
// pid.available) with the configured hard and soft thresholds, keeps the
// MemoryPressure/DiskPressure/PIDPressure conditions (held for
// evictionPressureTransitionPeriod after the signal recovers), refuses new
// pods under pressure as the kubelet does, and evicts one pod at a time,
// ranked as the kubelet ranks them, until the signal has recovered by its
// minimum reclaim.
//
// Decide is the pure core: thresholds, observations, pods with their usage
// and now in, conditions and at most one eviction out. Manager is the thin
// shell that observes the host on a ticker and carries out the decision.
package eviction

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeplane/nodeplane/internal/agent/config"
	"github.com/nodeplane/nodeplane/internal/agent/host"
	"github.com/nodeplane/nodeplane/internal/agent/podstatus"
)

// The kubelet's reasons and message fragments (pkg/kubelet/eviction).
const (
	// Reason is the evicted pod's status reason, its event's reason and the
	// reason a pod refused under pressure is failed with.
	Reason = "Evicted"
	// ReasonTerminationByKubelet is the DisruptionTarget condition's reason.
	ReasonTerminationByKubelet = "TerminationByKubelet"

	nodeLowMessageFmt       = "The node was low on resource: %v. "
	thresholdMetMessageFmt  = "Threshold quantity: %v, available: %v. "
	containerMessageFmt     = "Container %s was using %s, request is %s, has larger consumption of %v. "
	nodeConditionMessageFmt = "The node had condition: %v. "

	// SystemCriticalPriority is the priority from which a pod is critical:
	// never evicted, always admitted.
	SystemCriticalPriority int32 = 2000000000
)

// Resources named in eviction messages for the signals without a
// corev1.ResourceName of their own.
const (
	resourceInodes corev1.ResourceName = "inodes"
	resourcePIDs   corev1.ResourceName = "pids"
)

// Threshold is one configured threshold for one signal.
type Threshold struct {
	Signal config.Signal
	Value  config.Threshold
	// GracePeriod is how long a soft threshold must hold before it evicts;
	// 0 for hard thresholds.
	GracePeriod time.Duration
	// MinReclaim is how far past Value the signal must recover before the
	// threshold stops counting as met.
	MinReclaim config.Threshold
	Hard       bool
}

func (t Threshold) key() string {
	if t.Hard {
		return "hard/" + string(t.Signal)
	}
	return "soft/" + string(t.Signal)
}

// Thresholds returns the thresholds settings configure that nodeplane judges
// (hard first, by signal), each with its minimum reclaim. Signals nodeplane
// does not observe separately (imagefs.*, containerfs.*) are judged against
// the node filesystem, as on a node whose images share it;
// allocatableMemory.available is not judged.
func Thresholds(s config.Settings) []Threshold {
	var out []Threshold
	add := func(m map[config.Signal]config.Threshold, hard bool) {
		for _, sig := range slices.Sorted(maps.Keys(m)) {
			if sig == config.SignalAllocatableMemoryAvailable || m[sig].IsZero() {
				continue
			}
			t := Threshold{Signal: sig, Value: m[sig], MinReclaim: s.EvictionMinimumReclaim[sig], Hard: hard}
			if !hard {
				t.GracePeriod = s.EvictionSoftGracePeriod[sig]
			}
			out = append(out, t)
		}
	}
	add(s.EvictionHard, true)
	add(s.EvictionSoft, false)
	return out
}

// Observations are the observed signals by name.
type Observations map[config.Signal]host.Signal

// Observe maps the host's observations to every signal name they stand for.
func Observe(s host.Signals) Observations {
	return Observations{
		config.SignalMemoryAvailable:       s.Memory,
		config.SignalNodeFSAvailable:       s.NodeFS,
		config.SignalImageFSAvailable:      s.NodeFS,
		config.SignalContainerFSAvailable:  s.NodeFS,
		config.SignalNodeFSInodesFree:      s.NodeFSInodes,
		config.SignalImageFSInodesFree:     s.NodeFSInodes,
		config.SignalContainerFSInodesFree: s.NodeFSInodes,
		config.SignalPIDAvailable:          s.PID,
	}
}

// ContainerUsage is what one container uses.
type ContainerUsage struct {
	Name string
	// Memory is the working set in bytes; Disk the bytes it wrote (logs).
	Memory, Disk int64
}

// Usage is what one pod uses now.
type Usage struct {
	// Memory is the working set of its processes, in bytes.
	Memory int64
	// Disk is the bytes of its logs and emptyDir volumes; Inodes the
	// inodes they take.
	Disk, Inodes int64
	// Processes counts its tasks (each holds a PID).
	Processes  int64
	Containers []ContainerUsage
}

// Pod is a running pod with its usage.
type Pod struct {
	Pod   *corev1.Pod
	Usage Usage
}

// State is what the core remembers between decisions. The zero value is
// the state before the first observation.
type State struct {
	met           []Threshold
	firstObserved map[string]time.Time
	lastObserved  map[corev1.NodeConditionType]time.Time
}

// Eviction is one pod to evict.
type Eviction struct {
	Pod    *corev1.Pod
	Signal config.Signal
	// Resource is the starved resource named in Message.
	Resource corev1.ResourceName
	// Message is the kubelet's eviction message: the pod's status message,
	// its DisruptionTarget condition's message and its event's.
	Message string
	// GracePeriod is the termination grace: 1 s for a hard threshold, the
	// pod's own capped at evictionMaxPodGracePeriod for a soft one.
	GracePeriod time.Duration
}

// Decision is the outcome of one observation.
type Decision struct {
	// Conditions are the pressure conditions that hold (MemoryPressure,
	// DiskPressure, PIDPressure, in that order).
	Conditions []corev1.NodeConditionType
	// Met are the thresholds met past their grace period.
	Met []Threshold
	// Evict is the pod to evict now, if any.
	Evict *Eviction
}

// Has reports whether the decision holds condition c.
func (d Decision) Has(c corev1.NodeConditionType) bool { return slices.Contains(d.Conditions, c) }

// Policy is the fixed part of the core's input.
type Policy struct {
	Thresholds []Threshold
	// TransitionPeriod holds a pressure condition this long after its
	// signal was last seen past a threshold.
	TransitionPeriod time.Duration
	// MaxPodGracePeriod caps a soft eviction's grace period (0: none).
	MaxPodGracePeriod time.Duration
}

// Decide judges one observation (SPEC §3.4 conditions, the kubelet's
// synchronize): thresholds met now, plus those met last time that have not
// recovered by their minimum reclaim; conditions from them, held for the
// transition period; soft thresholds only once met for their grace period;
// then, if any threshold is met, the first pod in the kubelet's ranking for
// the most urgent one (memory first) that is not critical. It updates st.
func Decide(p Policy, st *State, obs Observations, pods []Pod, now time.Time) Decision {
	met := thresholdsMet(p.Thresholds, obs, false)
	if len(st.met) > 0 {
		met = merge(met, thresholdsMet(st.met, obs, true))
	}
	first := map[string]time.Time{}
	for _, t := range met {
		if at, ok := st.firstObserved[t.key()]; ok {
			first[t.key()] = at
		} else {
			first[t.key()] = now
		}
	}
	st.firstObserved = first

	last := map[corev1.NodeConditionType]time.Time{}
	for c, at := range st.lastObserved {
		last[c] = at
	}
	for _, t := range met {
		last[conditionOf(t.Signal)] = now
	}
	var d Decision
	for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		at, ok := last[c]
		if !ok {
			continue
		}
		if at.Equal(now) || now.Sub(at) < p.TransitionPeriod {
			d.Conditions = append(d.Conditions, c)
		} else {
			delete(last, c)
		}
	}
	st.lastObserved = last

	for _, t := range met {
		if now.Sub(first[t.key()]) >= t.GracePeriod {
			d.Met = append(d.Met, t)
		}
	}
	st.met = d.Met
	if len(d.Met) == 0 {
		return d
	}
	target := slices.Clone(d.Met)
	sort.SliceStable(target, func(i, j int) bool { return signalRank(target[i].Signal) < signalRank(target[j].Signal) })
	t := target[0]
	res := resourceOf(t.Signal)
	ranked := slices.Clone(pods)
	Rank(t.Signal, ranked)
	for _, pod := range ranked {
		if IsCritical(pod.Pod) {
			continue
		}
		grace := time.Second
		if !t.Hard {
			grace = podGrace(pod.Pod)
			if p.MaxPodGracePeriod > 0 && grace > p.MaxPodGracePeriod {
				grace = p.MaxPodGracePeriod
			}
		}
		d.Evict = &Eviction{
			Pod: pod.Pod, Signal: t.Signal, Resource: res, GracePeriod: grace,
			Message: Message(res, t, obs[t.Signal], pod),
		}
		break
	}
	return d
}

func podGrace(p *corev1.Pod) time.Duration {
	if s := p.Spec.TerminationGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return 30 * time.Second
}

// thresholdsMet returns the thresholds whose signal is observed below
// them (below them plus their minimum reclaim with minReclaim).
func thresholdsMet(ts []Threshold, obs Observations, minReclaim bool) []Threshold {
	var out []Threshold
	for _, t := range ts {
		o, ok := obs[t.Signal]
		if !ok || !o.Observed() {
			continue
		}
		amount := t.Value.Amount(o.Capacity)
		if minReclaim {
			amount += t.MinReclaim.Amount(o.Capacity)
		}
		if o.Available < amount {
			out = append(out, t)
		}
	}
	return out
}

func merge(a, b []Threshold) []Threshold {
	out := slices.Clone(a)
	for _, t := range b {
		if !slices.ContainsFunc(out, func(x Threshold) bool { return x.key() == t.key() }) {
			out = append(out, t)
		}
	}
	return out
}

func conditionOf(s config.Signal) corev1.NodeConditionType {
	switch s {
	case config.SignalMemoryAvailable, config.SignalAllocatableMemoryAvailable:
		return corev1.NodeMemoryPressure
	case config.SignalPIDAvailable:
		return corev1.NodePIDPressure
	}
	return corev1.NodeDiskPressure
}

// signalRank orders thresholds for reclaim: memory first, as the kubelet.
func signalRank(s config.Signal) int {
	switch conditionOf(s) {
	case corev1.NodeMemoryPressure:
		return 0
	case corev1.NodeDiskPressure:
		return 1
	}
	return 2
}

func resourceOf(s config.Signal) corev1.ResourceName {
	switch s {
	case config.SignalMemoryAvailable, config.SignalAllocatableMemoryAvailable:
		return corev1.ResourceMemory
	case config.SignalPIDAvailable:
		return resourcePIDs
	case config.SignalNodeFSInodesFree, config.SignalImageFSInodesFree, config.SignalContainerFSInodesFree:
		return resourceInodes
	}
	return corev1.ResourceEphemeralStorage
}

// Rank sorts pods for eviction for signal as the kubelet does: memory —
// usage above requests first, then lower priority, then larger usage over
// requests; disk space — the same with ephemeral-storage; inodes — pods
// using any first, then priority, then most inodes; PIDs — lower priority,
// then most processes.
func Rank(s config.Signal, pods []Pod) {
	type key struct {
		exceeds  bool
		priority int32
		over     int64
	}
	keyOf := func(p Pod) key {
		var usage, request int64
		switch resourceOf(s) {
		case corev1.ResourceMemory:
			usage, request = p.Usage.Memory, requestOf(p.Pod, corev1.ResourceMemory)
		case corev1.ResourceEphemeralStorage:
			usage, request = p.Usage.Disk, requestOf(p.Pod, corev1.ResourceEphemeralStorage)
		case resourceInodes:
			usage = p.Usage.Inodes
		case resourcePIDs:
			return key{exceeds: true, priority: priorityOf(p.Pod), over: p.Usage.Processes}
		}
		return key{exceeds: usage > request, priority: priorityOf(p.Pod), over: usage - request}
	}
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := keyOf(pods[i]), keyOf(pods[j])
		if a.exceeds != b.exceeds {
			return a.exceeds
		}
		if a.priority != b.priority {
			return a.priority < b.priority
		}
		return a.over > b.over
	})
}

func requestOf(p *corev1.Pod, r corev1.ResourceName) int64 {
	q, ok := podstatus.PodRequests(p)[r]
	if !ok {
		return 0
	}
	return q.Value()
}

func priorityOf(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// IsCritical reports whether a pod is critical (priority at least
// SystemCriticalPriority): never evicted, admitted under any pressure.
func IsCritical(p *corev1.Pod) bool { return priorityOf(p) >= SystemCriticalPriority }

// Message is the kubelet's eviction message for pod, evicted to reclaim
// res for threshold t: the starved resource, the threshold and what was
// available, then each container using more than it requested.
func Message(res corev1.ResourceName, t Threshold, o host.Signal, pod Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, nodeLowMessageFmt, res)
	if o.Observed() {
		quantity := t.Value.Quantity.String()
		if t.Value.Percent != 0 {
			quantity = resource.NewQuantity(t.Value.Amount(o.Capacity), resource.BinarySI).String()
		}
		fmt.Fprintf(&b, thresholdMetMessageFmt, quantity, resource.NewQuantity(o.Available, resource.BinarySI).String())
	}
	if res != corev1.ResourceMemory && res != corev1.ResourceEphemeralStorage {
		return b.String()
	}
	for _, cu := range pod.Usage.Containers {
		for _, c := range pod.Pod.Spec.Containers {
			if c.Name != cu.Name {
				continue
			}
			req := c.Resources.Requests[res]
			used := cu.Memory
			if res == corev1.ResourceEphemeralStorage {
				used = cu.Disk
			}
			usage := resource.NewQuantity(used, resource.BinarySI)
			if usage.Cmp(req) > 0 {
				fmt.Fprintf(&b, containerMessageFmt, c.Name, usage.String(), req.String(), res)
			}
		}
	}
	return b.String()
}

// Admit is the kubelet's eviction admission: with no pressure condition
// every pod is admitted; critical pods always are; under MemoryPressure a
// pod that is not BestEffort, or that tolerates the memory-pressure taint,
// is admitted (also when DiskPressure or PIDPressure hold too); every other
// pod under any pressure condition is refused with reason Evicted and
// "The node had condition: [<conditions>]. ".
func Admit(pod *corev1.Pod, conditions []corev1.NodeConditionType) (ok bool, reason, message string) {
	if len(conditions) == 0 || IsCritical(pod) {
		return true, "", ""
	}
	if slices.Contains(conditions, corev1.NodeMemoryPressure) {
		if !isBestEffort(pod) || toleratesMemoryPressure(pod) {
			return true, "", ""
		}
	}
	names := make([]string, len(conditions))
	for i, c := range conditions {
		names[i] = string(c)
	}
	return false, Reason, fmt.Sprintf(nodeConditionMessageFmt, "["+strings.Join(names, " ")+"]")
}

func toleratesMemoryPressure(pod *corev1.Pod) bool {
	taint := corev1.Taint{Key: corev1.TaintNodeMemoryPressure, Effect: corev1.TaintEffectNoSchedule}
	_, untolerated := podstatus.UntoleratedTaint([]corev1.Taint{taint}, pod.Spec.Tolerations, corev1.TaintEffectNoSchedule)
	return !untolerated
}

// isBestEffort reports whether no container (init ones included) requests
// or limits cpu or memory.
func isBestEffort(pod *corev1.Pod) bool {
	cs := append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...)
	for _, c := range cs {
		for _, l := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if q, ok := l[r]; ok && !q.IsZero() {
					return false
				}
			}
		}
	}
	return true
}
