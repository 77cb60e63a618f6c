package validation_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/apiserver/validation"
)

func storedPod() *corev1.Pod {
	p := validPod()
	p.ResourceVersion, p.UID = "7", "uid-web-0"
	return p
}

func TestPodUpdate(t *testing.T) {
	tests := []struct {
		name   string
		old    func(p *corev1.Pod)
		mutate func(p *corev1.Pod)
		want   []want
	}{
		{"changing a container image is allowed", nil, func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:1.28" }, nil},
		{"changing an init container image is allowed", nil, func(p *corev1.Pod) { p.Spec.InitContainers[0].Image = "busybox:1.37" }, nil},
		{"changing labels and annotations is allowed", nil, func(p *corev1.Pod) {
			p.Labels["tier"] = "frontend"
			p.Annotations = map[string]string{"note": "x"}
		}, nil},
		{"a pod update that changes the restart policy is forbidden", nil, func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }, []want{forbidden("spec")}},
		{"a pod update that changes an env var is forbidden", nil, func(p *corev1.Pod) { p.Spec.Containers[0].Env[0].Value = "dev" }, []want{forbidden("spec")}},
		{"a pod update may not set nodeName; binding does", nil, func(p *corev1.Pod) { p.Spec.NodeName = "node-1" }, []want{forbidden("spec")}},
		{"a pod update may not change nodeName once set", func(p *corev1.Pod) { p.Spec.NodeName = "node-1" }, func(p *corev1.Pod) { p.Spec.NodeName = "node-2" }, []want{forbidden("spec")}},
		{"a pod update may not add containers", nil, func(p *corev1.Pod) {
			c := p.Spec.Containers[0].DeepCopy()
			c.Name, c.Ports = "extra", nil
			p.Spec.Containers = append(p.Spec.Containers, *c)
		}, []want{forbidden("spec.containers")}},
		{"an updated image may not be empty", nil, func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" },
			[]want{required("spec.containers[0].image"), required("spec.containers[0].image")}},
		{"activeDeadlineSeconds may be set", nil, func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(60)) }, nil},
		{"activeDeadlineSeconds may be lowered", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(60)) },
			func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(30)) }, nil},
		{"activeDeadlineSeconds may not be raised", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(60)) },
			func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(90)) }, []want{invalid("spec.activeDeadlineSeconds")}},
		{"activeDeadlineSeconds may not be cleared", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(60)) },
			func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = nil }, []want{invalid("spec.activeDeadlineSeconds")}},
		{"a toleration may be added", nil, func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "web", Effect: corev1.TaintEffectNoSchedule})
		}, nil},
		{"an existing toleration's seconds may change", nil, func(p *corev1.Pod) { p.Spec.Tolerations[0].TolerationSeconds = ptr(int64(10)) }, nil},
		{"an existing toleration may not be removed", nil, func(p *corev1.Pod) { p.Spec.Tolerations = nil }, []want{forbidden("spec.tolerations")}},
		{"a scheduling gate may be removed", func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/a"}, {Name: "example.com/b"}}
		}, func(p *corev1.Pod) { p.Spec.SchedulingGates = p.Spec.SchedulingGates[1:] }, nil},
		{"a scheduling gate may not be added", nil, func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/a"}}
		}, []want{forbidden("spec.schedulingGates[0].name")}},
		{"a gated pod may gain node selector entries", func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/a"}}
		}, func(p *corev1.Pod) { p.Spec.NodeSelector["zone"] = "a" }, nil},
		{"a gated pod may not change a node selector entry", func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/a"}}
		}, func(p *corev1.Pod) { p.Spec.NodeSelector["kubernetes.io/os"] = "windows" }, []want{invalid("spec.nodeSelector")}},
		{"terminationGracePeriodSeconds may go from negative to 1", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(int64(-1)) },
			func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(int64(1)) }, nil},
		{"the namespace cannot change", nil, func(p *corev1.Pod) { p.Namespace = "other" }, []want{invalid("metadata.namespace")}},
		{"the mirror pod annotation may not be added", nil, func(p *corev1.Pod) {
			p.Spec.NodeName = ""
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
		}, []want{forbidden("metadata.annotations[kubernetes.io/config.mirror]"), invalid("metadata.annotations[kubernetes.io/config.mirror]"), invalid("metadata.annotations[kubernetes.io/config.mirror]")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := storedPod()
			if tt.old != nil {
				tt.old(old)
			}
			p := old.DeepCopy()
			tt.mutate(p)
			checkErrs(t, validation.PodUpdate(p, old), tt.want...)
		})
	}
}

func TestPodUpdateForbiddenMessageIsKubes(t *testing.T) {
	old := storedPod()
	p := old.DeepCopy()
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	errs := validation.PodUpdate(p, old)
	const wantPrefix = "pod updates may not change fields other than `spec.containers[*].image`," +
		"`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`," +
		"`spec.tolerations` (only additions to existing tolerations)," +
		"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n"
	checkDetail(t, errs, "spec", wantPrefix)
	if len(errs) == 1 && !strings.Contains(errs[0].Detail, "RestartPolicy") {
		t.Errorf("want the diff to name the changed field, got %q", errs[0].Detail)
	}
}

