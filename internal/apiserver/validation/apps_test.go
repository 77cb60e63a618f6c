package validation_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodeplane/nodeplane/internal/apiserver/defaults"
	"github.com/nodeplane/nodeplane/internal/apiserver/validation"
)

func template() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}},
	}
}

func validDeployment() *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: template(),
		},
	}
	defaults.Deployment(d)
	return d
}

func TestDeployment(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(d *appsv1.Deployment)
		want   []want
	}{
		{"a defaulted deployment is valid", func(*appsv1.Deployment) {}, nil},
		{"negative replicas are invalid", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr(int32(-1)) }, []want{invalid("spec.replicas")}},
		{"a selector is required", func(d *appsv1.Deployment) { d.Spec.Selector = nil },
			[]want{required("spec.selector"), invalid("spec.template.metadata.labels")}},
		{"an empty selector is invalid", func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} }, []want{invalid("spec.selector")}},
		{"a selector that does not match the template labels is invalid", func(d *appsv1.Deployment) {
			d.Spec.Selector.MatchLabels["app"] = "api"
		}, []want{invalid("spec.template.metadata.labels")}},
		{"the template must restart Always", func(d *appsv1.Deployment) { d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever }, []want{notSupported("spec.template.spec.restartPolicy")}},
		{"the template is a valid pod spec", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "" }, []want{required("spec.template.spec.containers[0].image")}},
		{"template labels are validated (at kube's spec.template.labels)", func(d *appsv1.Deployment) {
			d.Spec.Template.Labels["bad key"] = "x"
		}, []want{invalid("spec.template.labels")}},
		{"a template with hostNetwork may leave host ports unset", func(d *appsv1.Deployment) { d.Spec.Template.Spec.HostNetwork = true }, nil},
		{"an unknown strategy is rejected", func(d *appsv1.Deployment) { d.Spec.Strategy = appsv1.DeploymentStrategy{Type: "BlueGreen"} }, []want{notSupported("spec.strategy")}},
		{"Recreate may not carry rolling update parameters", func(d *appsv1.Deployment) { d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType }, []want{forbidden("spec.strategy.rollingUpdate")}},
		{"maxSurge and maxUnavailable may not both be 0", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxSurge = ptr(intstr.FromInt32(0))
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr(intstr.FromString("0%"))
		}, []want{invalid("spec.strategy.rollingUpdate.maxUnavailable")}},
		{"maxUnavailable may not exceed 100%", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr(intstr.FromString("150%"))
		}, []want{invalid("spec.strategy.rollingUpdate.maxUnavailable")}},
		{"maxSurge must be a percentage or a non-negative integer", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxSurge = ptr(intstr.FromString("lots"))
		}, []want{invalid("spec.strategy.rollingUpdate.maxSurge")}},
		{"progressDeadlineSeconds must exceed minReadySeconds", func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 600 }, []want{invalid("spec.progressDeadlineSeconds")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := validDeployment()
			tt.mutate(d)
			checkErrs(t, validation.Deployment(d), tt.want...)
		})
	}
}

func TestDeploymentUpdate(t *testing.T) {
	old := validDeployment()
	old.ResourceVersion = "3"

	scaled := old.DeepCopy()
	scaled.Spec.Replicas = ptr(int32(5))
	scaled.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
	checkErrs(t, validation.DeploymentUpdate(scaled, old))

	reselected := old.DeepCopy()
	reselected.Spec.Selector.MatchLabels["tier"] = "frontend"
	reselected.Spec.Template.Labels["tier"] = "frontend"
	checkErrs(t, validation.DeploymentUpdate(reselected, old), invalid("spec.selector"))
}

func TestDeploymentStatusUpdate(t *testing.T) {
	old := validDeployment()
	old.ResourceVersion = "3"
	old.Status.CollisionCount = ptr(int32(2))
	d := old.DeepCopy()
	d.Status = appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 3, AvailableReplicas: 1, CollisionCount: ptr(int32(1))}
	checkErrs(t, validation.DeploymentStatusUpdate(d, old), invalid("status.readyReplicas"), invalid("status.collisionCount"))
}

