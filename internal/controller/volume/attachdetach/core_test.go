package attachdetach

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodeplane/nodeplane/internal/volume/shareddir"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const uniqueV1 = corev1.UniqueVolumeName("kubernetes.io/csi/nodeplane.io/shared-dir^h1")

type nodeOpt func(*corev1.Node)

func notReady(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown }
func mounted(n *corev1.Node)  { n.Status.VolumesInUse = []corev1.UniqueVolumeName{uniqueV1} }
func outOfService(effect corev1.TaintEffect) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: effect})
	}
}
func listing(n *corev1.Node)   { n.Status.VolumesAttached = []corev1.AttachedVolume{{Name: uniqueV1}} }
func unmanaged(n *corev1.Node) { delete(n.Annotations, AnnotationManaged) }

func node(name string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{AnnotationManaged: "true"}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func pv(name, handle string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolume {
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes:            modes,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: shareddir.Driver, VolumeHandle: handle}},
		},
	}
}

func claim(ns, name, volume string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: volume},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
}

type podOpt func(*corev1.Pod)

func terminating(running bool) podOpt {
	return func(p *corev1.Pod) {
		p.DeletionTimestamp = &metav1.Time{Time: t0}
		if running {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		} else {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}}
		}
	}
}
func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

func pod(ns, name, nodeName, claimName string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name)},
		Spec: corev1.PodSpec{NodeName: nodeName, Volumes: []corev1.Volume{{Name: "data",
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func attachment(pvName, nodeName string, attached bool) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: shareddir.AttachmentName("h1", shareddir.Driver, nodeName)},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: shareddir.Driver, NodeName: nodeName,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(pvName)}},
		Status: storagev1.VolumeAttachmentStatus{Attached: attached},
	}
}

func deleting(va *storagev1.VolumeAttachment) *storagev1.VolumeAttachment {
	va.DeletionTimestamp = &metav1.Time{Time: t0}
	return va
}

