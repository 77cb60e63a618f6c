package framework

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// ErrNoNodesAvailable is returned when the snapshot has no nodes at all; its
// text is the upstream FailedScheduling message for that case.
var ErrNoNodesAvailable = errors.New("no nodes available to schedule pods")

// Preemption reasons as upstream's DefaultPreemption prints them for each
// node when it finds nothing to preempt.
const (
	// ReasonPreemptionNotHelpful is given to nodes that rejected the pod as
	// UnschedulableAndUnresolvable: removing pods cannot help there.
	ReasonPreemptionNotHelpful = "Preemption is not helpful for scheduling"
	// ReasonNoPreemptionVictims is given to nodes that rejected the pod as
	// Unschedulable. nodeplane never preempts, which is what upstream
	// reports for such a node when it runs no pod of lower priority.
	ReasonNoPreemptionVictims = "No preemption victims found for incoming pod"
	// MessagePreemptNever is the whole preemption suffix for a pod with
	// preemptionPolicy: Never.
	MessagePreemptNever = "preemption: not eligible due to preemptionPolicy=Never."
)

// Diagnosis records why each node rejected the pod.
type Diagnosis struct {
	// NodeToStatus is the rejecting status of each node that was filtered.
	NodeToStatus map[string]*Status
	// AbsentNodesStatus applies to nodes not in NodeToStatus (those a
	// PreFilter result excluded, or all nodes when PreFilter rejected the pod).
	AbsentNodesStatus *Status
	// UnschedulablePlugins are the plugins that rejected the pod on some node;
	// the queue retries the pod only on events these plugins registered for.
	UnschedulablePlugins sets.Set[string]
	// PreFilterMsg is the message of a PreFilter rejection, printed instead of
	// the per-node histogram.
	PreFilterMsg string
	// PostFilterMsg is the preemption suffix ("preemption: ...").
	PostFilterMsg string
}

// FitError is returned when no node can take the pod. Its Error() is the
// upstream FailedScheduling event message and PodScheduled condition message.
type FitError struct {
	Pod         *corev1.Pod
	NumAllNodes int
	Diagnosis   Diagnosis
}

// Error renders the upstream message:
//
//	0/<N> nodes are available: <count> <reason>, <count> <reason>. preemption: 0/<N> nodes are available: <count> <reason>.
//
// The "<count> <reason>" entries are sorted as strings (so "10 x" sorts
// before "2 y", as upstream's sort.Strings does); a node rejected with
// several reasons counts once for each. A PreFilter rejection prints its
// message instead of the histogram.
func (f *FitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "0/%d nodes are available:", f.NumAllNodes)
	d := &f.Diagnosis
	if d.PreFilterMsg != "" {
		b.WriteString(" " + d.PreFilterMsg + ".")
	} else {
		counts := make(map[string]int)
		for _, st := range d.NodeToStatus {
			for _, r := range st.Reasons() {
				counts[r]++
			}
		}
		if absent := f.NumAllNodes - len(d.NodeToStatus); absent > 0 {
			for _, r := range d.AbsentNodesStatus.Reasons() {
				counts[r] += absent
			}
		}
		if h := histogram(counts); h != "" {
			b.WriteString(" " + h + ".")
		}
	}
	if d.PostFilterMsg != "" {
		b.WriteString(" " + d.PostFilterMsg)
	}
	return b.String()
}

func histogram(counts map[string]int) string {
	entries := make([]string, 0, len(counts))
	for reason, n := range counts {
		entries = append(entries, fmt.Sprintf("%d %s", n, reason))
	}
	sort.Strings(entries)
	return strings.Join(entries, ", ")
}

// preemptionMessage is the suffix upstream's DefaultPreemption adds when it
// finds no victims. nodeplane does not preempt, so every node that rejected
// the pod as merely Unschedulable reports "no victims" (upstream's exact
// output whenever no pod of lower priority runs there) and every
// UnschedulableAndUnresolvable node reports "not helpful".
func preemptionMessage(pod *corev1.Pod, numAllNodes int, d *Diagnosis) string {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever {
		return MessagePreemptNever
	}
	classify := func(st *Status) string {
		if st.Code() == UnschedulableAndUnresolvable {
			return ReasonPreemptionNotHelpful
		}
		return ReasonNoPreemptionVictims
	}
	counts := make(map[string]int, 2)
	for _, st := range d.NodeToStatus {
		counts[classify(st)]++
	}
	if absent := numAllNodes - len(d.NodeToStatus); absent > 0 {
		counts[classify(d.AbsentNodesStatus)] += absent
	}
	return fmt.Sprintf("preemption: 0/%d nodes are available: %s.", numAllNodes, histogram(counts))
}
