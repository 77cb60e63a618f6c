package validation_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodeplane/nodeplane/internal/apiserver/defaults"
	"github.com/nodeplane/nodeplane/internal/apiserver/validation"
)

// validPod is a defaulted pod that uses a bit of everything.
func validPod() *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "web",
				Image: "nginx:1.27",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}},
				Env: []corev1.EnvVar{
					{Name: "MODE", Value: "prod"},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				},
				VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "config", MountPath: "/etc/web"}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}},
			}},
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox", Command: []string{"true"}}},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web"}}}},
				{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}},
				{Name: "claim", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "web-data"}}},
			},
			NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
			},
		},
	}
	defaults.Pod(p)
	return p
}

func TestPod(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *corev1.Pod)
		want   []want
	}{
		{"a complete pod is valid", func(*corev1.Pod) {}, nil},
		{"a pod needs a namespace", func(p *corev1.Pod) { p.Namespace = "" }, []want{required("metadata.namespace")}},
		{"a pod name must be a DNS subdomain", func(p *corev1.Pod) { p.Name = "Web_0" }, []want{invalid("metadata.name")}},
		{"a pod needs containers", func(p *corev1.Pod) { p.Spec.Containers = nil }, []want{required("spec.containers")}},
		{"a container needs an image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" }, []want{required("spec.containers[0].image")}},
		{"an image with surrounding spaces is invalid", func(p *corev1.Pod) { p.Spec.Containers[0].Image = " nginx" }, []want{invalid("spec.containers[0].image")}},
		{"a container name must be a DNS label", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "Web" }, []want{invalid("spec.containers[0].name")}},
		{"container names are unique across containers and init containers", func(p *corev1.Pod) {
			p.Spec.InitContainers[0].Name = "web"
		}, []want{duplicate("spec.initContainers[0].name")}},
		{"ephemeral containers cannot be set on create", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debug", Image: "busybox", ImagePullPolicy: corev1.PullAlways, TerminationMessagePolicy: corev1.TerminationMessageReadFile}}}
		}, []want{forbidden("spec.ephemeralContainers")}},
		{"an ephemeral container may not reuse a container name", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "web", Image: "busybox", ImagePullPolicy: corev1.PullAlways, TerminationMessagePolicy: corev1.TerminationMessageReadFile}}}
		}, []want{forbidden("spec.ephemeralContainers"), duplicate("spec.ephemeralContainers[0].name")}},
		{"a container port of 0 is required", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 0 }, []want{required("spec.containers[0].ports[0].containerPort")}},
		{"a container port above 65535 is invalid", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 70000 }, []want{invalid("spec.containers[0].ports[0].containerPort")}},
		{"a port protocol must be TCP, UDP or SCTP", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].Protocol = "HTTP" }, []want{notSupported("spec.containers[0].ports[0].protocol")}},
		{"port names are unique within a container", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{Name: "http", ContainerPort: 81, Protocol: corev1.ProtocolTCP})
		}, []want{duplicate("spec.containers[0].ports[1].name")}},
		{"two containers may not claim the same host port", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports[0].HostPort = 8080
			c := p.Spec.Containers[0].DeepCopy()
			c.Name = "sidecar"
			c.ReadinessProbe = nil
			p.Spec.Containers = append(p.Spec.Containers, *c)
		}, []want{duplicate("spec.containers[1].ports[0].hostPort")}},
		{"an env var name with '=' is invalid", func(p *corev1.Pod) { p.Spec.Containers[0].Env[0].Name = "A=B" }, []want{invalid("spec.containers[0].env[0].name")}},
		{"an env var name with dots and dashes is valid", func(p *corev1.Pod) { p.Spec.Containers[0].Env[0].Name = "my.env-name" }, nil},
		{"an env var with both a value and a source is invalid", func(p *corev1.Pod) { p.Spec.Containers[0].Env[1].Value = "x" }, []want{invalid("spec.containers[0].env[1].valueFrom")}},
		{"an env var may not read an unknown pod field", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env[1].ValueFrom.FieldRef.FieldPath = "spec.hostname"
		}, []want{invalid("spec.containers[0].env[1].valueFrom.fieldRef.fieldPath")}},
		{"an env var may not read all labels at once", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env[1].ValueFrom.FieldRef.FieldPath = "metadata.labels"
		}, []want{notSupported("spec.containers[0].env[1].valueFrom.fieldRef.fieldPath")}},
		{"an env var may read one label", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env[1].ValueFrom.FieldRef.FieldPath = "metadata.labels['app']"
		}, nil},
		{"a request above the limit is invalid", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
		}, []want{invalid("spec.containers[0].resources.requests")}},
		{"a negative request is invalid", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("-1")
		}, []want{invalid("spec.containers[0].resources.requests[memory]")}},
		{"an unknown unprefixed resource name is invalid", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits["gpu"] = resource.MustParse("1")
			// kube reports both the generic and the container-specific rule.
		}, []want{invalid("spec.containers[0].resources.limits[gpu]"), invalid("spec.containers[0].resources.limits[gpu]")}},
		{"an extended resource request must equal its limit", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits["example.com/gpu"] = resource.MustParse("2")
			p.Spec.Containers[0].Resources.Requests["example.com/gpu"] = resource.MustParse("1")
		}, []want{invalid("spec.containers[0].resources.requests")}},
		{"restartPolicy must be Always, OnFailure or Never", func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, []want{notSupported("spec.restartPolicy")}},
		{"dnsPolicy must be a known value", func(p *corev1.Pod) { p.Spec.DNSPolicy = "Google" }, []want{notSupported("spec.dnsPolicy")}},
		{"dnsPolicy None needs a dnsConfig", func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSNone }, []want{required("spec.dnsConfig")}},
		{"terminationGracePeriodSeconds is required after defaulting", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = nil }, []want{required("spec.terminationGracePeriodSeconds")}},
		{"activeDeadlineSeconds of zero is invalid", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(0)) }, []want{invalid("spec.activeDeadlineSeconds")}},
		{"nodeSelector keys must be label keys", func(p *corev1.Pod) { p.Spec.NodeSelector["bad key"] = "x" }, []want{invalid("spec.nodeSelector")}},
		{"nodeName must be a DNS subdomain", func(p *corev1.Pod) { p.Spec.NodeName = "Node_1" }, []want{invalid("spec.nodeName")}},
		{"nodeName cannot be set while scheduling gates remain", func(p *corev1.Pod) {
			p.Spec.NodeName = "node-1"
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
		}, []want{forbidden("spec.nodeName")}},
		{"a toleration with Exists and a value is invalid", func(p *corev1.Pod) {
			p.Spec.Tolerations[0].Value = "x"
		}, []want{invalid("spec.tolerations[0].operator")}},
		{"a toleration with an empty key must use Exists", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpEqual, Value: "x"}}
		}, []want{invalid("spec.tolerations[0].operator")}},
		{"a toleration with an empty key and Exists matches everything", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}, nil},
		{"a toleration with an unknown operator is rejected", func(p *corev1.Pod) { p.Spec.Tolerations[0].Operator = "In" }, []want{notSupported("spec.tolerations[0].operator")}},
		{"a toleration with an unknown effect is rejected", func(p *corev1.Pod) {
			p.Spec.Tolerations[0].Effect = "NoWay"
			p.Spec.Tolerations[0].TolerationSeconds = nil
		}, []want{notSupported("spec.tolerations[0].effect")}},
		{"tolerationSeconds needs the NoExecute effect", func(p *corev1.Pod) {
			p.Spec.Tolerations[0].Effect = corev1.TaintEffectNoSchedule
		}, []want{invalid("spec.tolerations[0].effect")}},
		{"a required node affinity needs terms", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}}}
		}, []want{required("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms")}},
		{"a node selector requirement with an unknown operator is invalid", func(p *corev1.Pod) {
			p.Spec.Affinity = nodeAffinity(corev1.NodeSelectorRequirement{Key: "zone", Operator: "Like", Values: []string{"a"}})
		}, []want{invalid("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator")}},
		{"In needs values", func(p *corev1.Pod) {
			p.Spec.Affinity = nodeAffinity(corev1.NodeSelectorRequirement{Key: "zone", Operator: corev1.NodeSelectorOpIn})
		}, []want{required("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values")}},
		{"Exists takes no values", func(p *corev1.Pod) {
			p.Spec.Affinity = nodeAffinity(corev1.NodeSelectorRequirement{Key: "zone", Operator: corev1.NodeSelectorOpExists, Values: []string{"a"}})
		}, []want{forbidden("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values")}},
		{"Gt takes exactly one value", func(p *corev1.Pod) {
			p.Spec.Affinity = nodeAffinity(corev1.NodeSelectorRequirement{Key: "cores", Operator: corev1.NodeSelectorOpGt, Values: []string{"1", "2"}})
		}, []want{required("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values")}},
		{"a preferred term weight must be 1-100", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 0}}}}
		}, []want{invalid("spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight")}},
		{"a pod affinity term needs a topology key", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{}}}}
		}, []want{required("spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"),
			invalid("spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"),
			invalid("spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey")}},
		// Like kube, an invalid volume is not mountable, so mounts of it
		// are reported as not found too.
		{"volume names are unique", func(p *corev1.Pod) { p.Spec.Volumes[1].Name = "data" },
			[]want{duplicate("spec.volumes[1].name"), notFound("spec.containers[0].volumeMounts[1].name")}},
		{"a volume name must be a DNS label", func(p *corev1.Pod) {
			p.Spec.Volumes[2].Name = "Host"
		}, []want{invalid("spec.volumes[2].name")}},
		{"a volume may have only one source", func(p *corev1.Pod) {
			p.Spec.Volumes[2].EmptyDir = &corev1.EmptyDirVolumeSource{}
		}, []want{forbidden("spec.volumes[2].hostPath")}},
		{"a volume needs a source", func(p *corev1.Pod) { p.Spec.Volumes[0].EmptyDir = nil }, []want{required("spec.volumes[0]"), notFound("spec.containers[0].volumeMounts[0].name")}},
		{"a hostPath needs a path", func(p *corev1.Pod) { p.Spec.Volumes[2].HostPath.Path = "" }, []want{required("spec.volumes[2].hostPath.path")}},
		{"a hostPath may not climb out with ..", func(p *corev1.Pod) { p.Spec.Volumes[2].HostPath.Path = "/var/../etc" }, []want{invalid("spec.volumes[2].hostPath.path")}},
		{"a persistentVolumeClaim volume needs a claim name", func(p *corev1.Pod) {
			p.Spec.Volumes[3].PersistentVolumeClaim.ClaimName = ""
		}, []want{required("spec.volumes[3].persistentVolumeClaim.claimName")}},
		{"a configMap volume mode above 0777 is invalid", func(p *corev1.Pod) {
			p.Spec.Volumes[1].ConfigMap.DefaultMode = ptr(int32(01000))
		}, []want{invalid("spec.volumes[1].configMap.defaultMode"), notFound("spec.containers[0].volumeMounts[1].name")}},
		{"a secret volume needs a secret name", func(p *corev1.Pod) {
			p.Spec.Volumes[1] = corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{DefaultMode: ptr(int32(0644))}}}
		}, []want{required("spec.volumes[1].secret.secretName"), notFound("spec.containers[0].volumeMounts[1].name")}},
		{"a projected token needs a service account", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr(int32(0644)),
				Sources:     []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr(int64(3600))}}},
			}}})
		}, []want{forbidden("spec.volumes[4].projected.sources[0].serviceAccountToken")}},
		{"a mount must name a volume", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].Name = "nope" }, []want{notFound("spec.containers[0].volumeMounts[0].name")}},
		{"mount paths are unique", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[1].MountPath = "/data" }, []want{invalid("spec.containers[0].volumeMounts[1].mountPath")}},
		{"a readiness probe needs a handler", func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe.HTTPGet = nil
		}, []want{required("spec.containers[0].readinessProbe")}},
		{"a liveness probe success threshold must be 1", func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}, SuccessThreshold: 2}
		}, []want{invalid("spec.containers[0].livenessProbe.successThreshold")}},
		{"an init container without restartPolicy Always may not have probes", func(p *corev1.Pod) {
			p.Spec.InitContainers[0].ReadinessProbe = p.Spec.Containers[0].ReadinessProbe.DeepCopy()
		}, []want{forbidden("spec.initContainers[0].readinessProbe")}},
		{"a sidecar init container may have probes", func(p *corev1.Pod) {
			p.Spec.InitContainers[0].RestartPolicy = ptr(corev1.ContainerRestartPolicyAlways)
			p.Spec.InitContainers[0].StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, SuccessThreshold: 1}
		}, nil},
		{"a regular container may not set a restart policy", func(p *corev1.Pod) {
			p.Spec.Containers[0].RestartPolicy = ptr(corev1.ContainerRestartPolicyAlways)
		}, []want{forbidden("spec.containers[0].restartPolicy")}},
		{"runAsUser must be a valid uid", func(p *corev1.Pod) {
			p.Spec.SecurityContext.RunAsUser = ptr(int64(-1))
		}, []want{invalid("spec.securityContext.runAsUser")}},
		{"privileged with allowPrivilegeEscalation false is invalid", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr(true), AllowPrivilegeEscalation: ptr(false)}
		}, []want{invalid("spec.containers[0].securityContext")}},
		{"a seccomp profile needs a type", func(p *corev1.Pod) {
			p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{}
		}, []want{required("spec.securityContext.seccompProfile.type")}},
		{"with hostNetwork the host port must equal the container port", func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports[0].HostPort = 8080
		}, []want{invalid("spec.containers[0].ports[0].hostPort")}},
		{"an unknown OS is rejected", func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: "plan9"} }, []want{notSupported("spec.os")}},
		{"overhead quantities must not be negative", func(p *corev1.Pod) {
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-10m")}
		}, []want{invalid("spec.overhead.limits[cpu]")}},
		{"priorityClassName must be a DNS subdomain", func(p *corev1.Pod) { p.Spec.PriorityClassName = "High_Priority" }, []want{invalid("spec.priorityClassName")}},
		{"a mirror pod must name its node", func(p *corev1.Pod) {
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
		}, []want{invalid("metadata.annotations[kubernetes.io/config.mirror]")}},
		{"a pod deletion cost must be a 32-bit integer", func(p *corev1.Pod) {
			p.Annotations = map[string]string{corev1.PodDeletionCost: "+10"}
		}, []want{invalid("metadata.annotations[controller.kubernetes.io/pod-deletion-cost]")}},
		{"topology spread needs a positive maxSkew", func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 0, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule}}
		}, []want{invalid("spec.topologySpreadConstraints[0].maxSkew")}},
		{"scheduling gates are unique", func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/a"}, {Name: "example.com/a"}}
		}, []want{duplicate("spec.schedulingGates[1]")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPod()
			tt.mutate(p)
			checkErrs(t, validation.Pod(p), tt.want...)
		})
	}
}

func nodeAffinity(req corev1.NodeSelectorRequirement) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req}}},
		},
	}}
}

func TestBinding(t *testing.T) {
	tests := []struct {
		name   string
		target corev1.ObjectReference
		want   []want
	}{
		{"a binding to a named node is valid", corev1.ObjectReference{Kind: "Node", Name: "node-1"}, nil},
		{"a binding may leave the kind empty", corev1.ObjectReference{Name: "node-1"}, nil},
		{"a binding to anything but a node is rejected", corev1.ObjectReference{Kind: "Pod", Name: "x"}, []want{notSupported("target.kind")}},
		{"a binding needs a target name", corev1.ObjectReference{Kind: "Node"}, []want{required("target.name")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"}, Target: tt.target}
			checkErrs(t, validation.Binding(b), tt.want...)
		})
	}
}
