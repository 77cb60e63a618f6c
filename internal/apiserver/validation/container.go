package validation

import (
	"fmt"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// containerCtx carries what container checks need to know about the pod.
type containerCtx struct {
	volumes       map[string]corev1.VolumeSource
	podClaimNames map[string]bool
	gracePeriod   *int64
	restartPolicy corev1.RestartPolicy
	hostUsers     bool
}

// containers validates spec.containers: at least one, names unique, each
// container well formed, and no two containers claiming the same host port.
func containers(cs []corev1.Container, ctx containerCtx, fldPath *field.Path) field.ErrorList {
	if len(cs) == 0 {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var allErrs field.ErrorList
	names := map[string]bool{}
	for i := range cs {
		c := &cs[i]
		p := fldPath.Index(i)
		allErrs = append(allErrs, containerCommon(c, ctx, p)...)
		if names[c.Name] {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), c.Name))
		} else {
			names[c.Name] = true
		}
		if c.Lifecycle != nil {
			allErrs = append(allErrs, lifecycle(c.Lifecycle, ctx.gracePeriod, p.Child("lifecycle"))...)
		}
		allErrs = append(allErrs, probes(c, ctx.gracePeriod, p)...)
		if c.RestartPolicy != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("restartPolicy"), "may not be set for non-init containers"))
		}
	}
	return append(allErrs, hostPortConflicts(cs, fldPath)...)
}

// initContainers validates spec.initContainers. Names must be unique across
// regular and init containers; probes and lifecycle hooks are only allowed
// on restartable (sidecar) init containers.
func initContainers(cs, regular []corev1.Container, ctx containerCtx, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	names := map[string]bool{}
	for _, c := range regular {
		names[c.Name] = true
	}
	for i := range cs {
		c := &cs[i]
		p := fldPath.Index(i)
		allErrs = append(allErrs, containerCommon(c, ctx, p)...)
		restartAlways := false
		if c.RestartPolicy != nil {
			if *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
				allErrs = append(allErrs, field.NotSupported(p.Child("restartPolicy"), *c.RestartPolicy,
					[]corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways}))
			}
			restartAlways = *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
		if names[c.Name] {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), c.Name))
		} else if c.Name != "" {
			names[c.Name] = true
		}
		// Init containers run one by one, so host ports only conflict
		// within one container.
		allErrs = append(allErrs, hostPortConflicts([]corev1.Container{*c}, fldPath)...)
		if restartAlways {
			if c.Lifecycle != nil {
				allErrs = append(allErrs, lifecycle(c.Lifecycle, ctx.gracePeriod, p.Child("lifecycle"))...)
			}
			allErrs = append(allErrs, probes(c, ctx.gracePeriod, p)...)
			continue
		}
		const msg = "may not be set for init containers without restartPolicy=Always"
		if c.Lifecycle != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("lifecycle"), msg))
		}
		if c.LivenessProbe != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("livenessProbe"), msg))
		}
		if c.ReadinessProbe != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("readinessProbe"), msg))
		}
		if c.StartupProbe != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("startupProbe"), msg))
		}
	}
	return allErrs
}

// ephemeralContainers validates spec.ephemeralContainers: names unique
// across all container kinds, target container must be a regular or init
// container, and fields that make a container part of the workload
// (ports, probes, lifecycle, resources, subPath mounts) are forbidden.
func ephemeralContainers(ecs []corev1.EphemeralContainer, regular, init []corev1.Container, ctx containerCtx, fldPath *field.Path) field.ErrorList {
	if len(ecs) == 0 {
		return nil
	}
	var allErrs field.ErrorList
	others, all := map[string]bool{}, map[string]bool{}
	for _, c := range regular {
		others[c.Name], all[c.Name] = true, true
	}
	for _, c := range init {
		others[c.Name], all[c.Name] = true, true
	}
	for i := range ecs {
		ec := &ecs[i]
		p := fldPath.Index(i)
		c := (*corev1.Container)(&ec.EphemeralContainerCommon)
		allErrs = append(allErrs, containerCommon(c, ctx, p)...)
		allErrs = append(allErrs, imageWhitespace(c.Image, p.Child("image"))...)
		if all[ec.Name] {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), ec.Name))
		} else {
			all[ec.Name] = true
		}
		if ec.TargetContainerName != "" && !others[ec.TargetContainerName] {
			allErrs = append(allErrs, field.NotFound(p.Child("targetContainerName"), ec.TargetContainerName))
		}
		const msg = "cannot be set for an Ephemeral Container"
		forbidden := []struct {
			name string
			set  bool
		}{
			{"ports", len(c.Ports) > 0},
			{"resources", len(c.Resources.Limits)+len(c.Resources.Requests)+len(c.Resources.Claims) > 0},
			{"resizePolicy", len(c.ResizePolicy) > 0},
			{"livenessProbe", c.LivenessProbe != nil},
			{"readinessProbe", c.ReadinessProbe != nil},
			{"startupProbe", c.StartupProbe != nil},
			{"lifecycle", c.Lifecycle != nil},
			{"restartPolicy", c.RestartPolicy != nil},
		}
		for _, f := range forbidden {
			if f.set {
				allErrs = append(allErrs, field.Forbidden(p.Child(f.name), msg))
			}
		}
		for j, vm := range ec.VolumeMounts {
			if vm.SubPath != "" {
				allErrs = append(allErrs, field.Forbidden(p.Child("volumeMounts").Index(j).Child("subPath"), msg))
			}
			if vm.SubPathExpr != "" {
				allErrs = append(allErrs, field.Forbidden(p.Child("volumeMounts").Index(j).Child("subPathExpr"), msg))
			}
		}
	}
	return allErrs
}