func TestReplicaSet(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(rs *appsv1.ReplicaSet)
		want   []want
	}{
		{"a defaulted replica set is valid", func(*appsv1.ReplicaSet) {}, nil},
		{"negative replicas are invalid", func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = ptr(int32(-2)) }, []want{invalid("spec.replicas")}},
		{"the template may not set an active deadline", func(rs *appsv1.ReplicaSet) {
			rs.Spec.Template.Spec.ActiveDeadlineSeconds = ptr(int64(10))
		}, []want{forbidden("spec.template.spec.activeDeadlineSeconds")}},
		{"the selector must match the template", func(rs *appsv1.ReplicaSet) {
			rs.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}}}}
		}, []want{invalid("spec.template.metadata.labels")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := &appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "default"},
				Spec:       appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: template()},
			}
			defaults.ReplicaSet(rs)
			tt.mutate(rs)
			checkErrs(t, validation.ReplicaSet(rs), tt.want...)
		})
	}
}

func TestReplicaSetUpdateKeepsSelector(t *testing.T) {
	old := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "default", ResourceVersion: "1"},
		Spec:       appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: template()},
	}
	defaults.ReplicaSet(old)
	rs := old.DeepCopy()
	rs.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "v": "2"}}
	rs.Spec.Template.Labels["v"] = "2"
	checkErrs(t, validation.ReplicaSetUpdate(rs, old), invalid("spec.selector"))

	status := old.DeepCopy()
	status.Status = appsv1.ReplicaSetStatus{Replicas: 1, FullyLabeledReplicas: 2}
	checkErrs(t, validation.ReplicaSetStatusUpdate(status, old), invalid("status.fullyLabeledReplicas"))
}

func TestDaemonSet(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(ds *appsv1.DaemonSet)
		want   []want
	}{
		{"a defaulted daemon set is valid", func(*appsv1.DaemonSet) {}, nil},
		{"a missing selector never matches the template", func(ds *appsv1.DaemonSet) { ds.Spec.Selector = nil }, []want{invalid("spec.template.metadata.labels")}},
		{"an empty selector is invalid", func(ds *appsv1.DaemonSet) { ds.Spec.Selector = &metav1.LabelSelector{} }, []want{invalid("spec.selector")}},
		{"an unknown update strategy is rejected", func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: "Sometimes"}
		}, []want{notSupported("spec.updateStrategy")}},
		{"maxSurge and maxUnavailable may not both be set", func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = ptr(intstr.FromInt32(1))
		}, []want{invalid("spec.updateStrategy.rollingUpdate.maxSurge")}},
		{"maxSurge and maxUnavailable may not both be 0", func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr(intstr.FromInt32(0))
		}, []want{required("spec.updateStrategy.rollingUpdate.maxUnavailable")}},
		{"OnDelete is valid", func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
		}, nil},
		{"the template may not set an active deadline", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.ActiveDeadlineSeconds = ptr(int64(10))
		}, []want{forbidden("spec.template.spec.activeDeadlineSeconds")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := &appsv1.DaemonSet{
				ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system"},
				Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: template()},
			}
			defaults.DaemonSet(ds)
			tt.mutate(ds)
			checkErrs(t, validation.DaemonSet(ds), tt.want...)
		})
	}
}

func TestDaemonSetUpdate(t *testing.T) {
	old := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system", ResourceVersion: "1"},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: template()},
	}
	defaults.DaemonSet(old)
	ds := old.DeepCopy()
	ds.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
	checkErrs(t, validation.DaemonSetUpdate(ds, old))
	ds.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "x": "y"}}
	ds.Spec.Template.Labels["x"] = "y"
	checkErrs(t, validation.DaemonSetUpdate(ds, old), invalid("spec.selector"))

	status := old.DeepCopy()
	status.Status.NumberReady = -1
	checkErrs(t, validation.DaemonSetStatusUpdate(status, old), invalid("status.numberReady"))
}

func TestGenericObjectMeta(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a/b", Namespace: "default"}}
	checkErrs(t, validation.GenericObjectMeta(cm, true), invalid("metadata.name"))
	ok := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "Any_Name.Works", Namespace: "default"}}
	checkErrs(t, validation.GenericObjectMeta(ok, true))
}