// TestDetachDecision walks every row of ADC-2 and ADC-3: a volume attached
// to n1 that no pod there needs any more (unless the row says otherwise),
// decided once when the detach is requested and again `after` later.
func TestDetachDecision(t *testing.T) {
	const wait = 6 * time.Minute
	tests := []struct {
		name       string
		cfg        Config
		node       *corev1.Node
		pods       []*corev1.Pod
		va         *storagev1.VolumeAttachment
		after      time.Duration
		wantDetach bool
		wantVerify bool
		wantForce  string
		wantWait   bool
	}{
		{name: "a volume a running pod still uses stays attached",
			node: node("n1", mounted), pods: []*corev1.Pod{pod("ns", "p", "n1", "c1")}, va: attachment("v1", "n1", true)},
		{name: "a terminating pod whose containers still run (dead kubelet) keeps its volume desired",
			node: node("n1", mounted, notReady), pods: []*corev1.Pod{pod("ns", "p", "n1", "c1", terminating(true))}, va: attachment("v1", "n1", true), after: wait + time.Second},
		{name: "a terminating pod whose containers stopped no longer holds its volume",
			node: node("n1"), pods: []*corev1.Pod{pod("ns", "p", "n1", "c1", terminating(false))}, va: attachment("v1", "n1", true),
			wantDetach: true, wantVerify: true},
		{name: "a succeeded pod no longer holds its volume",
			node: node("n1"), pods: []*corev1.Pod{pod("ns", "p", "n1", "c1", phase(corev1.PodSucceeded))}, va: attachment("v1", "n1", true),
			wantDetach: true, wantVerify: true},
		{name: "a volume the node no longer reports in use is detached at once, verifying it is safe",
			node: node("n1"), va: attachment("v1", "n1", true), wantDetach: true, wantVerify: true},
		{name: "a volume still mounted on a healthy node waits",
			node: node("n1", mounted), va: attachment("v1", "n1", true), wantWait: true},
		{name: "a volume still mounted on a healthy node waits past the timeout: timeout alone is not enough",
			node: node("n1", mounted), va: attachment("v1", "n1", true), after: wait + time.Second, wantWait: true},
		{name: "a volume still mounted on an unhealthy node waits until the timeout",
			node: node("n1", mounted, notReady), va: attachment("v1", "n1", true), after: wait, wantWait: true},
		{name: "a volume still mounted on an unhealthy node is force-detached after the timeout",
			node: node("n1", mounted, notReady), va: attachment("v1", "n1", true), after: wait + time.Second,
			wantDetach: true, wantForce: ForceReasonTimeout},
		{name: "the timeout is the configured one",
			cfg: Config{MaxWaitForUnmount: 5 * time.Second}, node: node("n1", mounted, notReady), va: attachment("v1", "n1", true), after: 6 * time.Second,
			wantDetach: true, wantForce: ForceReasonTimeout},
		{name: "with force detach on timeout disabled an unhealthy node's mounted volume waits forever",
			cfg: Config{MaxWaitForUnmount: wait, DisableForceDetachOnTimeout: true}, node: node("n1", mounted, notReady), va: attachment("v1", "n1", true), after: time.Hour,
			wantWait: true},
		{name: "the out-of-service taint detaches a mounted volume at once without the check",
			node: node("n1", mounted, notReady, outOfService(corev1.TaintEffectNoExecute)), va: attachment("v1", "n1", true),
			wantDetach: true, wantForce: ForceReasonOutOfService},
		{name: "the out-of-service taint with effect NoSchedule works too",
			node: node("n1", mounted, notReady, outOfService(corev1.TaintEffectNoSchedule)), va: attachment("v1", "n1", true),
			wantDetach: true, wantForce: ForceReasonOutOfService},
		{name: "the out-of-service taint detaches even with force detach on timeout disabled",
			cfg: Config{MaxWaitForUnmount: wait, DisableForceDetachOnTimeout: true}, node: node("n1", mounted, notReady, outOfService(corev1.TaintEffectNoExecute)), va: attachment("v1", "n1", true),
			wantDetach: true, wantForce: ForceReasonOutOfService},
		{name: "the out-of-service taint does not detach a volume a pod still holds",
			node: node("n1", mounted, notReady, outOfService(corev1.TaintEffectNoExecute)), pods: []*corev1.Pod{pod("ns", "p", "n1", "c1", terminating(true))}, va: attachment("v1", "n1", true)},
		{name: "an attachment already being deleted is a pending operation and is skipped",
			node: node("n1"), va: deleting(attachment("v1", "n1", true))},
		{name: "an attachment on a node that attaches for itself is not the controller's to detach",
			node: node("n1", unmanaged), va: attachment("v1", "n1", true)},
		{name: "an attachment on a node that is gone counts as mounted and unhealthy: forced after the timeout",
			va: attachment("v1", "n1", true), after: wait + time.Second, wantDetach: true, wantForce: ForceReasonTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg.MaxWaitForUnmount == 0 {
				cfg = DefaultConfig()
			}
			c := New(cfg)
			w := World{Pods: tt.pods, Claims: []*corev1.PersistentVolumeClaim{claim("ns", "c1", "v1")},
				Volumes: []*corev1.PersistentVolume{pv("v1", "h1")}, Attachments: []*storagev1.VolumeAttachment{tt.va}}
			if tt.node != nil {
				w.Nodes = []*corev1.Node{tt.node}
			}
			plan := c.Reconcile(t0, w)
			if tt.after > 0 && len(plan.Detach) == 0 {
				plan = c.Reconcile(t0.Add(tt.after), w)
			}
			if got := len(plan.Detach) == 1; got != tt.wantDetach {
				t.Fatalf("detach = %+v, want detach %v", plan.Detach, tt.wantDetach)
			}
			if tt.wantDetach {
				d := plan.Detach[0]
				if d.Verify != tt.wantVerify || d.ForceReason != tt.wantForce || d.Attachment != tt.va.Name || d.Unique != uniqueV1 {
					t.Errorf("detach = %+v, want verify %v force %q", d, tt.wantVerify, tt.wantForce)
				}
			}
			if got := len(plan.Waiting) == 1; got != tt.wantWait {
				t.Errorf("waiting = %+v, want waiting %v", plan.Waiting, tt.wantWait)
			}
			if len(plan.Attach) != 0 {
				t.Errorf("unexpected attach %+v", plan.Attach)
			}
		})
	}
}