var validTerminationMessagePolicies = []corev1.TerminationMessagePolicy{
	corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError,
}

// containerCommon applies the checks every kind of container shares.
func containerCommon(c *corev1.Container, ctx containerCtx, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if c.Name == "" {
		allErrs = append(allErrs, field.Required(p.Child("name"), ""))
	} else {
		allErrs = append(allErrs, dnsLabel(c.Name, p.Child("name"))...)
	}
	if c.Image == "" {
		allErrs = append(allErrs, field.Required(p.Child("image"), ""))
	}
	switch c.TerminationMessagePolicy {
	case corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError:
	case "":
		allErrs = append(allErrs, field.Required(p.Child("terminationMessagePolicy"), ""))
	default:
		allErrs = append(allErrs, field.NotSupported(p.Child("terminationMessagePolicy"), c.TerminationMessagePolicy, validTerminationMessagePolicies))
	}
	allErrs = append(allErrs, containerPorts(c.Ports, p.Child("ports"))...)
	allErrs = append(allErrs, env(c.Env, p.Child("env"))...)
	allErrs = append(allErrs, envFrom(c.EnvFrom, p.Child("envFrom"))...)
	allErrs = append(allErrs, volumeMounts(c, ctx.volumes, p.Child("volumeMounts"))...)
	allErrs = append(allErrs, volumeDevices(c, ctx.volumes, p.Child("volumeDevices"))...)
	allErrs = append(allErrs, pullPolicy(c.ImagePullPolicy, p.Child("imagePullPolicy"))...)
	allErrs = append(allErrs, containerResourceRequirements(&c.Resources, ctx.podClaimNames, p.Child("resources"))...)
	allErrs = append(allErrs, resizePolicy(c.ResizePolicy, ctx.restartPolicy, p.Child("resizePolicy"))...)
	allErrs = append(allErrs, securityContext(c.SecurityContext, ctx.hostUsers, p.Child("securityContext"))...)
	return allErrs
}

func imageWhitespace(image string, p *field.Path) field.ErrorList {
	if len(image) != len(strings.TrimSpace(image)) {
		return field.ErrorList{field.Invalid(p, image, "must not have leading or trailing whitespace")}
	}
	return nil
}

var validProtocols = []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP}

func containerPorts(ports []corev1.ContainerPort, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	names := map[string]bool{}
	for i, port := range ports {
		p := fldPath.Index(i)
		if port.Name != "" {
			if msgs := utilvalidation.IsValidPortName(port.Name); len(msgs) != 0 {
				allErrs = append(allErrs, invalidEach(p.Child("name"), port.Name, msgs)...)
			} else if names[port.Name] {
				allErrs = append(allErrs, field.Duplicate(p.Child("name"), port.Name))
			} else {
				names[port.Name] = true
			}
		}
		if port.ContainerPort == 0 {
			allErrs = append(allErrs, field.Required(p.Child("containerPort"), ""))
		} else {
			allErrs = append(allErrs, invalidEach(p.Child("containerPort"), port.ContainerPort, utilvalidation.IsValidPortNum(int(port.ContainerPort)))...)
		}
		if port.HostPort != 0 {
			allErrs = append(allErrs, invalidEach(p.Child("hostPort"), port.HostPort, utilvalidation.IsValidPortNum(int(port.HostPort)))...)
		}
		switch port.Protocol {
		case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		case "":
			allErrs = append(allErrs, field.Required(p.Child("protocol"), ""))
		default:
			allErrs = append(allErrs, field.NotSupported(p.Child("protocol"), port.Protocol, validProtocols))
		}
	}
	return allErrs
}

