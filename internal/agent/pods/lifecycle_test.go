package pods

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeplane/nodeplane/internal/agent/podstatus"
)

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
