package defaults_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodeplane/nodeplane/internal/apiserver/defaults"
)

func TestPullPolicy(t *testing.T) {
	tests := []struct {
		name  string
		image string
		want  corev1.PullPolicy
	}{
		{"an untagged image is pulled always", "nginx", corev1.PullAlways},
		{"a latest image is pulled always", "nginx:latest", corev1.PullAlways},
		{"a tagged image is pulled if not present", "nginx:1.27", corev1.PullIfNotPresent},
		{"a digest-only image is pulled if not present", "nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullIfNotPresent},
		{"a registry with a port is not a tag", "registry.local:5000/team/app", corev1.PullAlways},
		{"a registry with a port and a tag uses the tag", "registry.local:5000/team/app:v2", corev1.PullIfNotPresent},
		{"an unparsable image is pulled if not present", "Nginx", corev1.PullIfNotPresent},
		{"an empty image is pulled if not present", "", corev1.PullIfNotPresent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: tt.image}}}}
			defaults.Pod(p)
			if got := p.Spec.Containers[0].ImagePullPolicy; got != tt.want {
				t.Errorf("imagePullPolicy for %q: got %s, want %s", tt.image, got, tt.want)
			}
		})
	}
}

func TestPod(t *testing.T) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "web",
				Image: "nginx:1.27",
				Ports: []corev1.ContainerPort{{ContainerPort: 80}},
				Env:   []corev1.EnvVar{{Name: "N", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1.5Gi"),
				}},
				LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
			}},
			Volumes: []corev1.Volume{
				{Name: "scratch"},
				{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}},
				{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
				{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
			},
		},
	}
	defaults.Pod(p)
	s, c := p.Spec, p.Spec.Containers[0]
	checks := []struct {
		name string
		ok   bool
	}{
		{"restartPolicy defaults to Always", s.RestartPolicy == corev1.RestartPolicyAlways},
		{"dnsPolicy defaults to ClusterFirst", s.DNSPolicy == corev1.DNSClusterFirst},
		{"terminationGracePeriodSeconds defaults to 30", s.TerminationGracePeriodSeconds != nil && *s.TerminationGracePeriodSeconds == 30},
		{"schedulerName defaults to default-scheduler", s.SchedulerName == corev1.DefaultSchedulerName},
		{"securityContext defaults to empty", s.SecurityContext != nil && equality.Semantic.DeepEqual(*s.SecurityContext, corev1.PodSecurityContext{})},
		{"enableServiceLinks defaults to true", s.EnableServiceLinks != nil && *s.EnableServiceLinks},
		{"priority is left to admission", s.Priority == nil},
		{"terminationMessagePath defaults to /dev/termination-log", c.TerminationMessagePath == "/dev/termination-log"},
		{"terminationMessagePolicy defaults to File", c.TerminationMessagePolicy == corev1.TerminationMessageReadFile},
		{"imagePullPolicy follows the tag", c.ImagePullPolicy == corev1.PullIfNotPresent},
		{"port protocol defaults to TCP", c.Ports[0].Protocol == corev1.ProtocolTCP},
		{"fieldRef apiVersion defaults to v1", c.Env[0].ValueFrom.FieldRef.APIVersion == "v1"},
		{"requests default to limits", c.Resources.Requests.Cpu().Equal(resource.MustParse("500m")) && c.Resources.Requests.Memory().Equal(resource.MustParse("1.5Gi"))},
		{"probe timings get kube's defaults", c.LivenessProbe.TimeoutSeconds == 1 && c.LivenessProbe.PeriodSeconds == 10 && c.LivenessProbe.SuccessThreshold == 1 && c.LivenessProbe.FailureThreshold == 3},
		{"an httpGet probe gets path / and scheme HTTP", c.LivenessProbe.HTTPGet.Path == "/" && c.LivenessProbe.HTTPGet.Scheme == corev1.URISchemeHTTP},
		{"a volume without a source becomes an emptyDir", s.Volumes[0].EmptyDir != nil},
		{"a hostPath type defaults to unset", s.Volumes[1].HostPath.Type != nil && *s.Volumes[1].HostPath.Type == corev1.HostPathUnset},
		{"a configMap volume mode defaults to 0644", *s.Volumes[2].ConfigMap.DefaultMode == 0644},
		{"a secret volume mode defaults to 0644", *s.Volumes[3].Secret.DefaultMode == 0644},
		{"no tolerations are added", s.Tolerations == nil},
	}
	for _, ck := range checks {
		t.Run(ck.name, func(t *testing.T) {
			if !ck.ok {
				t.Errorf("not defaulted: %+v", p.Spec)
			}
		})
	}
}

func TestPodDefaultingIsIdempotent(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	defaults.Pod(p)
	again := p.DeepCopy()
	defaults.Pod(again)
	if !equality.Semantic.DeepEqual(p, again) {
		t.Errorf("second defaulting changed the pod:\n%+v\n%+v", p, again)
	}
}

func TestPodHostNetworkDefaultsHostPorts(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "c", Image: "x", Ports: []corev1.ContainerPort{{ContainerPort: 9100}}}}}}
	defaults.Pod(p)
	if got := p.Spec.Containers[0].Ports[0].HostPort; got != 9100 {
		t.Errorf("hostPort: got %d, want 9100", got)
	}
}