// hostPortConflicts reports a host port claimed twice for the same
// protocol and host IP.
func hostPortConflicts(cs []corev1.Container, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	seen := map[string]bool{}
	for ci, c := range cs {
		for pi, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			key := fmt.Sprintf("%s/%s/%d", port.Protocol, port.HostIP, port.HostPort)
			if seen[key] {
				allErrs = append(allErrs, field.Duplicate(fldPath.Index(ci).Child("ports").Index(pi).Child("hostPort"), key))
			}
			seen[key] = true
		}
	}
	return allErrs
}

func volumeMounts(c *corev1.Container, volumes map[string]corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	devices := map[string]string{}
	for _, d := range c.VolumeDevices {
		devices[d.Name] = d.DevicePath
	}
	mountPoints := map[string]bool{}
	for i, m := range c.VolumeMounts {
		p := fldPath.Index(i)
		if m.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		}
		if _, ok := volumes[m.Name]; !ok {
			allErrs = append(allErrs, field.NotFound(p.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			allErrs = append(allErrs, field.Required(p.Child("mountPath"), ""))
		}
		if mountPoints[m.MountPath] {
			allErrs = append(allErrs, field.Invalid(p.Child("mountPath"), m.MountPath, "must be unique"))
		}
		mountPoints[m.MountPath] = true
		if _, ok := devices[m.Name]; ok {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), m.Name, "must not already exist in volumeDevices"))
		}
		for _, dp := range devices {
			if dp == m.MountPath {
				allErrs = append(allErrs, field.Invalid(p.Child("mountPath"), m.MountPath, "must not already exist as a path in volumeDevices"))
				break
			}
		}
		if m.SubPath != "" {
			allErrs = append(allErrs, localDescendingPath(m.SubPath, fldPath.Child("subPath"))...)
		}
		if m.SubPathExpr != "" {
			if m.SubPath != "" {
				allErrs = append(allErrs, field.Invalid(p.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
			}
			allErrs = append(allErrs, localDescendingPath(m.SubPathExpr, fldPath.Child("subPathExpr"))...)
		}
		if mp := m.MountPropagation; mp != nil {
			valid := []corev1.MountPropagationMode{corev1.MountPropagationBidirectional, corev1.MountPropagationHostToContainer, corev1.MountPropagationNone}
			switch *mp {
			case corev1.MountPropagationBidirectional:
				sc := c.SecurityContext
				if sc == nil || sc.Privileged == nil || !*sc.Privileged {
					allErrs = append(allErrs, field.Forbidden(fldPath.Child("mountPropagation"), "Bidirectional mount propagation is available only to privileged containers"))
				}
			case corev1.MountPropagationHostToContainer, corev1.MountPropagationNone:
			default:
				allErrs = append(allErrs, field.NotSupported(fldPath.Child("mountPropagation"), *mp, valid))
			}
		}
	}
	return allErrs
}

func volumeDevices(c *corev1.Container, volumes map[string]corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	paths, names := map[string]bool{}, map[string]bool{}
	for i, d := range c.VolumeDevices {
		p := fldPath.Index(i)
		if d.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		}
		if names[d.Name] {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), d.Name, "must be unique"))
		}
		src, ok := volumes[d.Name]
		if !ok {
			allErrs = append(allErrs, field.NotFound(p.Child("name"), d.Name))
		} else if src.PersistentVolumeClaim == nil && src.Ephemeral == nil {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), d.Name, "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode"))
		}
		if d.DevicePath == "" {
			allErrs = append(allErrs, field.Required(p.Child("devicePath"), ""))
		}
		if paths[d.DevicePath] {
			allErrs = append(allErrs, field.Invalid(p.Child("devicePath"), d.DevicePath, "must be unique"))
		}
		if d.DevicePath != "" && hasBacksteps(d.DevicePath) {
			allErrs = append(allErrs, field.Invalid(p.Child("devicePath"), d.DevicePath, "can not contain backsteps ('..')"))
		} else {
			paths[d.DevicePath] = true
		}
		if _, ok := mounts[d.Name]; ok {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), d.Name, "must not already exist in volumeMounts"))
		}
		for _, mp := range mounts {
			if mp == d.DevicePath {
				allErrs = append(allErrs, field.Invalid(p.Child("devicePath"), d.DevicePath, "must not already exist as a path in volumeMounts"))
				break
			}
		}
		if d.Name != "" {
			names[d.Name] = true
		}
	}
	return allErrs
}

