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
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

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

func (r *recordingRuntime) SyncPodWithVolumes(ctx context.Context, p *corev1.Pod, vols map[string]runtime.Volume) error {
	if _, known := r.Runtime.PodStatus(p.UID); !known {
		names := make([]string, 0, len(vols))
		for n, v := range vols {
			names = append(names, n+"="+v.HostPath)
		}
		slices.Sort(names)
		r.ops.add("mount %s %s", p.Name, strings.Join(names, ","))
	}
	return r.SyncPod(ctx, p)
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
	mu       sync.Mutex
	events   []string // "Warning OutOfcpu big"
	messages []string // the events' messages, in the same order
}

func (r *fakeRecorder) PodEvent(p *corev1.Pod, eventType, reason, message string) {
	r.mu.Lock()
	r.events = append(r.events, eventType+" "+reason+" "+p.Name)
	r.messages = append(r.messages, message)
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
	// shuttingDown feeds Config.ShuttingDown.
	shuttingDown func() bool
	// volumes feeds Config.Volumes.
	volumes Volumes
	// pressureAdmit feeds Config.PressureAdmit.
	pressureAdmit func(*corev1.Pod) (bool, string, string)
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

		ShuttingDown:  o.shuttingDown,
		Volumes:       o.volumes,
		PressureAdmit: o.pressureAdmit,
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
