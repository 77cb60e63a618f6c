package fake

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeplane/nodeplane/internal/agent/podstatus"
	"github.com/nodeplane/nodeplane/internal/agent/runtime"
)

func testPod() *corev1.Pod {
	sidecar := corev1.ContainerRestartPolicyAlways
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "uid-1"},
		Spec: corev1.PodSpec{
			NodeName: "node-7",
			InitContainers: []corev1.Container{
				{Name: "setup", Image: "true"},
				{Name: "proxy", Image: "envoy", RestartPolicy: &sidecar},
			},
			Containers: []corev1.Container{{Name: "app", Image: "nginx"}},
		},
	}
}

func TestPodRunsAtOnceAndStopsWhenKilled(t *testing.T) {
	tests := []struct {
		name     string
		grace    time.Duration
		wantCode int32
		wantWhy  string
	}{
		{name: "a graceful kill ends with exit 0", grace: 30 * time.Second, wantCode: 0, wantWhy: "Completed"},
		{name: "a kill without grace ends like SIGKILL", grace: 0, wantCode: 137, wantWhy: "Error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC))
			var notified []types.UID
			r := New(Config{NodeName: "node-7", Clock: clk, Notify: func(uid types.UID) { notified = append(notified, uid) }})
			pod := testPod()
			ctx := context.Background()

			if err := r.SyncPod(ctx, pod); err != nil {
				t.Fatal(err)
			}
			clk.Step(time.Second)
			if err := r.SyncPod(ctx, pod); err != nil {
				t.Fatal(err)
			}
			st, ok := r.PodStatus(pod.UID)
			if !ok {
				t.Fatal("synced pod unknown")
			}
			app := st.Containers[0]
			if app.State.Running == nil || !app.State.Running.StartedAt.Time.Equal(clk.Now().Add(-time.Second)) {
				t.Fatalf("app = %+v, want Running since the first sync", app.State)
			}
			if st.InitContainers[0].State.Terminated == nil || st.InitContainers[0].State.Terminated.ExitCode != 0 {
				t.Errorf("init container = %+v, want Completed", st.InitContainers[0].State)
			}
			if st.InitContainers[1].State.Running == nil {
				t.Errorf("sidecar = %+v, want Running", st.InitContainers[1].State)
			}
			if got := podstatus.Compute(pod, st, true, metav1.NewTime(clk.Now())); got.Phase != corev1.PodRunning {
				t.Errorf("computed phase = %s, want Running", got.Phase)
			}
			if len(notified) != 1 {
				t.Errorf("notified %d times after two syncs, want 1", len(notified))
			}

			if err := r.KillPod(ctx, pod.UID, tt.grace); err != nil {
				t.Fatal(err)
			}
			st, _ = r.PodStatus(pod.UID)
			term := st.Containers[0].State.Terminated
			if !st.Killed || term == nil || term.ExitCode != tt.wantCode || term.Reason != tt.wantWhy {
				t.Fatalf("after kill: killed=%v app=%+v, want Terminated %d/%s", st.Killed, st.Containers[0].State, tt.wantCode, tt.wantWhy)
			}
			if st.InitContainers[0].State.Terminated.ExitCode != 0 {
				t.Errorf("the completed init container changed its exit code to %d", st.InitContainers[0].State.Terminated.ExitCode)
			}
			if len(notified) != 2 {
				t.Errorf("notified %d times, want 2 (start, kill)", len(notified))
			}
			if err := r.RemovePod(pod.UID); err != nil {
				t.Fatal(err)
			}
			if _, ok := r.PodStatus(pod.UID); ok || len(r.Pods()) != 0 {
				t.Error("removed pod still known")
			}
		})
	}
}

func TestLogs(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC))
	r := New(Config{NodeName: "node-7", Clock: clk})
	pod := testPod()
	if err := r.SyncPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		container string
		opts      runtime.LogOptions
		want      string
		wantErr   bool
	}{
		{name: "a container logs one line naming itself", container: "app", opts: runtime.LogOptions{TailLines: -1},
			want: "simulated container app of pod shop/web on node node-7\n"},
		{name: "timestamps prefix the start time", container: "app", opts: runtime.LogOptions{TailLines: -1, Timestamps: true},
			want: "2025-05-01T00:00:00Z simulated container app of pod shop/web on node node-7\n"},
		{name: "zero tail lines print nothing", container: "app", opts: runtime.LogOptions{TailLines: 0}},
		{name: "the byte limit cuts the line", container: "app", opts: runtime.LogOptions{TailLines: -1, LimitBytes: 9}, want: "simulated"},
		{name: "an unknown container is not found", container: "nope", opts: runtime.LogOptions{TailLines: -1}, wantErr: true},
		{name: "there is no previous instance", container: "app", opts: runtime.LogOptions{TailLines: -1, Previous: true}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			err := r.Logs(context.Background(), pod.UID, tt.container, tt.opts, &b)
			if tt.wantErr {
				if !errors.Is(err, runtime.ErrNotFound) {
					t.Fatalf("err = %v, want ErrNotFound", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("logs = %q, want %q", b.String(), tt.want)
			}
		})
	}
}

// BenchmarkManyNodes shows the per-pod cost of a simulated node.
func BenchmarkManyNodes(b *testing.B) {
	clk := clocktesting.NewFakeClock(time.Now())
	pod := testPod()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r := New(Config{NodeName: "n", Clock: clk})
		if err := r.SyncPod(context.Background(), pod); err != nil {
			b.Fatal(err)
		}
	}
}
