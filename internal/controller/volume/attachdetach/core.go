package attachdetach

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeplane/nodeplane/internal/volume/shareddir"
)

// Names the controller uses (SPEC §5, §10.4, §10.5).
const (
	// ControllerName is the --controllers name.
	ControllerName = "persistentvolume-attach-detach-controller"
	// AnnotationManaged on a Node hands its attachments to this controller.
	AnnotationManaged = "volumes.kubernetes.io/controller-managed-attach-detach"
	// ReasonFailedAttach is the Warning event of a Multi-Attach error.
	ReasonFailedAttach = "FailedAttachVolume"
	// MetricForcedDetaches counts forced detaches by reason.
	MetricForcedDetaches = "attach_detach_controller_attachdetach_controller_forced_detaches"
	// Reasons of the forced-detach metric.
	ForceReasonTimeout      = "timeout"
	ForceReasonOutOfService = "out-of-service"
)

// Config holds the decision's settings (ADC-1).
type Config struct {
	// MaxWaitForUnmount is maxWaitForUnmountDuration: how long after a
	// detach request a volume still mounted on an unhealthy node is
	// detached anyway. Upstream: 6 min.
	MaxWaitForUnmount time.Duration
	// DisableForceDetachOnTimeout is --disable-force-detach-on-timeout.
	DisableForceDetachOnTimeout bool
}

// DefaultConfig returns upstream's settings.
func DefaultConfig() Config { return Config{MaxWaitForUnmount: 6 * time.Minute} }

// World is one snapshot of the caches. Core never modifies it.
type World struct {
	Nodes       []*corev1.Node
	Pods        []*corev1.Pod
	Claims      []*corev1.PersistentVolumeClaim
	Volumes     []*corev1.PersistentVolume
	Attachments []*storagev1.VolumeAttachment
}

// Attach is a VolumeAttachment to create.
type Attach struct {
	Name, Attacher, Node, PV string
}

// Detach is one detach: the shell deletes the attachment, after the
// node's volumesAttached no longer lists the volume (NodeStatus of the same
// plan). With Verify it first re-reads the node and skips the detach while
// the node still reports the volume in use (the safe-to-detach check).
// ForceReason is "" for a normal detach, else the metric's reason.
type Detach struct {
	Attachment  string
	Node, PV    string
	Unique      corev1.UniqueVolumeName
	Verify      bool
	ForceReason string
}

// NodeStatus is the volumesAttached a node must carry.
type NodeStatus struct {
	Node     string
	Attached []corev1.AttachedVolume
}

// Event is a Warning event about a pod.
type Event struct {
	Pod             *corev1.Pod
	Reason, Message string
}

// Wait is a detach that is held back (reported for tests and logs).
type Wait struct {
	Node, PV string
	Since    time.Time
}

// Plan is one reconcile's work, in the order the shell carries it out:
// NodeStatus, then Detach (only where that node's status write succeeded),
// then Attach, then Events.
type Plan struct {
	NodeStatus []NodeStatus
	Detach     []Detach
	Attach     []Attach
	Events     []Event
	Waiting    []Wait
}

type key struct{ PV, Node string }

// volume is a CSI PV as the controller sees it.
type volume struct {
	pv          *corev1.PersistentVolume
	unique      corev1.UniqueVolumeName
	multiAttach bool
}

// Core is the decision with its memory. Not safe for concurrent use.
type Core struct {
	cfg Config
	// requested is when each (PV, node) detach was first requested.
	requested map[key]time.Time
	// detaching holds the attachments a Detach was issued for, until they
	// leave the cache (or the shell reports the detach failed).
	detaching map[string]bool
	// reported remembers the Multi-Attach events sent, by pod UID and PV.
	reported map[string]bool
}

// New returns a Core with empty memory.
func New(cfg Config) *Core {
	return &Core{cfg: cfg, requested: map[key]time.Time{}, detaching: map[string]bool{}, reported: map[string]bool{}}
}

// DetachFailed forgets an issued detach so the next reconcile decides it again.
func (c *Core) DetachFailed(attachment string) { delete(c.detaching, attachment) }

