package shutdown

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const sec = time.Second

func TestTable(t *testing.T) {
	for _, tc := range []struct {
		name            string
		total, critical time.Duration
		byPriority      []Group
		want            []Group
	}{
		{name: "a zero total turns shutdown off", total: 0, critical: 0, want: nil},
		{name: "critical above total turns shutdown off", total: 10 * sec, critical: 20 * sec, want: nil},
		{name: "nodeplane's default gives 20 s to ordinary pods and 10 s to critical ones", total: 30 * sec, critical: 10 * sec,
			want: []Group{{0, 20 * sec}, {CriticalPriority, 10 * sec}}},
		{name: "critical equal to total leaves ordinary pods no time", total: 10 * sec, critical: 10 * sec,
			want: []Group{{0, 0}, {CriticalPriority, 10 * sec}}},
		{name: "a priority table wins and is sorted ascending",
			byPriority: []Group{{100000, 5 * sec}, {-10, 7 * sec}, {0, 3 * sec}},
			want:       []Group{{-10, 7 * sec}, {0, 3 * sec}, {100000, 5 * sec}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Table(tc.total, tc.critical, tc.byPriority); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Table = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestGroupOf(t *testing.T) {
	derived := Table(30*sec, 10*sec, nil)
	custom := []Group{{-100, sec}, {0, sec}, {1000, sec}}
	for _, tc := range []struct {
		name     string
		table    []Group
		priority *int32
		want     int
	}{
		{"a pod without priority counts as 0", derived, nil, 0},
		{"priority 0 is an ordinary pod", derived, ptr.To[int32](0), 0},
		{"one below system-cluster-critical is ordinary", derived, ptr.To[int32](CriticalPriority - 1), 0},
		{"system-cluster-critical is critical", derived, ptr.To[int32](CriticalPriority), 1},
		{"system-node-critical joins the critical group", derived, ptr.To[int32](2000001000), 1},
		{"a negative priority below the lowest group goes to the lowest", derived, ptr.To[int32](-5), 0},
		{"a negative priority at a negative group's boundary is in it", custom, ptr.To[int32](-100), 0},
		{"a priority between groups goes to the lower one", custom, ptr.To[int32](-1), 0},
		{"the exact boundary of a middle group is in it", custom, ptr.To[int32](0), 1},
		{"a pod above the highest group goes to the highest", custom, ptr.To[int32](5000), 2},
		{"a pod far below every group goes to the lowest", custom, ptr.To[int32](-2000000000), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := GroupOf(tc.table, tc.priority); got != tc.want {
				t.Errorf("GroupOf(%v) = %d, want %d", tc.priority, got, tc.want)
			}
		})
	}
}

func pod(name string, priority *int32, grace *int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec:       corev1.PodSpec{Priority: priority, TerminationGracePeriodSeconds: grace},
	}
}

func TestPlan(t *testing.T) {
	table := Table(30*sec, 10*sec, nil)
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		want []Batch
	}{
		{name: "no pods plan nothing", want: nil},
		{name: "a pod's own shorter grace wins over its group's",
			pods: []*corev1.Pod{pod("a", nil, ptr.To[int64](3))},
			want: []Batch{{0, 20 * sec, []Kill{{"a", "default", "a", 3 * sec}}}}},
		{name: "a pod's longer grace is cut to its group's budget",
			pods: []*corev1.Pod{pod("a", nil, ptr.To[int64](600))},
			want: []Batch{{0, 20 * sec, []Kill{{"a", "default", "a", 20 * sec}}}}},
		{name: "a pod without its own grace gets the group's",
			pods: []*corev1.Pod{pod("c", ptr.To(CriticalPriority), nil)},
			want: []Batch{{CriticalPriority, 10 * sec, []Kill{{"c", "default", "c", 10 * sec}}}}},
		{name: "a zero grace stays zero",
			pods: []*corev1.Pod{pod("z", nil, ptr.To[int64](0))},
			want: []Batch{{0, 20 * sec, []Kill{{"z", "default", "z", 0}}}}},
		{name: "batches come lowest priority first whatever the input order",
			pods: []*corev1.Pod{pod("crit", ptr.To[int32](2000001000), nil), pod("low", ptr.To[int32](-1), nil), pod("mid", ptr.To[int32](5), nil)},
			want: []Batch{
				{0, 20 * sec, []Kill{{"low", "default", "low", 20 * sec}, {"mid", "default", "mid", 20 * sec}}},
				{CriticalPriority, 10 * sec, []Kill{{"crit", "default", "crit", 10 * sec}}},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Plan(table, tc.pods); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Plan =\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
}

func names(kills []Kill) []string {
	var out []string
	for _, k := range kills {
		out = append(out, k.Name)
	}
	return out
}

func TestSequence(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	table := []Group{{-10, 5 * sec}, {0, 20 * sec}, {CriticalPriority, 10 * sec}}
	pods := []*corev1.Pod{pod("low", ptr.To[int32](-10), nil), pod("mid", nil, nil), pod("crit", ptr.To(CriticalPriority), nil)}
	none := func(types.UID) bool { return false }
	all := func(types.UID) bool { return true }

	type step struct {
		at      time.Duration
		stopped func(types.UID) bool
		cancel  bool
		kill    []string
		wake    time.Duration
		done    bool
		cancled bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{name: "each batch waits out its budget when its pods do not stop", steps: []step{
			{at: 0, stopped: none, kill: []string{"low"}, wake: 5 * sec},
			{at: 4 * sec, stopped: none, wake: 5 * sec},
			{at: 5 * sec, stopped: none, kill: []string{"mid"}, wake: 25 * sec},
			{at: 25 * sec, stopped: none, kill: []string{"crit"}, wake: 35 * sec},
			{at: 35 * sec, stopped: none, done: true},
		}},
		{name: "a batch whose pods all stopped ends early", steps: []step{
			{at: 0, stopped: none, kill: []string{"low"}, wake: 5 * sec},
			{at: 1 * sec, stopped: all, kill: []string{"mid"}, wake: 21 * sec},
			{at: 2 * sec, stopped: func(u types.UID) bool { return u != "mid" }, wake: 21 * sec},
			{at: 3 * sec, stopped: all, kill: []string{"crit"}, wake: 13 * sec},
			{at: 4 * sec, stopped: all, done: true},
		}},
		{name: "cancellation mid-group starts no further group", steps: []step{
			{at: 0, stopped: none, kill: []string{"low"}, wake: 5 * sec},
			{at: 6 * sec, stopped: none, kill: []string{"mid"}, wake: 26 * sec},
			{at: 7 * sec, cancel: true, stopped: none, done: true, cancled: true},
			{at: 30 * sec, stopped: none, done: true, cancled: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSequence(Plan(table, pods))
			for i, st := range tc.steps {
				if st.cancel {
					s.Cancel()
				}
				got := s.Step(t0.Add(st.at), st.stopped)
				if !reflect.DeepEqual(names(got.Kill), st.kill) || got.Done != st.done || got.Cancelled != st.cancled {
					t.Fatalf("step %d at %v: kill %v done %v cancelled %v, want kill %v done %v cancelled %v",
						i, st.at, names(got.Kill), got.Done, got.Cancelled, st.kill, st.done, st.cancled)
				}
				if !st.done && !got.Wake.Equal(t0.Add(st.wake)) {
					t.Fatalf("step %d at %v: wake at %v, want %v", i, st.at, got.Wake.Sub(t0), st.wake)
				}
			}
		})
	}
}

func TestSequenceWithoutPodsIsDoneAtOnce(t *testing.T) {
	s := NewSequence(Plan(Table(30*sec, 10*sec, nil), nil))
	if got := s.Step(time.Now(), func(types.UID) bool { return false }); !got.Done || got.Cancelled {
		t.Errorf("Step = %+v, want done", got)
	}
}
