package pods

import (
	"context"
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeplane/nodeplane/internal/agent/podstatus"
	"github.com/nodeplane/nodeplane/internal/agent/runtime"
	"github.com/nodeplane/nodeplane/internal/agent/runtime/fake"
)

// t0 has a fraction of a second, as a real clock does; the API keeps whole
// seconds only.
var t0 = time.Date(2025, 3, 1, 9, 30, 0, 500_000_000, time.UTC)

const nodeName = "node-a"

var hostIPs = []string{"10.0.0.5", "fd00::5"}

// ops is the order in which the runtime and the API saw things happen, one
// line per call: "start web", "kill web 7s", "remove web", "status web
// Running", "status big Failed OutOfcpu", "status web: conflict", "delete web".
type ops struct {
	mu    sync.Mutex
	lines []string
}

func (o *ops) add(format string, args ...any) {
	o.mu.Lock()
	o.lines = append(o.lines, fmt.Sprintf(format, args...))
	o.mu.Unlock()
}

func (o *ops) all() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.lines)
}

func (o *ops) count(prefix string) int {
	n := 0
	for _, l := range o.all() {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

func nameOf(uid types.UID) string { return strings.TrimPrefix(string(uid), "uid-") }

// recordingRuntime is the fake runtime with its calls logged.
type recordingRuntime struct {
	*fake.Runtime
	ops *ops
	// yield makes SyncPod give up the processor first, as a real runtime
	// that takes a moment to start a pod does.
	yield bool
}

func (r *recordingRuntime) SyncPod(ctx context.Context, p *corev1.Pod) error {
	if r.yield {
		goruntime.Gosched()
	}
	if _, known := r.Runtime.PodStatus(p.UID); !known {
		r.ops.add("start %s", p.Name)
	}
	return r.Runtime.SyncPod(ctx, p)
}

func (r *recordingRuntime) KillPod(ctx context.Context, uid types.UID, grace time.Duration) error {
	r.ops.add("kill %s %s", nameOf(uid), grace)
	return r.Runtime.KillPod(ctx, uid, grace)
}

func (r *recordingRuntime) RemovePod(uid types.UID) error {
	r.ops.add("remove %s", nameOf(uid))
	return r.Runtime.RemovePod(uid)
}

// fakeAPI holds pods the way the API server does: every write bumps the
// resourceVersion, a write with a stale one is a Conflict, and status goes
// through JSON (so times keep whole seconds only).
type fakeAPI struct {
	ops *ops

	mu   sync.Mutex
	rv   int
	pods map[types.UID]*corev1.Pod
	// statusErrs are returned, in order, by the next status writes.
	statusErrs []error
}

var podsResource = schema.GroupResource{Resource: "pods"}

// add stores a pod and returns it as a watch would deliver it.
func (a *fakeAPI) add(p *corev1.Pod) *corev1.Pod {
	return a.update(p.DeepCopy(), func(*corev1.Pod) {})
}

// update changes a stored pod (or stores p) and returns the new version.
func (a *fakeAPI) update(p *corev1.Pod, change func(*corev1.Pod)) *corev1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cur, ok := a.pods[p.UID]; ok {
		p = cur
	}
	change(p)
	a.rv++
	p.ResourceVersion = fmt.Sprint(a.rv)
	a.pods[p.UID] = p
	return p.DeepCopy()
}

func (a *fakeAPI) get(uid types.UID) *corev1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.pods[uid]; ok {
		return p.DeepCopy()
	}
	return nil
}