// Reconcile decides one pass at now.
func (c *Core) Reconcile(now time.Time, w World) Plan {
	var plan Plan
	nodes := map[string]*corev1.Node{}
	for _, n := range w.Nodes {
		nodes[n.Name] = n
	}
	claims := map[types.NamespacedName]*corev1.PersistentVolumeClaim{}
	for _, pvc := range w.Claims {
		claims[types.NamespacedName{Namespace: pvc.Namespace, Name: pvc.Name}] = pvc
	}
	volumes := map[string]volume{}
	for _, pv := range w.Volumes {
		if pv.Spec.CSI == nil {
			continue
		}
		volumes[pv.Name] = volume{pv: pv, unique: shareddir.UniqueVolumeName(pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle), multiAttach: multiAttachAllowed(pv)}
	}

	// Desired state: pods on managed nodes that are not terminated.
	desired := map[key][]*corev1.Pod{}
	for _, pod := range w.Pods {
		n := nodes[pod.Spec.NodeName]
		if n == nil || !managed(n) || podTerminated(pod) {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			pvc := claims[types.NamespacedName{Namespace: pod.Namespace, Name: v.PersistentVolumeClaim.ClaimName}]
			if pvc == nil || pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
				continue
			}
			if _, ok := volumes[pvc.Spec.VolumeName]; !ok {
				continue
			}
			k := key{pvc.Spec.VolumeName, n.Name}
			desired[k] = append(desired[k], pod)
		}
	}

	// Actual state: the attachments of persistent volumes.
	actual := map[key]*storagev1.VolumeAttachment{}
	attachedTo := map[string][]string{} // PV -> nodes with an attachment
	present := map[string]bool{}
	for _, va := range w.Attachments {
		present[va.Name] = true
		if va.Spec.Source.PersistentVolumeName == nil {
			continue
		}
		if n := nodes[va.Spec.NodeName]; n != nil && !managed(n) {
			continue // the node attaches for itself (kubelet-managed)
		}
		k := key{*va.Spec.Source.PersistentVolumeName, va.Spec.NodeName}
		actual[k] = va
		attachedTo[k.PV] = append(attachedTo[k.PV], k.Node)
	}
	for name := range c.detaching {
		if !present[name] {
			delete(c.detaching, name)
		}
	}
	for k := range c.requested {
		if _, ok := desired[k]; ok {
			delete(c.requested, k) // desired again: the request is void
		} else if _, ok := actual[k]; !ok {
			delete(c.requested, k)
		}
	}

	// Detach (ADC-2).
	for _, k := range sortedKeys(actual) {
		va := actual[k]
		if _, ok := desired[k]; ok || va.DeletionTimestamp != nil || c.detaching[va.Name] {
			continue
		}
		since, ok := c.requested[k]
		if !ok {
			since = now
			c.requested[k] = now
		}
		n := nodes[k.Node]
		vol, known := volumes[k.PV]
		timeout := now.Sub(since) > c.cfg.MaxWaitForUnmount && !c.cfg.DisableForceDetachOnTimeout
		healthy := n != nil && ready(n)
		oos := n != nil && hasTaintKey(n, corev1.TaintNodeOutOfService)
		// A node we cannot see, or a volume we cannot name, counts as mounted.
		mounted := n == nil || !known || inUse(n, vol.unique)
		if mounted && !(!healthy && timeout) && !oos {
			plan.Waiting = append(plan.Waiting, Wait{Node: k.Node, PV: k.PV, Since: since})
			continue
		}
		d := Detach{Attachment: va.Name, Node: k.Node, PV: k.PV, Unique: vol.unique, Verify: !(timeout || oos)}
		switch {
		case oos:
			d.ForceReason = ForceReasonOutOfService
		case timeout:
			d.ForceReason = ForceReasonTimeout
		}
		c.detaching[va.Name] = true
		plan.Detach = append(plan.Detach, d)
	}

	// node.status.volumesAttached: attached attachments not being detached.
	want := map[string][]corev1.AttachedVolume{}
	for k, va := range actual {
		vol, ok := volumes[k.PV]
		if !ok || !va.Status.Attached || va.DeletionTimestamp != nil || c.detaching[va.Name] {
			continue
		}
		want[k.Node] = append(want[k.Node], corev1.AttachedVolume{Name: vol.unique})
	}
	for _, n := range w.Nodes {
		if !managed(n) {
			continue
		}
		list := want[n.Name]
		sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
		if !sameAttached(n.Status.VolumesAttached, list) {
			plan.NodeStatus = append(plan.NodeStatus, NodeStatus{Node: n.Name, Attached: list})
		}
	}

	// Attach (ADC-4, ADC-5).
	stillReported := map[string]bool{}
	for _, k := range sortedKeys(desired) {
		if _, ok := actual[k]; ok {
			continue
		}
		vol := volumes[k.PV]
		if !vol.multiAttach {
			if others := attachedTo[k.PV]; len(others) > 0 {
				for _, pod := range desired[k] {
					id := string(pod.UID) + "/" + k.PV
					stillReported[id] = true
					if c.reported[id] {
						continue
					}
					c.reported[id] = true
					plan.Events = append(plan.Events, Event{Pod: pod, Reason: ReasonFailedAttach, Message: multiAttachMessage(k, pod, desired)})
				}
				continue
			}
		}
		csi := vol.pv.Spec.CSI
		plan.Attach = append(plan.Attach, Attach{
			Name: shareddir.AttachmentName(csi.VolumeHandle, csi.Driver, k.Node), Attacher: csi.Driver, Node: k.Node, PV: k.PV,
		})
		attachedTo[k.PV] = append(attachedTo[k.PV], k.Node)
	}
	for id := range c.reported {
		if !stillReported[id] {
			delete(c.reported, id)
		}
	}
	return plan
}