func TestDetachRequestResetsWhenTheVolumeIsDesiredAgain(t *testing.T) {
	c := New(DefaultConfig())
	n := node("n1", mounted, notReady)
	base := World{Nodes: []*corev1.Node{n}, Claims: []*corev1.PersistentVolumeClaim{claim("ns", "c1", "v1")},
		Volumes: []*corev1.PersistentVolume{pv("v1", "h1")}, Attachments: []*storagev1.VolumeAttachment{attachment("v1", "n1", true)}}
	if p := c.Reconcile(t0, base); len(p.Waiting) != 1 {
		t.Fatalf("first pass: %+v", p)
	}
	again := base
	again.Pods = []*corev1.Pod{pod("ns", "p", "n1", "c1")}
	if p := c.Reconcile(t0.Add(5*time.Minute), again); len(p.Waiting)+len(p.Detach) != 0 {
		t.Fatalf("desired again: %+v", p)
	}
	p := c.Reconcile(t0.Add(7*time.Minute), base)
	if len(p.Detach) != 0 || len(p.Waiting) != 1 || !p.Waiting[0].Since.Equal(t0.Add(7*time.Minute)) {
		t.Fatalf("the wait must restart from the new request: %+v", p)
	}
}

func TestIssuedDetachIsNotRepeatedUntilItFails(t *testing.T) {
	c := New(DefaultConfig())
	w := World{Nodes: []*corev1.Node{node("n1", mounted, notReady, outOfService(corev1.TaintEffectNoExecute))},
		Volumes: []*corev1.PersistentVolume{pv("v1", "h1")}, Attachments: []*storagev1.VolumeAttachment{attachment("v1", "n1", true)}}
	if p := c.Reconcile(t0, w); len(p.Detach) != 1 {
		t.Fatalf("first pass: %+v", p)
	}
	if p := c.Reconcile(t0.Add(time.Second), w); len(p.Detach) != 0 {
		t.Fatalf("detach repeated while in flight: %+v", p)
	}
	c.DetachFailed(w.Attachments[0].Name)
	if p := c.Reconcile(t0.Add(2*time.Second), w); len(p.Detach) != 1 {
		t.Fatalf("failed detach not retried: %+v", p)
	}
}