func (a *fakeAPI) UpdatePodStatus(_ context.Context, p *corev1.Pod) (*corev1.Pod, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.statusErrs) > 0 {
		err := a.statusErrs[0]
		a.statusErrs = a.statusErrs[1:]
		a.ops.add("status %s: injected error", p.Name)
		return nil, err
	}
	cur, ok := a.pods[p.UID]
	if !ok {
		a.ops.add("status %s: not found", p.Name)
		return nil, apierrors.NewNotFound(podsResource, p.Name)
	}
	if cur.ResourceVersion != p.ResourceVersion {
		a.ops.add("status %s: conflict", p.Name)
		return nil, apierrors.NewConflict(podsResource, p.Name, fmt.Errorf("resourceVersion %s, want %s", p.ResourceVersion, cur.ResourceVersion))
	}
	data, err := json.Marshal(p.Status)
	if err != nil {
		return nil, err
	}
	next := cur.DeepCopy()
	next.Status = corev1.PodStatus{}
	if err := json.Unmarshal(data, &next.Status); err != nil {
		return nil, err
	}
	a.rv++
	next.ResourceVersion = fmt.Sprint(a.rv)
	a.pods[p.UID] = next
	a.ops.add("status %s", strings.TrimSpace(fmt.Sprintf("%s %s %s", p.Name, next.Status.Phase, next.Status.Reason)))
	return next.DeepCopy(), nil
}

func (a *fakeAPI) DeletePod(_ context.Context, namespace, name string, uid types.UID) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.pods {
		if p.Namespace != namespace || p.Name != name {
			continue
		}
		if p.UID != uid {
			return apierrors.NewConflict(podsResource, name, fmt.Errorf("UID %s, precondition %s", p.UID, uid))
		}
		delete(a.pods, p.UID)
		a.ops.add("delete %s", name)
		return nil
	}
	return apierrors.NewNotFound(podsResource, name)
}

type fakeRecorder struct {
	mu     sync.Mutex
	events []string // "Warning OutOfcpu big"
}

func (r *fakeRecorder) PodEvent(p *corev1.Pod, eventType, reason, _ string) {
	r.mu.Lock()
	r.events = append(r.events, eventType+" "+reason+" "+p.Name)
	r.mu.Unlock()
}

func (r *fakeRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

type harness struct {
	m      *Manager
	rt     *recordingRuntime
	api    *fakeAPI
	ops    *ops
	events *fakeRecorder
	clock  *clocktesting.FakeClock
}

type options struct {
	node *corev1.Node
	// workers > 0 uses the queue (call run); 0 syncs inline.
	workers int
	// notify wires the runtime's change callback into the manager.
	notify bool
	yield  bool
}

func newHarness(t *testing.T, o options) *harness {
	t.Helper()
	if o.node == nil {
		o.node = testNode()
	}
	h := &harness{ops: &ops{}, events: &fakeRecorder{}, clock: clocktesting.NewFakeClock(t0)}
	h.api = &fakeAPI{ops: h.ops, pods: map[types.UID]*corev1.Pod{}}
	var notify runtime.Notifier
	if o.notify {
		notify = func(uid types.UID) { h.m.Notify(uid) }
	}
	h.rt = &recordingRuntime{
		Runtime: fake.New(fake.Config{NodeName: nodeName, Clock: h.clock, Notify: notify}),
		ops:     h.ops,
		yield:   o.yield,
	}
	m, err := New(Config{
		NodeName: nodeName,
		Runtime:  h.rt,
		Client:   h.api,
		Node:     func() (*corev1.Node, bool) { return o.node, true },
		HostIPs:  func() []string { return hostIPs },
		Recorder: h.events,
		Clock:    h.clock,
		Workers:  o.workers,
		Inline:   o.workers == 0,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	return h
}

// run starts the workers; they stop when the test ends. Call it inside a
// synctest bubble.
func (h *harness) run(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		h.m.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func (h *harness) running(name string) bool {
	rs, ok := h.rt.PodStatus(types.UID("uid-" + name))
	return ok && !rs.Killed
}

func wantOps(t *testing.T, h *harness, want ...string) {
	t.Helper()
	if got := h.ops.all(); !slices.Equal(got, want) {
		t.Errorf("runtime and API calls:\n got %q\nwant %q", got, want)
	}
}

func testNode(change ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{
			"kubernetes.io/hostname": nodeName, "topology.kubernetes.io/zone": "zone-a",
		}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("2"),
			corev1.ResourceMemory: resource.MustParse("4Gi"),
			corev1.ResourcePods:   resource.MustParse("10"),
		}},
	}
	for _, c := range change {
		c(n)
	}
	return n
}

// testPod is a pod bound to the node asking for cpu, created a minute
// before t0.
func testPod(name, cpu string, change ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(t0.Add(-time.Minute).Truncate(time.Second)),
		},
		Spec: corev1.PodSpec{
			NodeName: nodeName,
			Containers: []corev1.Container{{
				Name: "app", Image: "app",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
			}},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
		},
	}
	for _, c := range change {
		c(p)
	}
	return p
}

