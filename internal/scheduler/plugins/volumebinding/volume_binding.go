// Package volumebinding is a small part of upstream's VolumeBinding plugin:
// a pod's persistentVolumeClaim volumes must name existing claims that are
// not being deleted, and a pod whose claim is bound to a PersistentVolume
// with spec.nodeAffinity fits only the nodes that affinity selects.
// Unbound claims do not restrict the pod (nodeplane's binder binds
// WaitForFirstConsumer claims once the pod is bound, docs/volumes.md), and
// the plugin neither binds nor provisions.
package volumebinding

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
)

// Name is the upstream plugin name.
const Name = "VolumeBinding"

// ErrReasonNodeConflict is the Filter reason, as upstream prints it.
const ErrReasonNodeConflict = "node(s) had volume node affinity conflict"

// Event resources this plugin's pods wait on.
const (
	PersistentVolumeClaim framework.EventResource = "PersistentVolumeClaim"
	PersistentVolume      framework.EventResource = "PersistentVolume"
)

// Volumes reads claims and volumes (the scheduler's informer caches).
// Both return a NotFound API error for a missing object.
type Volumes interface {
	Claim(namespace, name string) (*corev1.PersistentVolumeClaim, error)
	Volume(name string) (*corev1.PersistentVolume, error)
}

const stateKey framework.StateKey = Name + "/affinities"

// Plugin is the VolumeBinding plugin.
type Plugin struct{ volumes Volumes }

// New returns the plugin.
func New(v Volumes) *Plugin { return &Plugin{volumes: v} }

var (
	_ framework.PreFilterPlugin   = (*Plugin)(nil)
	_ framework.FilterPlugin      = (*Plugin)(nil)
	_ framework.EnqueueExtensions = (*Plugin)(nil)
)

// Name implements framework.Plugin.
func (*Plugin) Name() string { return Name }

// EventsToRegister implements framework.EnqueueExtensions: a claim or
// volume appearing or changing, or a node added or relabelled.
func (*Plugin) EventsToRegister() []framework.ClusterEvent {
	return []framework.ClusterEvent{
		{Resource: PersistentVolumeClaim, ActionType: framework.Add | framework.Update},
		{Resource: PersistentVolume, ActionType: framework.Add | framework.Update},
		{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeLabel},
	}
}

// affinity is one bound volume's required node selector.
type affinity struct {
	volume   string
	selector *nodeaffinity.NodeSelector
}

// PreFilter implements framework.PreFilterPlugin: Skip for a pod without
// claims; a missing claim or one being deleted rejects the pod outright.
func (p *Plugin) PreFilter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	var affinities []affinity
	claims := 0
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		claims++
		name := v.PersistentVolumeClaim.ClaimName
		claim, err := p.volumes.Claim(pod.Namespace, name)
		if apierrors.IsNotFound(err) {
			return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("persistentvolumeclaim %q not found", name)).WithPlugin(Name)
		}
		if err != nil {
			return nil, framework.AsStatus(err).WithPlugin(Name)
		}
		if claim.DeletionTimestamp != nil {
			return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("persistentvolumeclaim %q is being deleted", name)).WithPlugin(Name)
		}
		if claim.Spec.VolumeName == "" {
			continue
		}
		pv, err := p.volumes.Volume(claim.Spec.VolumeName)
		if apierrors.IsNotFound(err) {
			return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, "pvc(s) bound to non-existent pv(s)").WithPlugin(Name)
		}
		if err != nil {
			return nil, framework.AsStatus(err).WithPlugin(Name)
		}
		if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
			continue
		}
		sel, err := nodeaffinity.NewNodeSelector(pv.Spec.NodeAffinity.Required)
		if err != nil {
			return nil, framework.AsStatus(fmt.Errorf("volume %s node affinity: %w", pv.Name, err)).WithPlugin(Name)
		}
		affinities = append(affinities, affinity{volume: pv.Name, selector: sel})
	}
	if claims == 0 || len(affinities) == 0 {
		return nil, framework.NewStatus(framework.Skip)
	}
	state.Write(stateKey, affinities)
	return nil, nil
}

// Filter implements framework.FilterPlugin: every bound volume's node
// affinity must select the node.
func (p *Plugin) Filter(_ context.Context, state *framework.CycleState, _ *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	affinities, err := framework.ReadState[[]affinity](state, stateKey)
	if err != nil {
		return framework.AsStatus(err).WithPlugin(Name)
	}
	for _, a := range affinities {
		if !a.selector.Match(ni.Node()) {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeConflict).WithPlugin(Name)
		}
	}
	return nil
}