func TestAttachDecision(t *testing.T) {
	rwx := pv("v1", "h1", corev1.ReadWriteMany)
	tests := []struct {
		name       string
		nodes      []*corev1.Node
		pods       []*corev1.Pod
		claims     []*corev1.PersistentVolumeClaim
		volume     *corev1.PersistentVolume
		vas        []*storagev1.VolumeAttachment
		wantAttach []string // nodes
		wantEvents []string // message suffixes
		wantStatus map[string]int
	}{
		{name: "a pod on a managed node gets a VolumeAttachment named as the CSI attacher names it",
			nodes: []*corev1.Node{node("n1")}, pods: []*corev1.Pod{pod("ns", "p", "n1", "c1")}, wantAttach: []string{"n1"}},
		{name: "an unscheduled pod attaches nothing",
			nodes: []*corev1.Node{node("n1")}, pods: []*corev1.Pod{pod("ns", "p", "", "c1")}},
		{name: "a node that does not hand attachment to the controller is left alone",
			nodes: []*corev1.Node{node("n1", unmanaged)}, pods: []*corev1.Pod{pod("ns", "p", "n1", "c1")}},
		{name: "a claim that is not bound attaches nothing",
			nodes: []*corev1.Node{node("n1")}, pods: []*corev1.Pod{pod("ns", "p", "n1", "c1")},
			claims: []*corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}}},
		{name: "a single-attach volume attached elsewhere is not attached and the pod hears why, naming the pods of its namespace",
			nodes: []*corev1.Node{node("n1"), node("n2")}, pods: []*corev1.Pod{pod("ns", "old", "n1", "c1"), pod("ns", "new", "n2", "c1")},
			vas: []*storagev1.VolumeAttachment{attachment("v1", "n1", true)}, wantEvents: []string{`Multi-Attach error for volume "v1" Volume is already used by pod(s) old`},
			wantStatus: map[string]int{"n1": 1}},
		{name: "pods of other namespaces are counted, not named",
			nodes: []*corev1.Node{node("n1"), node("n2")}, pods: []*corev1.Pod{pod("other", "old", "n1", "c1"), pod("ns", "new", "n2", "c1")},
			claims: []*corev1.PersistentVolumeClaim{claim("ns", "c1", "v1"), claim("other", "c1", "v1")},
			vas:    []*storagev1.VolumeAttachment{attachment("v1", "n1", true)}, wantEvents: []string{`Volume is already used by 1 pod(s) in different namespaces`},
			wantStatus: map[string]int{"n1": 1}},
		{name: "with no pod left on the other node the volume is exclusively attached",
			nodes: []*corev1.Node{node("n1", listing, mounted), node("n2")}, pods: []*corev1.Pod{pod("ns", "new", "n2", "c1")},
			vas: []*storagev1.VolumeAttachment{attachment("v1", "n1", true)}, wantEvents: []string{`Volume is already exclusively attached to one node and can't be attached to another`}},
		{name: "two pods on two nodes wanting one unattached single-attach volume: only the first node gets it",
			nodes: []*corev1.Node{node("n1"), node("n2")}, pods: []*corev1.Pod{pod("ns", "a", "n1", "c1"), pod("ns", "b", "n2", "c1")},
			wantAttach: []string{"n1"}, wantEvents: []string{`Volume is already used by pod(s) a`}},
		{name: "a ReadWriteMany volume attaches to every node",
			nodes: []*corev1.Node{node("n1"), node("n2")}, pods: []*corev1.Pod{pod("ns", "old", "n1", "c1"), pod("ns", "new", "n2", "c1")}, volume: rwx,
			vas: []*storagev1.VolumeAttachment{attachment("v1", "n1", true)}, wantAttach: []string{"n2"}, wantStatus: map[string]int{"n1": 1}},
		{name: "an attachment not yet attached is not listed in volumesAttached",
			nodes: []*corev1.Node{node("n1")}, pods: []*corev1.Pod{pod("ns", "p", "n1", "c1")}, vas: []*storagev1.VolumeAttachment{attachment("v1", "n1", false)}},
		{name: "a listed volume whose attachment is being deleted is taken off volumesAttached",
			nodes: []*corev1.Node{node("n1", listing)}, vas: []*storagev1.VolumeAttachment{deleting(attachment("v1", "n1", true))}, wantStatus: map[string]int{"n1": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.claims == nil {
				tt.claims = []*corev1.PersistentVolumeClaim{claim("ns", "c1", "v1")}
			}
			if tt.volume == nil {
				tt.volume = pv("v1", "h1")
			}
			c := New(DefaultConfig())
			w := World{Nodes: tt.nodes, Pods: tt.pods, Claims: tt.claims, Volumes: []*corev1.PersistentVolume{tt.volume}, Attachments: tt.vas}
			plan := c.Reconcile(t0, w)
			var got []string
			for _, a := range plan.Attach {
				got = append(got, a.Node)
				if a.Name != shareddir.AttachmentName("h1", shareddir.Driver, a.Node) || a.Attacher != shareddir.Driver || a.PV != "v1" {
					t.Errorf("attach = %+v", a)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.wantAttach, ",") {
				t.Errorf("attached to %v, want %v", got, tt.wantAttach)
			}
			if len(plan.Events) != len(tt.wantEvents) {
				t.Fatalf("events = %+v, want %v", plan.Events, tt.wantEvents)
			}
			for i, e := range plan.Events {
				if e.Reason != ReasonFailedAttach || !strings.HasPrefix(e.Message, `Multi-Attach error for volume "v1" `) || !strings.HasSuffix(e.Message, tt.wantEvents[i]) {
					t.Errorf("event = %s %q, want …%q", e.Reason, e.Message, tt.wantEvents[i])
				}
			}
			status := map[string]int{}
			for _, ns := range plan.NodeStatus {
				status[ns.Node] = len(ns.Attached)
			}
			if len(status) != len(tt.wantStatus) {
				t.Errorf("node status writes = %v, want %v", status, tt.wantStatus)
			}
			for n, k := range tt.wantStatus {
				if status[n] != k {
					t.Errorf("node %s volumesAttached has %d, want %d", n, status[n], k)
				}
			}
			if len(plan.Events) > 0 {
				if again := c.Reconcile(t0.Add(time.Second), w); len(again.Events) != 0 {
					t.Errorf("Multi-Attach event repeated: %+v", again.Events)
				}
			}
		})
	}
}