func createdAgo(d time.Duration) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t0.Add(-d).Truncate(time.Second)) }
}

func markDeleted(grace *int64) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		now := metav1.NewTime(t0)
		p.DeletionTimestamp = &now
		p.DeletionGracePeriodSeconds = grace
	}
}

func TestAdmission(t *testing.T) {
	tests := []struct {
		name string
		node *corev1.Node
		// running are started (in this order) before pod arrives.
		running    []*corev1.Pod
		pod        *corev1.Pod
		wantPhase  corev1.PodPhase
		wantReason string
	}{
		{
			name:      "a bound pod that fits is started and reported Running",
			pod:       testPod("web", "500m"),
			wantPhase: corev1.PodRunning,
		},
		{
			name:       "a pod asking for more cpu than allocatable is rejected and never started",
			pod:        testPod("big", "3"),
			wantPhase:  corev1.PodFailed,
			wantReason: podstatus.ReasonOutOfCPU,
		},
		{
			name:       "a pod that fits an empty node is rejected when the running pods use the cpu",
			running:    []*corev1.Pod{testPod("first", "1500m", createdAgo(time.Hour))},
			pod:        testPod("second", "1"),
			wantPhase:  corev1.PodFailed,
			wantReason: podstatus.ReasonOutOfCPU,
		},
		{
			name:       "a pod beyond the node's pod count is rejected",
			node:       testNode(func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("1") }),
			running:    []*corev1.Pod{testPod("first", "100m", createdAgo(time.Hour))},
			pod:        testPod("second", "100m"),
			wantPhase:  corev1.PodFailed,
			wantReason: podstatus.ReasonOutOfPods,
		},
		{
			name: "a pod with a nodeSelector the node lacks is rejected",
			pod: testPod("picky", "100m", func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{"topology.kubernetes.io/zone": "zone-b"}
			}),
			wantPhase:  corev1.PodFailed,
			wantReason: podstatus.ReasonNodeAffinity,
		},
		{
			name: "a pod with a nodeSelector the node has is started",
			pod: testPod("zonal", "100m", func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{"topology.kubernetes.io/zone": "zone-a"}
			}),
			wantPhase: corev1.PodRunning,
		},
		{
			name: "a pod not tolerating a NoExecute taint is rejected",
			node: testNode(func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}}
			}),
			pod:        testPod("web", "100m"),
			wantPhase:  corev1.PodFailed,
			wantReason: podstatus.ReasonTaintToleration,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, options{node: tt.node})
			for _, p := range tt.running {
				h.m.Upsert(h.api.add(p))
				if !h.running(p.Name) {
					t.Fatalf("pod %s is not running before the test pod arrives; calls %q", p.Name, h.ops.all())
				}
			}
			before := len(h.ops.all())

			h.m.Upsert(h.api.add(tt.pod))

			got := h.api.get(tt.pod.UID).Status
			if got.Phase != tt.wantPhase || got.Reason != tt.wantReason {
				t.Fatalf("status phase %q reason %q (message %q), want %q %q", got.Phase, got.Reason, got.Message, tt.wantPhase, tt.wantReason)
			}
			calls := h.ops.all()[before:]
			if tt.wantPhase == corev1.PodRunning {
				if want := []string{"start " + tt.pod.Name, "status " + tt.pod.Name + " Running"}; !slices.Equal(calls, want) {
					t.Errorf("calls %q, want %q", calls, want)
				}
				wantAddresses(t, got)
				return
			}
			if want := []string{fmt.Sprintf("status %s Failed %s", tt.pod.Name, tt.wantReason)}; !slices.Equal(calls, want) {
				t.Errorf("calls %q, want %q (a rejected pod is never started)", calls, want)
			}
			if !strings.HasPrefix(got.Message, "Pod was rejected: ") {
				t.Errorf("message %q, want the kubelet's rejection prefix", got.Message)
			}
			if want := "Warning " + tt.wantReason + " " + tt.pod.Name; !slices.Contains(h.events.all(), want) {
				t.Errorf("events %q, want %q", h.events.all(), want)
			}
			for _, p := range tt.running {
				if !h.running(p.Name) {
					t.Errorf("pod %s stopped running when %s was rejected", p.Name, tt.pod.Name)
				}
			}
		})
	}
}

