package pods

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodeplane/nodeplane/internal/agent/volumes"
)

// claimsAPI serves one bound claim and its shared-dir volume.
type claimsAPI struct{}

func (claimsAPI) GetConfigMap(_ context.Context, _, name string) (*corev1.ConfigMap, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (claimsAPI) GetSecret(_ context.Context, _, name string) (*corev1.Secret, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (claimsAPI) GetPersistentVolumeClaim(_ context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}, nil
}

func (claimsAPI) GetPersistentVolume(_ context.Context, name string) (*corev1.PersistentVolume, error) {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: volumes.DriverSharedDir, VolumeHandle: "vol-1"}},
			ClaimRef:               &corev1.ObjectReference{Namespace: "default", Name: "data"},
		},
	}, nil
}

func withClaimMount(p *corev1.Pod) {
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
}

func TestPodVolumes(t *testing.T) {
	attached := testNode(func(n *corev1.Node) {
		n.Status.VolumesAttached = []corev1.AttachedVolume{{Name: volumes.UniqueName(volumes.DriverSharedDir, "vol-1")}}
	})
	tests := []struct {
		name     string
		canMount bool
		node     *corev1.Node
		// wantStart is the runtime call expected; "" means the pod must not start.
		wantStart  string
		wantEvent  string
		wantInUse  bool
		wantReason string
	}{
		{
			name: "a pod whose volume is attached starts with it mounted", canMount: true, node: attached,
			wantStart: "mount web data=SHARED/vol-1", wantInUse: true,
		},
		{
			name: "a pod whose volume is not attached yet waits in ContainerCreating with one FailedMount event", canMount: true,
			wantEvent: "unattached volumes=[data]", wantInUse: true, wantReason: "ContainerCreating",
		},
		{
			name: "an agent without CAP_SYS_ADMIN does not start the pod and says which capability is missing", node: attached,
			wantEvent: "lacks CAP_SYS_ADMIN", wantInUse: true, wantReason: "ContainerCreating",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shared := t.TempDir()
			vm, err := volumes.NewManager(volumes.Config{
				Layout:   volumes.Layout{PodsDir: filepath.Join(t.TempDir(), "pods"), SharedRoot: shared},
				Client:   claimsAPI{},
				CanMount: func() bool { return tt.canMount },
			})
			if err != nil {
				t.Fatal(err)
			}
			h := newHarness(t, options{node: tt.node, volumes: vm})
			pod := h.api.add(testPod("web", "100m", withClaimMount))
			h.m.Replace([]*corev1.Pod{pod})
			h.m.Upsert(h.api.get(pod.UID)) // a retry must not repeat the event

			var started []string
			for _, op := range h.ops.all() {
				if strings.HasPrefix(op, "mount ") || strings.HasPrefix(op, "start ") {
					started = append(started, strings.ReplaceAll(op, shared, "SHARED"))
				}
			}
			if tt.wantStart != "" {
				if len(started) == 0 || started[0] != tt.wantStart {
					t.Fatalf("runtime calls %q, want %q first", started, tt.wantStart)
				}
			} else if len(started) > 0 {
				t.Fatalf("the pod started: %q", started)
			}
			msgs := slices.Clone(h.events.messages)
			if tt.wantEvent == "" && len(msgs) > 0 {
				t.Fatalf("events %q %q, want none", h.events.all(), msgs)
			}
			if tt.wantEvent != "" {
				if got := h.events.all(); !slices.Equal(got, []string{"Warning FailedMount web"}) || !strings.Contains(msgs[0], tt.wantEvent) {
					t.Fatalf("events %q %q, want one Warning FailedMount containing %q", got, msgs, tt.wantEvent)
				}
			}
			if tt.wantReason != "" {
				st := h.api.get(pod.UID).Status
				if st.Phase != corev1.PodPending || len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Waiting == nil || st.ContainerStatuses[0].State.Waiting.Reason != tt.wantReason {
					t.Fatalf("status %+v, want Pending with the container waiting in %s", st, tt.wantReason)
				}
			}
			inUse := vm.VolumesInUse()
			if tt.wantInUse != (len(inUse) == 1 && inUse[0] == volumes.UniqueName(volumes.DriverSharedDir, "vol-1")) {
				t.Fatalf("volumes in use %v", inUse)
			}
			// Once the pod is gone, its volume is no longer in use.
			h.m.Delete(h.api.get(pod.UID))
			if got := vm.VolumesInUse(); len(got) != 0 {
				t.Fatalf("volumes in use after the pod left: %v", got)
			}
		})
	}
}
