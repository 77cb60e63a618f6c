package nodeipam

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Step is what one sync of a node does.
type Step int

const (
	// Nothing: the node is gone.
	Nothing Step = iota
	// Release the node's podCIDRs: it is being deleted.
	Release
	// Occupy the node's podCIDRs: it has them already.
	Occupy
	// Allocate: reserve a block per family and patch the node.
	Allocate
)

// Decide is upstream's syncNode decision for the node as cached (nil: not
// found).
func Decide(n *corev1.Node) Step {
	switch {
	case n == nil:
		return Nothing
	case n.DeletionTimestamp != nil:
		return Release
	case len(n.Spec.PodCIDRs) > 0:
		return Occupy
	}
	return Allocate
}

// Outcome is what to do with reserved blocks once the node is read again.
type Outcome int

const (
	// Done: the node already has exactly the reserved CIDRs (an earlier
	// patch went through).
	Done Outcome = iota
	// GiveBack: the node got other CIDRs meanwhile; release the reserved.
	GiveBack
	// Patch the node's spec.podCIDR and spec.podCIDRs.
	Patch
)

// AfterReserve decides, from the node's current podCIDRs, what becomes of
// the blocks just reserved for it.
func AfterReserve(reserved, current []string) Outcome {
	switch {
	case slices.Equal(reserved, current):
		return Done
	case len(current) > 0:
		return GiveBack
	}
	return Patch
}