func wantAddresses(t *testing.T, st corev1.PodStatus) {
	t.Helper()
	if st.HostIP != hostIPs[0] || st.PodIP != hostIPs[0] {
		t.Errorf("hostIP %q podIP %q, want both %q", st.HostIP, st.PodIP, hostIPs[0])
	}
	var hostList, podList []string
	for _, ip := range st.HostIPs {
		hostList = append(hostList, ip.IP)
	}
	for _, ip := range st.PodIPs {
		podList = append(podList, ip.IP)
	}
	if !slices.Equal(hostList, hostIPs) || !slices.Equal(podList, hostIPs) {
		t.Errorf("hostIPs %q podIPs %q, want both %q", hostList, podList, hostIPs)
	}
}

func TestPodsListedTogetherAreAdmittedOldestFirst(t *testing.T) {
	h := newHarness(t, options{})
	older := h.api.add(testPod("older", "1500m", createdAgo(time.Hour)))
	newer := h.api.add(testPod("newer", "1500m", createdAgo(time.Minute)))

	h.m.Replace([]*corev1.Pod{newer, older})

	if !h.running("older") || h.running("newer") {
		t.Fatalf("older running %v, newer running %v; want only the older; calls %q", h.running("older"), h.running("newer"), h.ops.all())
	}
	if got := h.api.get(newer.UID).Status; got.Phase != corev1.PodFailed || got.Reason != podstatus.ReasonOutOfCPU {
		t.Errorf("newer pod status %q %q, want Failed %s", got.Phase, got.Reason, podstatus.ReasonOutOfCPU)
	}
}

func TestRejectedPodIsNotAdmittedAgain(t *testing.T) {
	h := newHarness(t, options{node: testNode(func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("1") })})
	first := h.api.add(testPod("first", "1", createdAgo(time.Hour)))
	h.m.Upsert(first)
	pending := h.api.add(testPod("second", "1"))
	h.m.Upsert(pending)
	if h.running("second") {
		t.Fatal("second pod started on a full node")
	}
	// The node frees up: the pod that held the cpu is gone.
	h.m.Delete(first)
	if h.running("first") {
		t.Fatal("first pod still runs after it left the API")
	}
	writes := h.ops.count("status second")

	h.m.Upsert(h.api.get(pending.UID))

	if h.running("second") {
		t.Error("a rejected pod was admitted on a later Upsert")
	}
	if got := h.ops.count("status second"); got != writes {
		t.Errorf("status of the rejected pod written %d more times, want none: %q", got-writes, h.ops.all())
	}
	if got := h.api.get(pending.UID).Status; got.Phase != corev1.PodFailed {
		t.Errorf("rejected pod's phase is %q, want Failed", got.Phase)
	}
}