var validPullPolicies = []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}

func pullPolicy(policy corev1.PullPolicy, fldPath *field.Path) field.ErrorList {
	switch policy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		return nil
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return field.ErrorList{field.NotSupported(fldPath, policy, validPullPolicies)}
}

func resizePolicy(policies []corev1.ContainerResizePolicy, podRestart corev1.RestartPolicy, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	seen := map[corev1.ResourceName]bool{}
	for i, p := range policies {
		if seen[p.ResourceName] {
			allErrs = append(allErrs, field.Duplicate(fldPath.Index(i), p.ResourceName))
		}
		seen[p.ResourceName] = true
		switch p.ResourceName {
		case corev1.ResourceCPU, corev1.ResourceMemory:
		case "":
			allErrs = append(allErrs, field.Required(fldPath, ""))
		default:
			allErrs = append(allErrs, field.NotSupported(fldPath, p.ResourceName, []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}))
		}
		switch p.RestartPolicy {
		case corev1.NotRequired, corev1.RestartContainer:
		case "":
			allErrs = append(allErrs, field.Required(fldPath, ""))
		default:
			allErrs = append(allErrs, field.NotSupported(fldPath, p.RestartPolicy, []corev1.ResourceResizeRestartPolicy{corev1.NotRequired, corev1.RestartContainer}))
		}
		if podRestart == corev1.RestartPolicyNever && p.RestartPolicy != corev1.NotRequired {
			allErrs = append(allErrs, field.Invalid(fldPath, p.RestartPolicy, "must be 'NotRequired' when `restartPolicy` is 'Never'"))
		}
	}
	return allErrs
}