func TestPodStatusUpdate(t *testing.T) {
	tests := []struct {
		name   string
		old    func(p *corev1.Pod)
		mutate func(p *corev1.Pod)
		want   []want
	}{
		{"a running status with pod IPs is valid", nil, func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.PodIP, p.Status.PodIPs = "10.244.1.5", []corev1.PodIP{{IP: "10.244.1.5"}, {IP: "fd00::5"}}
			p.Status.HostIP, p.Status.HostIPs = "10.0.0.1", []corev1.HostIP{{IP: "10.0.0.1"}}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: "example.com/ready", Status: corev1.ConditionTrue}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", Ready: true}}
		}, nil},
		{"an invalid pod IP is rejected", nil, func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: "10.244.1.300"}} }, []want{invalid("status.podIPs[0]")}},
		{"two IPv4 pod IPs are rejected", nil, func(p *corev1.Pod) {
			p.Status.PodIPs = []corev1.PodIP{{IP: "10.244.1.5"}, {IP: "10.244.1.6"}}
		}, []want{invalid("status.podIPs")}},
		{"hostIPs must start with hostIP", nil, func(p *corev1.Pod) {
			p.Status.HostIP, p.Status.HostIPs = "10.0.0.1", []corev1.HostIP{{IP: "10.0.0.2"}}
		}, []want{invalid("status.hostIPs[0].ip")}},
		{"a custom condition type must be a qualified name (reported under metadata, as kube does)", nil, func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: "not valid", Status: corev1.ConditionTrue}}
		}, []want{invalid("metadata.conditions[0].Type")}},
		{"a status update may not change nodeName", nil, func(p *corev1.Pod) { p.Spec.NodeName = "node-1" }, []want{forbidden("status.nodeName")}},
		{"qosClass is immutable", func(p *corev1.Pod) { p.Status.QOSClass = corev1.PodQOSBurstable },
			func(p *corev1.Pod) { p.Status.QOSClass = corev1.PodQOSGuaranteed }, []want{invalid("status.qosClass")}},
		{"a terminated container of a Never pod stays terminated", func(p *corev1.Pod) {
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}}
		}, func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		}, []want{forbidden("status.containerStatuses[0].state")}},
		{"a failed container of an OnFailure pod may restart", func(p *corev1.Pod) {
			p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}
		}, func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		}, nil},
		{"a nominated node name must be a DNS subdomain", nil, func(p *corev1.Pod) { p.Status.NominatedNodeName = "Node_1" }, []want{invalid("status.nominatedNodeName")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := storedPod()
			if tt.old != nil {
				tt.old(old)
			}
			p := old.DeepCopy()
			tt.mutate(p)
			checkErrs(t, validation.PodStatusUpdate(p, old), tt.want...)
		})
	}
}

func TestPodEphemeralContainersUpdate(t *testing.T) {
	debug := corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "debug", Image: "busybox", ImagePullPolicy: corev1.PullAlways,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile, TerminationMessagePath: "/dev/termination-log",
	}, TargetContainerName: "web"}
	tests := []struct {
		name   string
		old    []corev1.EphemeralContainer
		mutate func(p *corev1.Pod)
		want   []want
	}{
		{"an ephemeral container may be added", nil, func(p *corev1.Pod) { p.Spec.EphemeralContainers = []corev1.EphemeralContainer{debug} }, nil},
		{"an ephemeral container may not target an unknown container", nil, func(p *corev1.Pod) {
			d := debug
			d.TargetContainerName = "nope"
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{d}
		}, []want{notFound("spec.ephemeralContainers[0].targetContainerName")}},
		{"an ephemeral container may not have ports", nil, func(p *corev1.Pod) {
			d := debug
			d.Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}}
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{d}
		}, []want{forbidden("spec.ephemeralContainers[0].ports")}},
		{"an existing ephemeral container may not be removed", []corev1.EphemeralContainer{debug}, func(p *corev1.Pod) { p.Spec.EphemeralContainers = nil }, []want{forbidden("spec.ephemeralContainers")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := storedPod()
			old.Spec.EphemeralContainers = tt.old
			p := old.DeepCopy()
			tt.mutate(p)
			checkErrs(t, validation.PodEphemeralContainersUpdate(p, old), tt.want...)
		})
	}
}

func TestEviction(t *testing.T) {
	tests := []struct {
		name string
		e    *policyv1.Eviction
		want []want
	}{
		{"an eviction naming its pod is valid", &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"}}, nil},
		{"an eviction needs the pod name", &policyv1.Eviction{}, []want{required("metadata.name")}},
		{"an eviction's delete options are validated", &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Name: "web-0"},
			DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0)), OrphanDependents: ptr(true), PropagationPolicy: ptr(metav1.DeletePropagationForeground)},
		}, []want{invalid("propagationPolicy")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkErrs(t, validation.Eviction(tt.e), tt.want...) })
	}
}