// multiAttachMessage is upstream's text: the pods (same namespace) or
// counts (other namespaces) using the volume on other nodes.
func multiAttachMessage(k key, pod *corev1.Pod, desired map[key][]*corev1.Pod) string {
	var local []string
	others := 0
	for dk, pods := range desired {
		if dk.PV != k.PV || dk.Node == k.Node {
			continue
		}
		for _, p := range pods {
			if p.Namespace == pod.Namespace {
				local = append(local, p.Name)
			} else {
				others++
			}
		}
	}
	sort.Strings(local)
	prefix := fmt.Sprintf("Multi-Attach error for volume %q ", k.PV)
	switch {
	case len(local) > 0 && others > 0:
		return prefix + fmt.Sprintf("Volume is already used by pod(s) %s and %d pod(s) in different namespaces", strings.Join(local, ", "), others)
	case len(local) > 0:
		return prefix + "Volume is already used by pod(s) " + strings.Join(local, ", ")
	case others > 0:
		return prefix + fmt.Sprintf("Volume is already used by %d pod(s) in different namespaces", others)
	}
	return prefix + "Volume is already exclusively attached to one node and can't be attached to another"
}

func sortedKeys[V any](m map[key]V) []key {
	out := make([]key, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].PV != out[j].PV {
			return out[i].PV < out[j].PV
		}
		return out[i].Node < out[j].Node
	})
	return out
}

// multiAttachAllowed: a volume may be attached to several nodes when one
// of its access modes is ReadOnlyMany or ReadWriteMany.
func multiAttachAllowed(pv *corev1.PersistentVolume) bool {
	for _, m := range pv.Spec.AccessModes {
		if m == corev1.ReadOnlyMany || m == corev1.ReadWriteMany {
			return true
		}
	}
	return false
}

// nodeChangeMatters reports whether Reconcile could decide differently
// after a node changed from old to cur: its managed annotation, its volumes
// in use or attached, and — for a node with any volume in use or attached
// — its Ready status and out-of-service taint (they matter only for a
// volume still mounted there: a detach from a node with none in use goes
// ahead whatever its health). A node without volumes going NotReady does
// not start a pass: when a zone of 100,000 nodes goes dark, every node
// changes Ready, and each change made the controller walk every node
// again, every 100 ms (docs/performance.md, "A cheaper monitor pass").
func nodeChangeMatters(old, cur *corev1.Node) bool {
	if managed(old) != managed(cur) ||
		!slices.Equal(old.Status.VolumesInUse, cur.Status.VolumesInUse) ||
		!slices.Equal(old.Status.VolumesAttached, cur.Status.VolumesAttached) {
		return true
	}
	if len(cur.Status.VolumesInUse) == 0 && len(cur.Status.VolumesAttached) == 0 {
		return false
	}
	return ready(old) != ready(cur) ||
		hasTaintKey(old, corev1.TaintNodeOutOfService) != hasTaintKey(cur, corev1.TaintNodeOutOfService)
}

func managed(n *corev1.Node) bool { return n.Annotations[AnnotationManaged] == "true" }

// podTerminated is upstream's test: phase Succeeded or Failed, or deleted
// with no container running. A pod on a dead node keeps its last statuses
// (running), so it stays desired until it is force-deleted.
func podTerminated(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return true
	}
	return pod.DeletionTimestamp != nil && notRunning(pod.Status.InitContainerStatuses) &&
		notRunning(pod.Status.ContainerStatuses) && notRunning(pod.Status.EphemeralContainerStatuses)
}

func notRunning(statuses []corev1.ContainerStatus) bool {
	for _, s := range statuses {
		if s.State.Terminated == nil && s.State.Waiting == nil {
			return false
		}
	}
	return true
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasTaintKey(n *corev1.Node, k string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == k {
			return true
		}
	}
	return false
}

func inUse(n *corev1.Node, unique corev1.UniqueVolumeName) bool {
	for _, v := range n.Status.VolumesInUse {
		if v == unique {
			return true
		}
	}
	return false
}

func sameAttached(have, want []corev1.AttachedVolume) bool {
	if len(have) != len(want) {
		return false
	}
	set := map[corev1.UniqueVolumeName]bool{}
	for _, v := range have {
		set[v.Name] = true
	}
	for _, v := range want {
		if !set[v.Name] {
			return false
		}
	}
	return true
}
