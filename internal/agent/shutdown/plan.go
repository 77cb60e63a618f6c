// Package shutdown is the agent's graceful node shutdown (SPEC §4 GNS-1..8,
// P3-4): when the machine is going away, the Node is marked NotReady first,
// new pods are refused, and the running pods are stopped group by group,
// lowest priority first, each within its group's budget, with their final
// statuses posted before the agent lets go.
//
// plan.go is the pure core: the effective priority table (GNS-1), the pod →
// group choice (GNS-2), the per-pod grace and the order of the kills
// (GNS-5), as a Sequence stepped with `now` that returns what to do. The
// shell (manager.go) does the I/O. The package never lists pods or talks to
// the API itself: the agent hands it the pods and the ways to stop them.
package shutdown

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Priorities of the derived two-group table (GNS-1).
const (
	// CriticalPriority is system-cluster-critical: pods at or above it
	// share the critical budget.
	CriticalPriority int32 = 2000000000
)

// Group is one row of the priority table: pods whose priority is at least
// Priority (and below the next row's) get GracePeriod, counted from the
// moment the group's kills start.
type Group struct {
	Priority    int32
	GracePeriod time.Duration
}

// Table is the effective priority table, sorted by priority ascending. An
// empty table means graceful shutdown is off (GNS-1):
//   - byPriority non-empty: that table, sorted;
//   - otherwise total == 0, or critical > total: off;
//   - otherwise {0: total−critical} and {CriticalPriority: critical}.
func Table(total, critical time.Duration, byPriority []Group) []Group {
	if len(byPriority) > 0 {
		out := append([]Group(nil), byPriority...)
		sort.SliceStable(out, func(i, j int) bool { return out[i].Priority < out[j].Priority })
		return out
	}
	if total <= 0 || total-critical < 0 {
		return nil
	}
	return []Group{{Priority: 0, GracePeriod: total - critical}, {Priority: CriticalPriority, GracePeriod: critical}}
}

// Total is the sum of the table's budgets: the longest a shutdown takes.
func Total(table []Group) time.Duration {
	var d time.Duration
	for _, g := range table {
		d += g.GracePeriod
	}
	return d
}

// GroupOf returns the index in table (sorted ascending, non-empty) of the
// group for a pod of the given priority (nil counts as 0): the group with
// the largest priority ≤ the pod's; pods below the lowest group go to the
// lowest (GNS-2).
func GroupOf(table []Group, priority *int32) int {
	p := int32(0)
	if priority != nil {
		p = *priority
	}
	idx := 0
	for i, g := range table {
		if g.Priority <= p {
			idx = i
		}
	}
	return idx
}

// Kill is one pod to stop and the grace it gets.
type Kill struct {
	UID       types.UID
	Namespace string
	Name      string
	Grace     time.Duration
}

// Batch is one non-empty group of pods, killed together.
type Batch struct {
	Priority    int32
	GracePeriod time.Duration
	Kills       []Kill
}

// Plan groups pods by the table (GNS-2) and gives each pod
// min(group grace, spec.terminationGracePeriodSeconds) (GNS-5). Empty
// groups are left out; batches are in ascending priority. Pods within a
// batch keep their input order.
func Plan(table []Group, pods []*corev1.Pod) []Batch {
	if len(table) == 0 {
		return nil
	}
	byGroup := make([][]Kill, len(table))
	for _, p := range pods {
		i := GroupOf(table, p.Spec.Priority)
		grace := table[i].GracePeriod
		if s := p.Spec.TerminationGracePeriodSeconds; s != nil && time.Duration(*s)*time.Second < grace {
			grace = time.Duration(*s) * time.Second
		}
		if grace < 0 {
			grace = 0
		}
		byGroup[i] = append(byGroup[i], Kill{UID: p.UID, Namespace: p.Namespace, Name: p.Name, Grace: grace})
	}
	var out []Batch
	for i, kills := range byGroup {
		if len(kills) > 0 {
			out = append(out, Batch{Priority: table[i].Priority, GracePeriod: table[i].GracePeriod, Kills: kills})
		}
	}
	return out
}

// Sequence walks a plan: one batch at a time, the next when every pod of
// the current one has stopped or its budget is spent. It is not safe for
// concurrent use; the shell steps it from one goroutine.
type Sequence struct {
	batches   []Batch
	current   int // index of the batch being killed; -1 before the start
	deadline  time.Time
	cancelled bool
}

// NewSequence returns a sequence over batches (from Plan).
func NewSequence(batches []Batch) *Sequence {
	return &Sequence{batches: batches, current: -1}
}

// Step is what to do now.
type Step struct {
	// Kill are the pods to signal now (the start of a batch).
	Kill []Kill
	// Wake is when to step again at the latest (the batch's deadline);
	// step sooner when a pod stops.
	Wake time.Time
	// Done: nothing is left to do; Cancelled tells whether the sequence
	// ended by Cancel rather than by running out of batches.
	Done, Cancelled bool
}

// Cancel ends the sequence: no further batch is started. Pods already
// signalled are not brought back (GNS-7).
func (s *Sequence) Cancel() { s.cancelled = true }

// Step advances the sequence at now. stopped reports whether a pod of the
// current batch has stopped (and its final status is posted).
func (s *Sequence) Step(now time.Time, stopped func(types.UID) bool) Step {
	if s.cancelled {
		return Step{Done: true, Cancelled: true}
	}
	if s.current >= 0 && s.current < len(s.batches) && now.Before(s.deadline) && !allStopped(s.batches[s.current], stopped) {
		return Step{Wake: s.deadline}
	}
	s.current++
	if s.current >= len(s.batches) {
		return Step{Done: true}
	}
	b := s.batches[s.current]
	s.deadline = now.Add(b.GracePeriod)
	return Step{Kill: append([]Kill(nil), b.Kills...), Wake: s.deadline}
}

// Current returns the batch being killed, if any.
func (s *Sequence) Current() (Batch, bool) {
	if s.current < 0 || s.current >= len(s.batches) {
		return Batch{}, false
	}
	return s.batches[s.current], true
}

func allStopped(b Batch, stopped func(types.UID) bool) bool {
	for _, k := range b.Kills {
		if !stopped(k.UID) {
			return false
		}
	}
	return true
}