func TestAttacherSteps(t *testing.T) {
	withFinalizer := func(va *storagev1.VolumeAttachment) *storagev1.VolumeAttachment {
		va.Finalizers = []string{shareddir.Finalizer}
		return va
	}
	other := attachment("v1", "n1", false)
	other.Spec.Attacher = "ebs.csi.aws.com"
	bad := pv("v1", "../etc")
	tests := []struct {
		name    string
		va      *storagev1.VolumeAttachment
		pv      *corev1.PersistentVolume
		want    AttacherStep
		wantMsg string
	}{
		{"another driver's attachment is not ours", other, pv("v1", "h1"), StepNone, ""},
		{"a new attachment first gets the finalizer", attachment("v1", "n1", false), pv("v1", "h1"), StepAddFinalizer, ""},
		{"then it is marked attached", withFinalizer(attachment("v1", "n1", false)), pv("v1", "h1"), StepMarkAttached, ""},
		{"an attached one is left alone", withFinalizer(attachment("v1", "n1", true)), pv("v1", "h1"), StepNone, ""},
		{"a handle that is not one path element is an attach error", withFinalizer(attachment("v1", "n1", false)), bad, StepMarkError, `must be one path element`},
		{"a missing volume is an attach error", withFinalizer(attachment("v1", "n1", false)), nil, StepMarkError, "not found"},
		{"a deleted attachment loses the finalizer (detached)", withFinalizer(deleting(attachment("v1", "n1", true))), pv("v1", "h1"), StepRemoveFinalizer, ""},
		{"a deleted attachment without the finalizer needs nothing", deleting(attachment("v1", "n1", true)), pv("v1", "h1"), StepNone, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, msg := DecideAttacher(tt.va, tt.pv)
			if got != tt.want || !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("step %v %q, want %v %q", got, msg, tt.want, tt.wantMsg)
			}
		})
	}
}

func TestANodeChangeStartsAPassOnlyWhenReconcileReadsIt(t *testing.T) {
	unmanaged := func(n *corev1.Node) { delete(n.Annotations, AnnotationManaged) }
	heartbeat := func(n *corev1.Node) { n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(t0.Add(time.Minute)) }
	for _, tc := range []struct {
		name     string
		old, cur []nodeOpt
		want     bool
	}{
		{"a heartbeat changes nothing Reconcile reads", nil, []nodeOpt{heartbeat}, false},
		{"a node without volumes going not ready does not matter", nil, []nodeOpt{notReady}, false},
		{"a node without volumes getting the out-of-service taint does not matter", nil, []nodeOpt{outOfService(corev1.TaintEffectNoExecute)}, false},
		{"a node with a volume in use going not ready matters", []nodeOpt{mounted}, []nodeOpt{mounted, notReady}, true},
		{"a node with an attached volume going not ready matters", []nodeOpt{listing}, []nodeOpt{listing, notReady}, true},
		{"a node with a volume in use getting the out-of-service taint matters", []nodeOpt{mounted}, []nodeOpt{mounted, outOfService(corev1.TaintEffectNoExecute)}, true},
		{"a volume in use appearing matters", nil, []nodeOpt{mounted}, true},
		{"a volume in use going away matters", []nodeOpt{mounted}, nil, true},
		{"the attached list changing matters", []nodeOpt{listing}, nil, true},
		{"the managed annotation changing matters", nil, []nodeOpt{unmanaged}, true},
		{"a node with a volume in use sending a heartbeat does not matter", []nodeOpt{mounted}, []nodeOpt{mounted, heartbeat}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nodeChangeMatters(node("n", tc.old...), node("n", tc.cur...)); got != tc.want {
				t.Errorf("nodeChangeMatters = %v, want %v", got, tc.want)
			}
		})
	}
}