func TestRejectionIsPostedAgainWhenItsWriteFailed(t *testing.T) {
	h := newHarness(t, options{workers: 1})
	ctx := context.Background()
	pod := h.api.add(testPod("big", "3"))
	h.api.statusErrs = []error{apierrors.NewServiceUnavailable("etcd is down")}
	h.m.Upsert(pod)

	if err := h.m.sync(ctx, pod.UID); err == nil {
		t.Fatal("sync reported success although the rejection was not written")
	}
	if err := h.m.sync(ctx, pod.UID); err != nil {
		t.Fatalf("second sync: %v", err)
	}

	if got := h.api.get(pod.UID).Status; got.Phase != corev1.PodFailed || got.Reason != podstatus.ReasonOutOfCPU {
		t.Errorf("status %q %q after the retry, want Failed %s", got.Phase, got.Reason, podstatus.ReasonOutOfCPU)
	}
	if h.running("big") {
		t.Error("the retry started the rejected pod")
	}
	if got := h.events.all(); len(got) != 1 {
		t.Errorf("events %q, want the rejection recorded once", got)
	}
}

func TestPodBeingDeleted(t *testing.T) {
	tests := []struct {
		name    string
		started bool
		grace   *int64
		want    []string
	}{
		{
			name:    "a running pod is killed with its grace period, given its final status, deleted and removed",
			started: true,
			grace:   new(int64(7)),
			want:    []string{"kill web 7s", "status web Succeeded", "delete web", "remove web"},
		},
		{
			name:    "a running pod without a grace period gets the default one",
			started: true,
			want:    []string{"kill web 30s", "status web Succeeded", "delete web", "remove web"},
		},
		{
			name:    "a grace period of zero kills at once",
			started: true,
			grace:   new(int64(0)),
			want:    []string{"kill web 0s", "status web Failed", "delete web", "remove web"},
		},
		{
			name:  "a pod that never started is only deleted",
			grace: new(int64(7)),
			want:  []string{"delete web"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, options{})
				pod := h.api.add(testPod("web", "100m"))
				if tt.started {
					h.m.Replace([]*corev1.Pod{pod})
					if !h.running("web") {
						t.Fatal("pod did not start")
					}
				}
				before := len(h.ops.all())

				h.m.Upsert(h.api.update(pod, markDeleted(tt.grace)))
				synctest.Wait() // KillPod runs in its own goroutine

				if got := h.ops.all()[before:]; !slices.Equal(got, tt.want) {
					t.Errorf("calls %q, want %q", got, tt.want)
				}
				if _, ok := h.rt.PodStatus(pod.UID); ok {
					t.Error("the pod is still in the runtime")
				}
				if h.api.get(pod.UID) != nil {
					t.Error("the pod is still in the API")
				}
				if tt.started && !slices.Contains(h.events.all(), "Normal Killing web") {
					t.Errorf("events %q, want a Killing event", h.events.all())
				}
			})
		})
	}
}

func TestDeleteOnlyIfTheUIDStillMatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, options{})
		pod := h.api.add(testPod("web", "100m"))
		h.m.Replace([]*corev1.Pod{pod})
		deleting := h.api.update(pod, markDeleted(new(int64(1))))
		// Meanwhile the pod was deleted and re-created under the same name.
		h.api.mu.Lock()
		delete(h.api.pods, pod.UID)
		h.api.mu.Unlock()
		replacement := h.api.add(testPod("web", "100m", func(p *corev1.Pod) { p.UID = "uid-web-2" }))

		h.m.Upsert(deleting)
		synctest.Wait()

		if got := h.api.get(replacement.UID); got == nil {
			t.Fatal("deleting the old pod removed the new pod of the same name")
		}
		if _, ok := h.rt.PodStatus(pod.UID); ok {
			t.Error("the old pod is still in the runtime")
		}
	})
}

