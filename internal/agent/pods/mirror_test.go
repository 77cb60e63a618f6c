package pods

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func mirror(p *corev1.Pod) {
	p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
}

func TestMirrorPodIsNeverRun(t *testing.T) {
	tests := []struct {
		name string
		// feed hands the pod to the manager.
		feed func(h *harness, pod *corev1.Pod)
		// adopted puts the pod in the runtime first, as an agent from before
		// this rule would have left it.
		adopted bool
		want    []string
	}{
		{
			name: "a mirror pod seen by the watch is deleted without being started or given a status",
			feed: func(h *harness, pod *corev1.Pod) { h.m.Upsert(pod) },
			want: []string{"delete web"},
		},
		{
			name: "a mirror pod in the initial list is deleted without being started or given a status",
			feed: func(h *harness, pod *corev1.Pod) { h.m.Replace([]*corev1.Pod{pod}) },
			want: []string{"delete web"},
		},
		{
			name:    "a mirror pod the runtime still runs is stopped at once, removed and deleted",
			feed:    func(h *harness, pod *corev1.Pod) { h.m.Replace([]*corev1.Pod{pod}) },
			adopted: true,
			want:    []string{"kill web 0s", "remove web", "delete web"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, options{})
			pod := h.api.add(testPod("web", "100m", mirror))
			if tt.adopted {
				if err := h.rt.Runtime.SyncPod(t.Context(), pod); err != nil {
					t.Fatal(err)
				}
			}
			tt.feed(h, pod)
			wantOps(t, h, tt.want...)
			if _, ok := h.rt.PodStatus(pod.UID); ok {
				t.Error("the mirror pod is in the runtime")
			}
			if h.api.get(pod.UID) != nil {
				t.Error("the mirror pod is still in the API")
			}
		})
	}
}

func TestOrdinaryPodIsNotAMirrorPod(t *testing.T) {
	if IsMirror(testPod("web", "100m")) {
		t.Error("IsMirror(pod without the annotation) = true")
	}
	if !IsMirror(testPod("web", "100m", mirror)) {
		t.Error("IsMirror(pod with the annotation) = false")
	}
}