func TestPodSpecForTemplatesSkipsPodOnlyDefaults(t *testing.T) {
	spec := &corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
	}}}}
	defaults.PodSpec(spec)
	if spec.EnableServiceLinks != nil || spec.Containers[0].Resources.Requests != nil {
		t.Errorf("template got pod-only defaults: %+v", spec)
	}
	if spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("template restartPolicy: got %q", spec.RestartPolicy)
	}
}

func TestNamespace(t *testing.T) {
	tests := []struct {
		name           string
		finalizers     []corev1.FinalizerName
		wantFinalizers []corev1.FinalizerName
	}{
		{"a new namespace gets the kubernetes finalizer", nil, []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		{"other finalizers are kept and kubernetes added", []corev1.FinalizerName{"example.com/x"}, []corev1.FinalizerName{"example.com/x", corev1.FinalizerKubernetes}},
		{"the kubernetes finalizer is not added twice", []corev1.FinalizerName{corev1.FinalizerKubernetes}, []corev1.FinalizerName{corev1.FinalizerKubernetes}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: corev1.NamespaceSpec{Finalizers: tt.finalizers}}
			defaults.NamespaceForCreate(ns)
			if !equality.Semantic.DeepEqual(ns.Spec.Finalizers, tt.wantFinalizers) {
				t.Errorf("finalizers: got %v, want %v", ns.Spec.Finalizers, tt.wantFinalizers)
			}
			if ns.Status.Phase != corev1.NamespaceActive || ns.Labels[corev1.LabelMetadataName] != "team-a" {
				t.Errorf("got phase %q labels %v", ns.Status.Phase, ns.Labels)
			}
		})
	}
	t.Run("plain defaulting does not bring back a removed finalizer", func(t *testing.T) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
		defaults.Namespace(ns)
		if ns.Spec.Finalizers != nil {
			t.Errorf("finalizers: got %v, want none", ns.Spec.Finalizers)
		}
	})
}

func TestNode(t *testing.T) {
	n := &corev1.Node{Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}
	defaults.Node(n)
	if !n.Status.Allocatable.Cpu().Equal(resource.MustParse("4")) {
		t.Errorf("allocatable should default to capacity, got %v", n.Status.Allocatable)
	}
	n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("3")
	if n.Status.Capacity.Cpu().Equal(resource.MustParse("3")) {
		t.Errorf("allocatable must be a copy of capacity, not an alias")
	}
}

func TestPersistentVolumes(t *testing.T) {
	pv := &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/d"}}}}
	defaults.PersistentVolume(pv)
	if pv.Status.Phase != corev1.VolumePending || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain ||
		*pv.Spec.VolumeMode != corev1.PersistentVolumeFilesystem || *pv.Spec.HostPath.Type != corev1.HostPathUnset {
		t.Errorf("PV not defaulted: %+v", pv)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	defaults.PersistentVolumeClaim(pvc)
	if pvc.Status.Phase != corev1.ClaimPending || *pvc.Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
		t.Errorf("PVC not defaulted: %+v", pvc)
	}
	va := &storagev1.VolumeAttachment{Spec: storagev1.VolumeAttachmentSpec{Source: storagev1.VolumeAttachmentSource{
		InlineVolumeSpec: &corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{RBD: &corev1.RBDPersistentVolumeSource{}}},
	}}}
	defaults.VolumeAttachment(va)
	if rbd := va.Spec.Source.InlineVolumeSpec.RBD; rbd.RBDPool != "rbd" || rbd.RadosUser != "admin" {
		t.Errorf("inline RBD not defaulted: %+v", rbd)
	}
}

func TestWorkloads(t *testing.T) {
	d := &appsv1.Deployment{}
	defaults.Deployment(d)
	ru := d.Spec.Strategy.RollingUpdate
	checks := []struct {
		name string
		ok   bool
	}{
		{"deployment replicas default to 1", *d.Spec.Replicas == 1},
		{"deployment strategy defaults to RollingUpdate 25%/25%", d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType &&
			*ru.MaxUnavailable == intstr.FromString("25%") && *ru.MaxSurge == intstr.FromString("25%")},
		{"deployment revisionHistoryLimit defaults to 10", *d.Spec.RevisionHistoryLimit == 10},
		{"deployment progressDeadlineSeconds defaults to 600", *d.Spec.ProgressDeadlineSeconds == 600},
		{"deployment template gets pod spec defaults", d.Spec.Template.Spec.RestartPolicy == corev1.RestartPolicyAlways},
	}
	rs := &appsv1.ReplicaSet{}
	defaults.ReplicaSet(rs)
	ds := &appsv1.DaemonSet{}
	defaults.DaemonSet(ds)
	dru := ds.Spec.UpdateStrategy.RollingUpdate
	checks = append(checks, []struct {
		name string
		ok   bool
	}{
		{"replica set replicas default to 1", *rs.Spec.Replicas == 1},
		{"daemon set strategy defaults to RollingUpdate 1/0", ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType &&
			*dru.MaxUnavailable == intstr.FromInt32(1) && *dru.MaxSurge == intstr.FromInt32(0)},
		{"daemon set revisionHistoryLimit defaults to 10", *ds.Spec.RevisionHistoryLimit == 10},
		{"a Recreate deployment gets no rolling update parameters", func() bool {
			r := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}}}
			defaults.Deployment(r)
			return r.Spec.Strategy.RollingUpdate == nil
		}()},
	}...)
	for _, ck := range checks {
		t.Run(ck.name, func(t *testing.T) {
			if !ck.ok {
				t.Error("not defaulted")
			}
		})
	}
}