func TestPodGoneFromTheAPIIsStoppedAndRemoved(t *testing.T) {
	h := newHarness(t, options{})
	pod := h.api.add(testPod("web", "100m"))
	h.m.Replace([]*corev1.Pod{pod})
	before := len(h.ops.all())

	h.m.Delete(pod)

	wantCalls := []string{"kill web 30s", "remove web"}
	if got := h.ops.all()[before:]; !slices.Equal(got, wantCalls) {
		t.Errorf("calls %q, want %q", got, wantCalls)
	}
	if bound, running := h.m.Count(); bound != 0 || running != 0 {
		t.Errorf("Count() = %d bound, %d running, want 0 0", bound, running)
	}
}

func TestReplace(t *testing.T) {
	tinyNode := testNode(func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("100m") })
	tests := []struct {
		name string
		node *corev1.Node
		// adopted run in the runtime before the manager starts.
		adopted []*corev1.Pod
		list    []*corev1.Pod
		want    []string
		running []string
	}{
		{
			name:    "a pod adopted from an earlier run that the list lacks is stopped",
			adopted: []*corev1.Pod{testPod("old", "100m")},
			list:    []*corev1.Pod{testPod("web", "100m")},
			want:    []string{"start web", "status web Running", "kill old 30s", "remove old"},
			running: []string{"web"},
		},
		{
			name:    "a pod adopted from an earlier run that the list has keeps running without admission",
			node:    tinyNode,
			adopted: []*corev1.Pod{testPod("big", "1")},
			list:    []*corev1.Pod{testPod("big", "1")},
			want:    []string{"status big Running"},
			running: []string{"big"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, options{node: tt.node})
			for _, p := range tt.adopted {
				if err := h.rt.Runtime.SyncPod(context.Background(), p); err != nil {
					t.Fatal(err)
				}
			}
			var list []*corev1.Pod
			for _, p := range tt.list {
				list = append(list, h.api.add(p))
			}

			h.m.Replace(list)

			if got := h.ops.all(); !slices.Equal(got, tt.want) {
				t.Errorf("calls %q, want %q", got, tt.want)
			}
			var running []string
			for _, rs := range h.rt.Pods() {
				running = append(running, rs.Name)
			}
			slices.Sort(running)
			if !slices.Equal(running, tt.running) {
				t.Errorf("runtime runs %q, want %q", running, tt.running)
			}
		})
	}
}

func TestReplaceStopsPodsDeletedWhileTheWatchWasDown(t *testing.T) {
	h := newHarness(t, options{})
	web := h.api.add(testPod("web", "100m"))
	gone := h.api.add(testPod("gone", "100m"))
	h.m.Replace([]*corev1.Pod{web, gone})
	before := len(h.ops.all())

	h.m.Replace([]*corev1.Pod{h.api.get(web.UID)})

	want := []string{"kill gone 30s", "remove gone"}
	if got := h.ops.all()[before:]; !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}

func TestUnchangedStatusIsNotWrittenAgain(t *testing.T) {
	h := newHarness(t, options{})
	pod := h.api.add(testPod("web", "100m"))
	h.m.Replace([]*corev1.Pod{pod})
	if got := h.ops.count("status web"); got != 1 {
		t.Fatalf("%d status writes after start, want 1: %q", got, h.ops.all())
	}

	// The watch delivers our own write; later the runtime reports in again.
	h.m.Upsert(h.api.get(pod.UID))
	h.clock.Step(10 * time.Second)
	h.m.Notify(pod.UID)
	h.m.Replace([]*corev1.Pod{h.api.get(pod.UID)})

	if got := h.ops.count("status web"); got != 1 {
		t.Errorf("%d status writes, want 1: %q", got, h.ops.all())
	}
}

