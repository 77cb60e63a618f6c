package apiserver

import (
	"net/http"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	statefulSetsPath        = "/apis/apps/v1/namespaces/default/statefulsets"
	controllerRevisionsPath = "/apis/apps/v1/namespaces/default/controllerrevisions"
)

func testStatefulSet(name string, mutate ...func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	ss := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name, "sleep"),
		},
	}
	for _, m := range mutate {
		m(ss)
	}
	return ss
}

// TestStatefulSets runs stateful sets and controller revisions through the
// real handler: defaults, scale, the status subresource keeping spec, and
// bad input refused with 422.
func TestStatefulSets(t *testing.T) {
	_, h := newTestServer(t, Config{})

	ss := decode[appsv1.StatefulSet](t, mustDo(t, h, admin, http.MethodPost, statefulSetsPath, testStatefulSet("web"), http.StatusCreated))
	t.Run("a stateful set is defaulted as upstream", func(t *testing.T) {
		s := ss.Spec
		if *s.Replicas != 1 || s.PodManagementPolicy != appsv1.OrderedReadyPodManagement || s.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType ||
			*s.UpdateStrategy.RollingUpdate.Partition != 0 || *s.RevisionHistoryLimit != 10 ||
			s.PersistentVolumeClaimRetentionPolicy.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
			t.Errorf("got spec %+v", s)
		}
	})

	t.Run("the scale subresource changes spec.replicas", func(t *testing.T) {
		resp := doRaw(t, h, http.MethodPatch, statefulSetsPath+"/web/scale", "application/merge-patch+json", "", `{"spec":{"replicas":3}}`)
		if resp.code != http.StatusOK {
			t.Fatalf("got %d %s, want 200", resp.code, resp.body)
		}
		if s := decode[autoscalingv1.Scale](t, resp); s.Spec.Replicas != 3 || s.Status.Selector != "app=web" {
			t.Errorf("got %+v", s)
		}
	})

	t.Run("a status write cannot change the spec", func(t *testing.T) {
		got := decode[appsv1.StatefulSet](t, mustDo(t, h, admin, http.MethodPatch, statefulSetsPath+"/web/status",
			map[string]any{"spec": map[string]any{"replicas": 9}, "status": map[string]any{"replicas": 2, "readyReplicas": 1}}, http.StatusOK))
		if *got.Spec.Replicas != 3 || got.Status.Replicas != 2 {
			t.Errorf("got replicas %d status %+v", *got.Spec.Replicas, got.Status)
		}
	})

	t.Run("a container may mount a claim template by its name", func(t *testing.T) {
		ok := testStatefulSet("claims", func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}}
			s.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		})
		mustDo(t, h, admin, http.MethodPost, statefulSetsPath, ok, http.StatusCreated)
		// A mount naming neither a pod volume nor a claim template is refused.
		ok.Name = "claims-2"
		ok.Spec.Template.Spec.Containers[0].VolumeMounts[0].Name = "nothing"
		mustDo(t, h, admin, http.MethodPost, statefulSetsPath, ok, http.StatusUnprocessableEntity)
	})

	bad := []struct {
		name string
		ss   *appsv1.StatefulSet
	}{
		{"an unknown pod management policy", testStatefulSet("a", func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = "Sometimes" })},
		{"a negative partition", testStatefulSet("b", func(s *appsv1.StatefulSet) {
			p := int32(-1)
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: &p}}
		})},
		{"two claim templates with one name", testStatefulSet("c", func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}, {ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
		})},
		{"a selector that does not match the template", testStatefulSet("d", func(s *appsv1.StatefulSet) { s.Spec.Selector.MatchLabels = map[string]string{"app": "other"} })},
		{"an unknown retention policy", testStatefulSet("e", func(s *appsv1.StatefulSet) {
			s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: "Shred"}
		})},
		{"a template container without an image", testStatefulSet("f", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "" })},
		{"a template with one volume name used twice", testStatefulSet("g", func(s *appsv1.StatefulSet) {
			v := corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
			s.Spec.Template.Spec.Volumes = append(s.Spec.Template.Spec.Volumes, v, v)
		})},
		{"a claim template with an invalid name", testStatefulSet("h", func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "Data_1"}}}
		})},
	}
	for _, tt := range bad {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			mustDo(t, h, admin, http.MethodPost, statefulSetsPath, tt.ss, http.StatusUnprocessableEntity)
		})
	}

	t.Run("a change of serviceName is refused", func(t *testing.T) {
		mustDo(t, h, admin, http.MethodPatch, statefulSetsPath+"/web", map[string]any{"spec": map[string]any{"serviceName": "x"}}, http.StatusUnprocessableEntity)
	})

	t.Run("a controller revision's data is immutable", func(t *testing.T) {
		cr := &appsv1.ControllerRevision{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ControllerRevision"},
			ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default"},
			Revision:   1,
		}
		cr.Data.Raw = []byte(`{"a":1}`)
		mustDo(t, h, admin, http.MethodPost, controllerRevisionsPath, cr, http.StatusCreated)
		mustDo(t, h, admin, http.MethodPatch, controllerRevisionsPath+"/web-1", map[string]any{"data": map[string]any{"a": 2}}, http.StatusUnprocessableEntity)
		mustDo(t, h, admin, http.MethodPatch, controllerRevisionsPath+"/web-1", map[string]any{"revision": -1}, http.StatusUnprocessableEntity)
	})
}