func probes(c *corev1.Container, gracePeriod *int64, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if c.LivenessProbe != nil {
		allErrs = append(allErrs, probe(c.LivenessProbe, gracePeriod, p.Child("livenessProbe"))...)
		if c.LivenessProbe.SuccessThreshold != 1 {
			allErrs = append(allErrs, field.Invalid(p.Child("livenessProbe", "successThreshold"), c.LivenessProbe.SuccessThreshold, "must be 1"))
		}
	}
	if c.ReadinessProbe != nil {
		allErrs = append(allErrs, probe(c.ReadinessProbe, gracePeriod, p.Child("readinessProbe"))...)
		if c.ReadinessProbe.TerminationGracePeriodSeconds != nil {
			allErrs = append(allErrs, field.Invalid(p.Child("readinessProbe", "terminationGracePeriodSeconds"), c.ReadinessProbe.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
		}
	}
	if c.StartupProbe != nil {
		allErrs = append(allErrs, probe(c.StartupProbe, gracePeriod, p.Child("startupProbe"))...)
		if c.StartupProbe.SuccessThreshold != 1 {
			allErrs = append(allErrs, field.Invalid(p.Child("startupProbe", "successThreshold"), c.StartupProbe.SuccessThreshold, "must be 1"))
		}
	}
	return allErrs
}

func probe(pr *corev1.Probe, gracePeriod *int64, p *field.Path) field.ErrorList {
	h := pr.ProbeHandler
	allErrs := handler(h.Exec, h.HTTPGet, h.TCPSocket, h.GRPC, nil, gracePeriod, p)
	allErrs = append(allErrs, nonNegative(int64(pr.InitialDelaySeconds), p.Child("initialDelaySeconds"))...)
	allErrs = append(allErrs, nonNegative(int64(pr.TimeoutSeconds), p.Child("timeoutSeconds"))...)
	allErrs = append(allErrs, nonNegative(int64(pr.PeriodSeconds), p.Child("periodSeconds"))...)
	allErrs = append(allErrs, nonNegative(int64(pr.SuccessThreshold), p.Child("successThreshold"))...)
	allErrs = append(allErrs, nonNegative(int64(pr.FailureThreshold), p.Child("failureThreshold"))...)
	if pr.TerminationGracePeriodSeconds != nil && *pr.TerminationGracePeriodSeconds <= 0 {
		allErrs = append(allErrs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *pr.TerminationGracePeriodSeconds, "must be greater than 0"))
	}
	return allErrs
}

func lifecycle(l *corev1.Lifecycle, gracePeriod *int64, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if h := l.PostStart; h != nil {
		allErrs = append(allErrs, handler(h.Exec, h.HTTPGet, h.TCPSocket, nil, h.Sleep, gracePeriod, p.Child("postStart"))...)
	}
	if h := l.PreStop; h != nil {
		allErrs = append(allErrs, handler(h.Exec, h.HTTPGet, h.TCPSocket, nil, h.Sleep, gracePeriod, p.Child("preStop"))...)
	}
	return allErrs
}

// handler validates a probe or lifecycle handler: exactly one action.
func handler(exec *corev1.ExecAction, httpGet *corev1.HTTPGetAction, tcp *corev1.TCPSocketAction, grpc *corev1.GRPCAction, sleep *corev1.SleepAction, gracePeriod *int64, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	n := 0
	one := func(name string, set bool, check func() field.ErrorList) {
		if !set {
			return
		}
		if n > 0 {
			allErrs = append(allErrs, field.Forbidden(p.Child(name), "may not specify more than 1 handler type"))
			return
		}
		n++
		allErrs = append(allErrs, check()...)
	}
	one("exec", exec != nil, func() field.ErrorList {
		if len(exec.Command) == 0 {
			return field.ErrorList{field.Required(p.Child("exec", "command"), "")}
		}
		return nil
	})
	one("httpGet", httpGet != nil, func() field.ErrorList {
		hp := p.Child("httpGet")
		var errs field.ErrorList
		if httpGet.Path == "" {
			errs = append(errs, field.Required(hp.Child("path"), ""))
		}
		errs = append(errs, portNumOrName(httpGet.Port, hp.Child("port"))...)
		if httpGet.Scheme != corev1.URISchemeHTTP && httpGet.Scheme != corev1.URISchemeHTTPS {
			errs = append(errs, field.NotSupported(hp.Child("scheme"), httpGet.Scheme, []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}))
		}
		for _, h := range httpGet.HTTPHeaders {
			errs = append(errs, invalidEach(hp.Child("httpHeaders"), h.Name, utilvalidation.IsHTTPHeaderName(h.Name))...)
		}
		return errs
	})
	one("tcpSocket", tcp != nil, func() field.ErrorList { return portNumOrName(tcp.Port, p.Child("tcpSocket", "port")) })
	one("grpc", grpc != nil, func() field.ErrorList {
		return portNumOrName(intstr.FromInt32(grpc.Port), p.Child("grpc", "port"))
	})
	one("sleep", sleep != nil, func() field.ErrorList {
		if gracePeriod != nil && (sleep.Seconds < 0 || sleep.Seconds > *gracePeriod) {
			return field.ErrorList{field.Invalid(p.Child("sleep"), sleep.Seconds,
				fmt.Sprintf("must be non-negative and less than terminationGracePeriodSeconds (%d)", *gracePeriod))}
		}
		return nil
	})
	if n == 0 {
		allErrs = append(allErrs, field.Required(p, "must specify a handler type"))
	}
	return allErrs
}

func portNumOrName(port intstr.IntOrString, p *field.Path) field.ErrorList {
	if port.Type == intstr.String {
		return invalidEach(p, port.StrVal, utilvalidation.IsValidPortName(port.StrVal))
	}
	return invalidEach(p, port.IntValue(), utilvalidation.IsValidPortNum(port.IntValue()))
}

// localDescendingPath: relative and without "..".
func localDescendingPath(target string, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if filepath.IsAbs(target) || strings.HasPrefix(target, "/") {
		allErrs = append(allErrs, field.Invalid(p, target, "must be a relative path"))
	}
	return append(allErrs, noBacksteps(target, p)...)
}

func noBacksteps(target string, p *field.Path) field.ErrorList {
	if hasBacksteps(target) {
		return field.ErrorList{field.Invalid(p, target, "must not contain '..'")}
	}
	return nil
}

func hasBacksteps(target string) bool {
	for _, part := range strings.Split(filepath.ToSlash(target), "/") {
		if part == ".." {
			return true
		}
	}
	return false
}

// localNonReservedPath: relative, no "..", and not starting with "..".
func localNonReservedPath(target string, p *field.Path) field.ErrorList {
	allErrs := localDescendingPath(target, p)
	if strings.HasPrefix(target, "..") && !strings.HasPrefix(target, "../") {
		allErrs = append(allErrs, field.Invalid(p, target, "must not start with '..'"))
	}
	return allErrs
}
