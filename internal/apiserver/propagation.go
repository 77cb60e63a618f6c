package apiserver

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gcFinalizers returns the finalizers an object carrying current should
// carry once deleted with opts, and whether they differ from current. This
// is how a delete asks the garbage collector for a propagation policy:
//
//   - Foreground: the foregroundDeletion finalizer; the object stays, marked
//     deleted, until the collector has deleted its dependents that block
//     their owner's deletion and removed the finalizer.
//   - Orphan, or orphanDependents=true: the orphan finalizer; the object
//     stays until the collector has removed the owner reference from its
//     dependents and removed the finalizer.
//   - Background, or orphanDependents=false: neither; the object goes at
//     once (if nothing else holds it) and the collector deletes the
//     dependents it leaves behind.
//
// A delete that names no policy keeps whichever of the two finalizers the
// object already has (a client may set one ahead of time); with neither it
// is a Background delete, the default of every resource nodeplane serves.
// At most one of the two is ever added; the other is removed.
func gcFinalizers(current []string, opts *metav1.DeleteOptions) ([]string, bool) {
	orphan := slices.Contains(current, metav1.FinalizerOrphanDependents)
	foreground := slices.Contains(current, metav1.FinalizerDeleteDependents)
	switch {
	case opts.OrphanDependents != nil:
		orphan, foreground = *opts.OrphanDependents, false
	case opts.PropagationPolicy != nil:
		orphan = *opts.PropagationPolicy == metav1.DeletePropagationOrphan
		foreground = *opts.PropagationPolicy == metav1.DeletePropagationForeground
	case orphan && foreground:
		// Validation refuses the two together; should both appear,
		// orphaning is the safer reading.
		foreground = false
	}
	out := make([]string, 0, len(current)+1)
	for _, f := range current {
		if f != metav1.FinalizerOrphanDependents && f != metav1.FinalizerDeleteDependents {
			out = append(out, f)
		}
	}
	if orphan {
		out = append(out, metav1.FinalizerOrphanDependents)
	}
	if foreground {
		out = append(out, metav1.FinalizerDeleteDependents)
	}
	if sameSet(out, current) {
		return current, false
	}
	return out, true
}

// sameSet reports whether a and b hold the same strings, ignoring order
// and repeats.
func sameSet(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	for _, s := range b {
		if !slices.Contains(a, s) {
			return false
		}
	}
	return true
}
