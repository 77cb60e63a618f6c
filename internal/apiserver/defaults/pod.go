package defaults

import (
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Pod applies kube's defaults to a Pod: the pod-only defaults (requests
// from limits, enableServiceLinks, host ports under hostNetwork), then
// everything PodSpec sets, then status quantities.
func Pod(p *corev1.Pod) {
	for _, cs := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for i := range cs {
			requestsFromLimits(&cs[i].Resources)
		}
	}
	if p.Spec.EnableServiceLinks == nil {
		v := corev1.DefaultEnableServiceLinks
		p.Spec.EnableServiceLinks = &v
	}
	if p.Spec.HostNetwork {
		hostNetworkPorts(p.Spec.Containers)
		hostNetworkPorts(p.Spec.InitContainers)
	}
	PodSpec(&p.Spec)
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses, p.Status.EphemeralContainerStatuses} {
		for i := range statuses {
			roundUp(statuses[i].AllocatedResources)
			if r := statuses[i].Resources; r != nil {
				roundUp(r.Limits)
				roundUp(r.Requests)
			}
		}
	}
}

// PodSpec applies the defaults every PodSpec gets, also inside workload
// templates: dnsPolicy ClusterFirst, restartPolicy Always, an empty
// securityContext, terminationGracePeriodSeconds 30, schedulerName
// default-scheduler, and the volume, container, probe and port defaults.
func PodSpec(spec *corev1.PodSpec) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		v := int64(corev1.DefaultTerminationGracePeriodSeconds)
		spec.TerminationGracePeriodSeconds = &v
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	for i := range spec.Volumes {
		volume(&spec.Volumes[i])
	}
	for i := range spec.InitContainers {
		container(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		container(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		container((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	roundUp(spec.Overhead)
	if r := spec.Resources; r != nil {
		roundUp(r.Limits)
		roundUp(r.Requests)
	}
}

// requestsFromLimits copies each limit without a request into requests.
func requestsFromLimits(r *corev1.ResourceRequirements) {
	if r.Limits == nil {
		return
	}
	if r.Requests == nil {
		r.Requests = corev1.ResourceList{}
	}
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			r.Requests[name] = q.DeepCopy()
		}
	}
}

func hostNetworkPorts(cs []corev1.Container) {
	for i := range cs {
		for j := range cs[i].Ports {
			if cs[i].Ports[j].HostPort == 0 {
				cs[i].Ports[j].HostPort = cs[i].Ports[j].ContainerPort
			}
		}
	}
}

func container(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = pullPolicyFor(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil {
			objectFieldSelector(vf.FieldRef)
		}
	}
	roundUp(c.Resources.Limits)
	roundUp(c.Resources.Requests)
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p != nil {
			probe(p)
		}
	}
	if l := c.Lifecycle; l != nil {
		for _, h := range []*corev1.LifecycleHandler{l.PostStart, l.PreStop} {
			if h != nil && h.HTTPGet != nil {
				httpGet(h.HTTPGet)
			}
		}
	}
}

func probe(p *corev1.Probe) {
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if p.HTTPGet != nil {
		httpGet(p.HTTPGet)
	}
	if p.GRPC != nil && p.GRPC.Service == nil {
		p.GRPC.Service = new(string)
	}
}

func httpGet(h *corev1.HTTPGetAction) {
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

func objectFieldSelector(f *corev1.ObjectFieldSelector) {
	if f.APIVersion == "" {
		f.APIVersion = "v1"
	}
}

// roundUp rounds every quantity up to milli precision, as kube does for
// compatibility.
func roundUp(rl corev1.ResourceList) {
	for name, q := range rl {
		q.RoundUp(-3)
		rl[name] = q
	}
}

func volume(v *corev1.Volume) {
	if v.VolumeSource == (corev1.VolumeSource{}) {
		v.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	src := &v.VolumeSource
	if src.HostPath != nil {
		hostPathType(src.HostPath)
	}
	if s := src.Secret; s != nil && s.DefaultMode == nil {
		s.DefaultMode = mode(corev1.SecretVolumeSourceDefaultMode)
	}
	if s := src.ConfigMap; s != nil && s.DefaultMode == nil {
		s.DefaultMode = mode(corev1.ConfigMapVolumeSourceDefaultMode)
	}
	if s := src.DownwardAPI; s != nil {
		if s.DefaultMode == nil {
			s.DefaultMode = mode(corev1.DownwardAPIVolumeSourceDefaultMode)
		}
		downwardAPIItems(s.Items)
	}
	if s := src.Projected; s != nil {
		if s.DefaultMode == nil {
			s.DefaultMode = mode(corev1.ProjectedVolumeSourceDefaultMode)
		}
		for i := range s.Sources {
			if d := s.Sources[i].DownwardAPI; d != nil {
				downwardAPIItems(d.Items)
			}
			if t := s.Sources[i].ServiceAccountToken; t != nil && t.ExpirationSeconds == nil {
				hour := int64(time.Hour.Seconds())
				t.ExpirationSeconds = &hour
			}
		}
	}
	if s := src.ISCSI; s != nil && s.ISCSIInterface == "" {
		s.ISCSIInterface = "default"
	}
	if s := src.RBD; s != nil {
		rbd(&s.RBDPool, &s.RadosUser, &s.Keyring)
	}
	if s := src.AzureDisk; s != nil {
		azureDisk(s)
	}
	if s := src.ScaleIO; s != nil {
		scaleIO(&s.StorageMode, &s.FSType)
	}
	if e := src.Ephemeral; e != nil && e.VolumeClaimTemplate != nil {
		pvcSpec(&e.VolumeClaimTemplate.Spec)
	}
	if img := src.Image; img != nil && img.PullPolicy == "" {
		img.PullPolicy = pullPolicyFor(img.Reference)
	}
}

func downwardAPIItems(items []corev1.DownwardAPIVolumeFile) {
	for i := range items {
		if items[i].FieldRef != nil {
			objectFieldSelector(items[i].FieldRef)
		}
	}
}

func mode(m int32) *int32 { return &m }

func hostPathType(hp *corev1.HostPathVolumeSource) {
	if hp.Type == nil {
		t := corev1.HostPathUnset
		hp.Type = &t
	}
}

func rbd(pool, user, keyring *string) {
	if *pool == "" {
		*pool = "rbd"
	}
	if *user == "" {
		*user = "admin"
	}
	if *keyring == "" {
		*keyring = "/etc/ceph/keyring"
	}
}

func azureDisk(s *corev1.AzureDiskVolumeSource) {
	if s.CachingMode == nil {
		m := corev1.AzureDataDiskCachingReadWrite
		s.CachingMode = &m
	}
	if s.FSType == nil {
		fs := "ext4"
		s.FSType = &fs
	}
	if s.ReadOnly == nil {
		s.ReadOnly = new(bool)
	}
	if s.Kind == nil {
		k := corev1.AzureSharedBlobDisk
		s.Kind = &k
	}
}

func scaleIO(storageMode, fsType *string) {
	if *storageMode == "" {
		*storageMode = "ThinProvisioned"
	}
	if *fsType == "" {
		*fsType = "xfs"
	}
}

// Image references as the Docker distribution grammar defines them.
var imageReference = func() *regexp.Regexp {
	const (
		domainComponent = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
		domain          = domainComponent + `(?:\.` + domainComponent + `)*(?::[0-9]+)?`
		nameComponent   = `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
		name            = `(?:` + domain + `/)?` + nameComponent + `(?:/` + nameComponent + `)*`
		tag             = `[\w][\w.-]{0,127}`
		digest          = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
	)
	return regexp.MustCompile(`^(` + name + `)(?::(` + tag + `))?(?:@(` + digest + `))?$`)
}()

// pullPolicyFor is kube's imagePullPolicy default: Always for ":latest" or
// an untagged, undigested image; IfNotPresent otherwise, including images
// kube cannot parse.
func pullPolicyFor(image string) corev1.PullPolicy {
	m := imageReference.FindStringSubmatch(image)
	if m == nil || len(m[1]) > 255 {
		return corev1.PullIfNotPresent
	}
	tag, digest := m[2], m[3]
	if tag == "latest" || (tag == "" && digest == "") {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}