func TestStatusConflict(t *testing.T) {
	t.Run("a sync whose status write conflicts returns the conflict", func(t *testing.T) {
		h := newHarness(t, options{workers: 1}) // queued, but no workers run
		ctx := context.Background()
		pod := h.api.add(testPod("web", "100m"))
		h.m.Upsert(pod)
		h.api.statusErrs = []error{apierrors.NewConflict(podsResource, "web", fmt.Errorf("changed"))}

		err := h.m.sync(ctx, pod.UID)
		if !apierrors.IsConflict(err) {
			t.Fatalf("sync error %v, want a conflict", err)
		}
		if err := h.m.sync(ctx, pod.UID); err != nil {
			t.Fatalf("second sync: %v", err)
		}
		if got := h.api.get(pod.UID).Status.Phase; got != corev1.PodRunning {
			t.Errorf("phase %q after the retry, want Running", got)
		}
	})

	t.Run("the queue retries a conflicting status write after its back-off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, options{workers: 2})
			h.run(t)
			pod := h.api.add(testPod("web", "100m"))
			h.api.statusErrs = []error{apierrors.NewConflict(podsResource, "web", fmt.Errorf("changed"))}

			h.m.Replace([]*corev1.Pod{pod})
			synctest.Wait()
			if !h.running("web") || h.ops.count("status web Running") != 0 {
				t.Fatalf("after the conflict: calls %q, want the pod started and no status written", h.ops.all())
			}
			h.clock.Step(100 * time.Millisecond)
			synctest.Wait()
			if got := h.ops.count("status web Running"); got != 0 {
				t.Fatalf("retried after 100ms, before the back-off: %q", h.ops.all())
			}
			h.clock.Step(100 * time.Millisecond)
			synctest.Wait()

			if got := h.api.get(pod.UID).Status.Phase; got != corev1.PodRunning {
				t.Errorf("phase %q after the back-off, want Running; calls %q", got, h.ops.all())
			}
		})
	})
}

func TestWorkers(t *testing.T) {
	t.Run("concurrent workers admit no more pods than fit", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, options{workers: 4, notify: true, yield: true})
			h.run(t)
			var list []*corev1.Pod
			for i := range 8 {
				list = append(list, h.api.add(testPod(fmt.Sprintf("p%d", i), "1", createdAgo(time.Duration(10-i)*time.Minute))))
			}

			h.m.Replace(list)
			synctest.Wait()

			if got := h.ops.count("start "); got != 2 {
				t.Errorf("%d pods started on a node with room for 2: %q", got, h.ops.all())
			}
			running, rejected := 0, 0
			for _, p := range list {
				switch st := h.api.get(p.UID).Status; {
				case st.Phase == corev1.PodRunning:
					running++
				case st.Phase == corev1.PodFailed && st.Reason == podstatus.ReasonOutOfCPU:
					rejected++
				default:
					t.Errorf("pod %s: phase %q reason %q, want Running or rejected", p.Name, st.Phase, st.Reason)
				}
			}
			if running != 2 || rejected != 6 {
				t.Errorf("%d running, %d rejected, want 2 and 6", running, rejected)
			}
		})
	})

	t.Run("a deleted pod is stopped and deleted through the queue", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, options{workers: 2, notify: true})
			h.run(t)
			pod := h.api.add(testPod("web", "100m"))
			h.m.Replace([]*corev1.Pod{pod})
			synctest.Wait()
			if !h.running("web") {
				t.Fatalf("pod not running: %q", h.ops.all())
			}

			h.m.Upsert(h.api.update(pod, markDeleted(new(int64(5)))))
			synctest.Wait()

			if h.api.get(pod.UID) != nil {
				t.Errorf("pod still in the API: %q", h.ops.all())
			}
			if _, ok := h.rt.PodStatus(pod.UID); ok {
				t.Errorf("pod still in the runtime: %q", h.ops.all())
			}
			if got := h.ops.count("kill web 5s"); got != 1 {
				t.Errorf("killed %d times with 5s grace, want once: %q", got, h.ops.all())
			}
		})
	})
}
