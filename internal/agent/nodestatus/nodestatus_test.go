package nodestatus

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func healthy() Observation {
	return Observation{
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"),
			corev1.ResourcePods: resource.MustParse("110"),
		},
		Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("14Gi"),
			corev1.ResourcePods: resource.MustParse("110"),
		},
		NodeInfo:   corev1.NodeSystemInfo{BootID: "boot-1", OperatingSystem: "linux", Architecture: "amd64"},
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: "n1"}},
		DaemonPort: 10250,
	}
}

func cond(s corev1.NodeStatus, t corev1.NodeConditionType) corev1.NodeCondition {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.NodeCondition{}
}

func reasons(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Reason)
	}
	return out
}

func TestComputeConditions(t *testing.T) {
	memPressure := healthy()
	memPressure.MemoryPressure = true
	noCapacity := healthy()
	delete(noCapacity.Capacity, corev1.ResourceCPU)
	delete(noCapacity.Capacity, corev1.ResourcePods)
	twoErrors := healthy()
	twoErrors.NotReady = []string{"container runtime is down", "node is shutting down"}
	oneError := healthy()
	oneError.NotReady = []string{"node is shutting down"}

	tests := []struct {
		name       string
		obs        Observation
		want       map[corev1.NodeConditionType][3]string // status, reason, message
		wantEvents []string
	}{
		{"a healthy new node is ready with no pressure and announces each condition", healthy(),
			map[corev1.NodeConditionType][3]string{
				corev1.NodeMemoryPressure: {"False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"},
				corev1.NodeDiskPressure:   {"False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
				corev1.NodePIDPressure:    {"False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
				corev1.NodeReady:          {"True", "KubeletReady", "kubelet is posting ready status"},
			},
			[]string{"NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID", "NodeReady"}},
		{"memory pressure sets the condition true but the node stays ready", memPressure,
			map[corev1.NodeConditionType][3]string{
				corev1.NodeMemoryPressure: {"True", "KubeletHasInsufficientMemory", "kubelet has insufficient memory available"},
				corev1.NodeReady:          {"True", "KubeletReady", "kubelet is posting ready status"},
			},
			[]string{"NodeHasInsufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID", "NodeReady"}},
		{"missing capacity makes the node not ready naming the resources", noCapacity,
			map[corev1.NodeConditionType][3]string{
				corev1.NodeReady: {"False", "KubeletNotReady", "Missing node capacity for resources: cpu, pods"},
			},
			[]string{"NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID", "NodeNotReady"}},
		{"one not-ready error is the message as it is", oneError,
			map[corev1.NodeConditionType][3]string{corev1.NodeReady: {"False", "KubeletNotReady", "node is shutting down"}}, nil},
		{"several not-ready errors are listed in brackets", twoErrors,
			map[corev1.NodeConditionType][3]string{corev1.NodeReady: {"False", "KubeletNotReady", "[container runtime is down, node is shutting down]"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
			status, events := Compute(node, tt.obs, t0)
			for typ, w := range tt.want {
				c := cond(status, typ)
				if string(c.Status) != w[0] || c.Reason != w[1] || c.Message != w[2] {
					t.Errorf("%s = %s/%s/%q, want %s/%s/%q", typ, c.Status, c.Reason, c.Message, w[0], w[1], w[2])
				}
				if !c.LastHeartbeatTime.Time.Equal(t0) || !c.LastTransitionTime.Time.Equal(t0) {
					t.Errorf("%s times = %v/%v, want both %v", typ, c.LastHeartbeatTime, c.LastTransitionTime, t0)
				}
			}
			if last := status.Conditions[len(status.Conditions)-1]; last.Type != corev1.NodeReady {
				t.Errorf("last condition is %s, want Ready", last.Type)
			}
			if tt.wantEvents != nil && !reflect.DeepEqual(reasons(events), tt.wantEvents) {
				t.Errorf("events = %v, want %v", reasons(events), tt.wantEvents)
			}
			for _, e := range events {
				if e.Reason != "NodeRebooted" && e.Message != "Node n1 status is now: "+e.Reason {
					t.Errorf("event message %q", e.Message)
				}
			}
		})
	}
}

func TestTransitionsKeepOrMoveTheTransitionTime(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	node.Status, _ = Compute(node, healthy(), t0)

	t1 := t0.Add(10 * time.Second)
	status, events := Compute(node, healthy(), t1)
	if len(events) != 0 {
		t.Errorf("unchanged pass recorded %v", reasons(events))
	}
	r := cond(status, corev1.NodeReady)
	if !r.LastHeartbeatTime.Time.Equal(t1) || !r.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("unchanged Ready: heartbeat %v (want %v), transition %v (want %v)", r.LastHeartbeatTime, t1, r.LastTransitionTime, t0)
	}
	if Changed(node.Status, status) {
		t.Errorf("a pass that only moved heartbeats counts as a change")
	}

	// The lifecycle controller marked the node Unknown; the agent's next
	// pass turns it back to True and says so.
	node.Status = status
	for i := range node.Status.Conditions {
		node.Status.Conditions[i].Status = corev1.ConditionUnknown
		node.Status.Conditions[i].Reason = "NodeStatusUnknown"
	}
	t2 := t1.Add(time.Minute)
	status, events = Compute(node, healthy(), t2)
	r = cond(status, corev1.NodeReady)
	if r.Status != corev1.ConditionTrue || !r.LastTransitionTime.Time.Equal(t2) {
		t.Errorf("Ready after Unknown = %s at %v, want True at %v", r.Status, r.LastTransitionTime, t2)
	}
	if !Changed(node.Status, status) {
		t.Errorf("Unknown → True is not a change")
	}
	if got := reasons(events); !reflect.DeepEqual(got, []string{"NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID", "NodeReady"}) {
		t.Errorf("events = %v", got)
	}
}

func TestANewBootIDRecordsNodeRebooted(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	node.Status, _ = Compute(node, healthy(), t0)
	obs := healthy()
	obs.NodeInfo.BootID = "boot-2"
	_, events := Compute(node, obs, t0.Add(time.Minute))
	if len(events) != 1 || events[0].Type != corev1.EventTypeWarning || events[0].Reason != "NodeRebooted" ||
		events[0].Message != "Node n1 has been rebooted, boot id: boot-2" {
		t.Errorf("events = %+v", events)
	}
}

func TestSchedulabilityEvent(t *testing.T) {
	f, tr := false, true
	if SchedulabilityEvent("n", &f, false) != nil {
		t.Error("no change should record nothing")
	}
	if e := SchedulabilityEvent("n", &f, true); e == nil || e.Reason != "NodeNotSchedulable" || e.Message != "Node n status is now: NodeNotSchedulable" {
		t.Errorf("cordon event = %+v", e)
	}
	if e := SchedulabilityEvent("n", &tr, false); e == nil || e.Reason != "NodeSchedulable" {
		t.Errorf("uncordon event = %+v", e)
	}
	if e := SchedulabilityEvent("n", nil, false); e != nil {
		t.Errorf("first pass of a schedulable node recorded %+v", e)
	}
	if e := SchedulabilityEvent("n", nil, true); e == nil || e.Reason != "NodeNotSchedulable" {
		t.Errorf("first pass of a cordoned node = %+v", e)
	}
}

// fakeNodes is an in-memory node API.
type fakeNodes struct {
	node    *corev1.Node
	patches []map[string]any
	fail    int
}

func (f *fakeNodes) GetNode(context.Context, string) (*corev1.Node, error) {
	return f.node.DeepCopy(), nil
}

func (f *fakeNodes) PatchNodeStatus(_ context.Context, _ string, patch []byte) (*corev1.Node, error) {
	if f.fail > 0 {
		f.fail--
		return nil, errors.New("connection refused")
	}
	var p struct {
		Status corev1.NodeStatus `json:"status"`
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	var raw map[string]any
	_ = json.Unmarshal(patch, &raw)
	f.patches = append(f.patches, raw)
	f.node.Status = p.Status
	return f.node.DeepCopy(), nil
}

func (f *fakeNodes) PatchNode(_ context.Context, _ string, patch []byte) (*corev1.Node, error) {
	var p struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	if f.node.Labels == nil {
		f.node.Labels = map[string]string{}
	}
	for k, v := range p.Metadata.Labels {
		f.node.Labels[k] = v
	}
	return f.node.DeepCopy(), nil
}

type recorded []string

func (r *recorded) NodeEvent(_, reason, _ string) { *r = append(*r, reason) }

func TestUpdaterReportsOnChangeAndAtTheReportFrequency(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	api := &fakeNodes{node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}
	obs := healthy()
	var events recorded
	u, err := NewUpdater(Config{
		NodeName: "n1", Client: api, Clock: clk, Recorder: &events,
		Cached:          func() (*corev1.Node, bool) { return api.node.DeepCopy(), true },
		Observe:         func(context.Context) (Observation, error) { return obs, nil },
		UpdateFrequency: 10 * time.Second, ReportFrequency: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if len(api.patches) != 1 {
		t.Fatalf("first pass sent %d patches, want 1", len(api.patches))
	}
	if api.node.Labels[corev1.LabelOSStable] != "linux" || api.node.Labels[corev1.LabelArchStable] != "amd64" {
		t.Errorf("os/arch labels not fixed: %v", api.node.Labels)
	}
	// Nothing changes: passes every 10 s send nothing until a minute passed.
	for i := 1; i <= 5; i++ {
		clk.Step(10 * time.Second)
		if err := u.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if len(api.patches) != 1 {
			t.Fatalf("unchanged pass %d sent a patch", i)
		}
	}
	clk.Step(10 * time.Second)
	_ = u.Sync(ctx)
	if len(api.patches) != 2 {
		t.Fatalf("no patch after the report frequency (patches=%d)", len(api.patches))
	}
	if hb := cond(api.node.Status, corev1.NodeReady).LastHeartbeatTime.Time; !hb.Equal(clk.Now()) {
		t.Errorf("heartbeat %v, want %v", hb, clk.Now())
	}
	// A condition flip is sent at the next pass, with its event.
	obs.DiskPressure = true
	clk.Step(10 * time.Second)
	_ = u.Sync(ctx)
	if len(api.patches) != 3 || cond(api.node.Status, corev1.NodeDiskPressure).Status != corev1.ConditionTrue {
		t.Fatalf("disk pressure not reported promptly (patches=%d)", len(api.patches))
	}
	if events[len(events)-1] != "NodeHasDiskPressure" {
		t.Errorf("events = %v", events)
	}
	// Cordon shows up as NodeNotSchedulable once.
	api.node.Spec.Unschedulable = true
	clk.Step(10 * time.Second)
	_ = u.Sync(ctx)
	_ = u.Sync(ctx)
	n := 0
	for _, e := range events {
		if e == "NodeNotSchedulable" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("NodeNotSchedulable recorded %d times, want 1 (events %v)", n, events)
	}
}

func TestUpdaterRetriesWithFreshReads(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	api := &fakeNodes{node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, fail: 3}
	hooks := 0
	u, _ := NewUpdater(Config{
		NodeName: "n1", Client: api, Clock: clk,
		Observe:           func(context.Context) (Observation, error) { return healthy(), nil },
		OnRepeatedFailure: func() { hooks++ },
	})
	if err := u.Sync(ctx); err != nil {
		t.Fatalf("sync with 3 failures then success: %v", err)
	}
	if hooks != 2 {
		t.Errorf("repeated-failure hook ran %d times, want 2", hooks)
	}
	api.fail = 5
	if err := u.Sync(ctx); err != nil {
		// nothing changed, so no patch is attempted and nothing fails
		t.Errorf("unchanged pass failed: %v", err)
	}
	clk.Step(6 * time.Minute)
	api.fail = 5
	if err := u.Sync(ctx); err == nil {
		t.Errorf("five failed attempts did not fail the pass")
	}
}

func TestNewUpdaterRefusesAReportFrequencyBelowTheUpdateFrequency(t *testing.T) {
	_, err := NewUpdater(Config{NodeName: "n", Client: &fakeNodes{}, Observe: func(context.Context) (Observation, error) { return Observation{}, nil },
		UpdateFrequency: time.Minute, ReportFrequency: time.Second})
	if err == nil {
		t.Fatal("accepted report frequency < update frequency")
	}
}

func TestInitialEventsAnnounceEachCondition(t *testing.T) {
	obs := healthy()
	obs.DiskPressure = true
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	node.Status, _ = Compute(nil, obs, t0)
	got := reasons(InitialEvents(node))
	want := []string{"NodeHasSufficientMemory", "NodeHasDiskPressure", "NodeHasSufficientPID", "NodeReady"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
}

func TestReportNowSendsTheNextPassEvenWithoutChange(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	api := &fakeNodes{node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}
	u, _ := NewUpdater(Config{NodeName: "n1", Client: api, Clock: clk,
		Observe: func(context.Context) (Observation, error) { return healthy(), nil }})
	_ = u.Sync(ctx)
	clk.Step(10 * time.Second)
	_ = u.Sync(ctx)
	if len(api.patches) != 1 {
		t.Fatalf("patches = %d, want 1", len(api.patches))
	}
	u.ReportNow()
	clk.Step(10 * time.Second)
	_ = u.Sync(ctx)
	if len(api.patches) != 2 {
		t.Errorf("ReportNow did not force a report (patches = %d)", len(api.patches))
	}
}

func TestStatusPatchCarriesVolumesInUseButNeverVolumesAttached(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	const unique = corev1.UniqueVolumeName("kubernetes.io/csi/nodeplane.io/shared-dir^v1")
	api := &fakeNodes{node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{VolumesAttached: []corev1.AttachedVolume{{Name: unique}}}}}
	obs := healthy()
	obs.VolumesInUse = []corev1.UniqueVolumeName{unique}
	u, err := NewUpdater(Config{
		NodeName: "n1", Client: api, Clock: clk,
		Observe:         func(context.Context) (Observation, error) { return obs, nil },
		UpdateFrequency: 10 * time.Second, ReportFrequency: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	status := api.patches[0]["status"].(map[string]any)
	if _, ok := status["volumesAttached"]; ok {
		t.Errorf("the patch carries volumesAttached (the attach/detach controller's field): %v", status["volumesAttached"])
	}
	if got, _ := json.Marshal(status["volumesInUse"]); string(got) != `["`+string(unique)+`"]` {
		t.Errorf("volumesInUse = %s", got)
	}
	// The last volume going out of use is removed with an explicit null.
	obs.VolumesInUse = nil
	clk.Step(10 * time.Second)
	if err := u.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if len(api.patches) != 2 {
		t.Fatalf("no patch when the volumes in use changed (patches=%d)", len(api.patches))
	}
	status = api.patches[1]["status"].(map[string]any)
	if v, ok := status["volumesInUse"]; !ok || v != nil {
		t.Errorf("volumesInUse = %v (present %v), want an explicit null", v, ok)
	}
}

func TestAddressesWithAnExternalCloudProvider(t *testing.T) {
	cloudSet := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.17.0.5"}}
	tests := []struct {
		name     string
		existing []corev1.NodeAddress
		external bool
		want     []corev1.NodeAddress
	}{
		{"without a cloud provider the agent's addresses replace the node's", cloudSet, false, healthy().Addresses},
		{"with an external cloud provider the controller's addresses are kept", cloudSet, true, cloudSet},
		{"with an external cloud provider a node without addresses gets the agent's", nil, true, healthy().Addresses},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: tt.existing}}
			obs := healthy()
			obs.ExternalCloudProvider = tt.external
			status, _ := Compute(node, obs, t0)
			if !reflect.DeepEqual(status.Addresses, tt.want) {
				t.Errorf("addresses %v, want %v", status.Addresses, tt.want)
			}
		})
	}
}
