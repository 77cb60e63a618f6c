package validation

import (
	"fmt"
	"math"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// podSpecOpts says where a PodSpec sits.
type podSpecOpts struct {
	// resourceIsPod is true for a Pod, false for a PodSpec embedded in a
	// template (Deployment, ReplicaSet, DaemonSet).
	resourceIsPod bool
}

// podSpec validates a PodSpec. podMeta is the pod's metadata when the spec
// belongs to a real pod (needed for generic ephemeral volume names), nil
// for templates.
func podSpec(spec *corev1.PodSpec, podMeta *metav1.ObjectMeta, fldPath *field.Path, opts podSpecOpts) field.ErrorList {
	var allErrs field.ErrorList
	if spec.TerminationGracePeriodSeconds == nil {
		allErrs = append(allErrs, field.Required(fldPath.Child("terminationGracePeriodSeconds"), ""))
	}
	hostUsers := spec.HostUsers == nil || *spec.HostUsers
	vols, errs := volumes(spec.Volumes, podMeta, fldPath.Child("volumes"))
	allErrs = append(allErrs, errs...)
	claimNames := map[string]bool{}
	allErrs = append(allErrs, podResourceClaims(spec.ResourceClaims, claimNames, fldPath.Child("resourceClaims"))...)
	ctx := containerCtx{
		volumes:       vols,
		podClaimNames: claimNames,
		gracePeriod:   spec.TerminationGracePeriodSeconds,
		restartPolicy: spec.RestartPolicy,
		hostUsers:     hostUsers,
	}
	allErrs = append(allErrs, containers(spec.Containers, ctx, fldPath.Child("containers"))...)
	allErrs = append(allErrs, initContainers(spec.InitContainers, spec.Containers, ctx, fldPath.Child("initContainers"))...)
	allErrs = append(allErrs, ephemeralContainers(spec.EphemeralContainers, spec.Containers, spec.InitContainers, ctx, fldPath.Child("ephemeralContainers"))...)
	allErrs = append(allErrs, hostNetworkDeps(spec, fldPath, opts)...)
	allErrs = append(allErrs, oneOf(fldPath.Child("restartPolicy"), spec.RestartPolicy,
		corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)...)
	allErrs = append(allErrs, oneOf(fldPath.Child("dnsPolicy"), spec.DNSPolicy,
		corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone)...)
	allErrs = append(allErrs, labels(spec.NodeSelector, fldPath.Child("nodeSelector"))...)
	allErrs = append(allErrs, podSecurityContext(spec, fldPath.Child("securityContext"))...)
	for i, s := range spec.ImagePullSecrets {
		if s != (corev1.LocalObjectReference{Name: s.Name}) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("imagePullSecrets").Index(i), s, "only name may be set"))
		}
	}
	allErrs = append(allErrs, affinity(spec.Affinity, fldPath.Child("affinity"))...)
	allErrs = append(allErrs, dnsConfig(spec.DNSConfig, spec.DNSPolicy, fldPath.Child("dnsConfig"))...)
	for i, g := range spec.ReadinessGates {
		allErrs = append(allErrs, qualifiedName(string(g.ConditionType), fldPath.Child("readinessGates").Index(i).Child("conditionType"))...)
	}
	seenGates := map[string]bool{}
	for i, g := range spec.SchedulingGates {
		allErrs = append(allErrs, qualifiedName(g.Name, fldPath.Child("schedulingGates").Index(i))...)
		if seenGates[g.Name] {
			allErrs = append(allErrs, field.Duplicate(fldPath.Child("schedulingGates").Index(i), g.Name))
		}
		seenGates[g.Name] = true
	}
	allErrs = append(allErrs, topologySpreadConstraints(spec.TopologySpreadConstraints, fldPath.Child("topologySpreadConstraints"))...)
	if !hostUsers {
		// kube spells two of these paths with capitals; kept as is.
		const msg = "when `pod.Spec.HostUsers` is false"
		if spec.HostNetwork {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("hostNetwork"), msg))
		}
		if spec.HostPID {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("HostPID"), msg))
		}
		if spec.HostIPC {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("HostIPC"), msg))
		}
	}
	if spec.ServiceAccountName != "" {
		allErrs = append(allErrs, dnsSubdomain(spec.ServiceAccountName, fldPath.Child("serviceAccountName"))...)
	}
	if spec.NodeName != "" {
		allErrs = append(allErrs, dnsSubdomain(spec.NodeName, fldPath.Child("nodeName"))...)
	}
	if ads := spec.ActiveDeadlineSeconds; ads != nil && (*ads < 1 || *ads > math.MaxInt32) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("activeDeadlineSeconds"), *ads, utilvalidation.InclusiveRangeError(1, math.MaxInt32)))
	}
	if spec.Hostname != "" {
		allErrs = append(allErrs, dnsLabel(spec.Hostname, fldPath.Child("hostname"))...)
	}
	if spec.Subdomain != "" {
		allErrs = append(allErrs, dnsLabel(spec.Subdomain, fldPath.Child("subdomain"))...)
	}
	allErrs = append(allErrs, tolerations(spec.Tolerations, fldPath.Child("tolerations"))...)
	for i, ha := range spec.HostAliases {
		hp := fldPath.Child("hostAliases").Index(i)
		allErrs = append(allErrs, utilvalidation.IsValidIP(hp.Child("ip"), ha.IP)...)
		for j, hn := range ha.Hostnames {
			allErrs = append(allErrs, dnsSubdomain(hn, hp.Child("hostnames").Index(j))...)
		}
	}
	if spec.PriorityClassName != "" {
		allErrs = append(allErrs, dnsSubdomain(spec.PriorityClassName, fldPath.Child("priorityClassName"))...)
	}
	if spec.RuntimeClassName != nil {
		allErrs = append(allErrs, dnsSubdomain(*spec.RuntimeClassName, fldPath.Child("runtimeClassName"))...)
	}
	if spec.PreemptionPolicy != nil {
		allErrs = append(allErrs, oneOf(fldPath.Child("preemptionPolicy"), *spec.PreemptionPolicy, corev1.PreemptLowerPriority, corev1.PreemptNever)...)
	}
	if spec.Overhead != nil {
		allErrs = append(allErrs, containerResourceRequirements(&corev1.ResourceRequirements{Limits: spec.Overhead}, nil, fldPath.Child("overhead"))...)
	}
	if spec.OS != nil {
		allErrs = append(allErrs, podOS(spec, fldPath)...)
	}
	return allErrs
}

// oneOf is kube's usual enum check: Required when empty, NotSupported when
// not one of valid.
func oneOf[T ~string](fldPath *field.Path, value T, valid ...T) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	for _, v := range valid {
		if value == v {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(fldPath, value, valid)}
}

func podResourceClaims(claims []corev1.PodResourceClaim, names map[string]bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, c := range claims {
		p := fldPath.Index(i)
		switch {
		case c.Name == "":
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		case names[c.Name]:
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), c.Name))
		default:
			allErrs = append(allErrs, dnsLabel(c.Name, p.Child("name"))...)
			names[c.Name] = true
		}
		if c.ResourceClaimName != nil && c.ResourceClaimTemplateName != nil {
			allErrs = append(allErrs, field.Invalid(p, c, "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"))
		}
		if c.ResourceClaimName == nil && c.ResourceClaimTemplateName == nil {
			allErrs = append(allErrs, field.Invalid(p, c, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"))
		}
		if c.ResourceClaimName != nil {
			allErrs = append(allErrs, dnsSubdomain(*c.ResourceClaimName, p.Child("resourceClaimName"))...)
		}
		if c.ResourceClaimTemplateName != nil {
			allErrs = append(allErrs, dnsSubdomain(*c.ResourceClaimTemplateName, p.Child("resourceClaimTemplateName"))...)
		}
	}
	return allErrs
}

// hostNetworkDeps: with hostNetwork, a pod's host ports must equal its
// container ports (templates may leave them 0).
func hostNetworkDeps(spec *corev1.PodSpec, fldPath *field.Path, opts podSpecOpts) field.ErrorList {
	if !spec.HostNetwork {
		return nil
	}
	var allErrs field.ErrorList
	for i, c := range spec.Containers {
		for j, port := range c.Ports {
			if hp, cp := port.HostPort, port.ContainerPort; (opts.resourceIsPod || hp != 0) && hp != cp {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("containers").Index(i).Child("ports").Index(j).Child("hostPort"),
					port.HostPort, "must match `containerPort` when `hostNetwork` is true"))
			}
		}
	}
	return allErrs
}

const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
)

// dnsConfig validates spec.dnsConfig. Search domains use kube's relaxed
// rule (underscores allowed, "." alone allowed), GA since Kubernetes 1.34.
func dnsConfig(cfg *corev1.PodDNSConfig, policy corev1.DNSPolicy, fldPath *field.Path) field.ErrorList {
	if policy == corev1.DNSNone {
		if cfg == nil {
			return field.ErrorList{field.Required(fldPath, fmt.Sprintf("must provide `dnsConfig` when `dnsPolicy` is %s", corev1.DNSNone))}
		}
		if len(cfg.Nameservers) == 0 {
			return field.ErrorList{field.Required(fldPath.Child("nameservers"), fmt.Sprintf("must provide at least one DNS nameserver when `dnsPolicy` is %s", corev1.DNSNone))}
		}
	}
	if cfg == nil {
		return nil
	}
	var allErrs field.ErrorList
	if len(cfg.Nameservers) > maxDNSNameservers {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("nameservers"), cfg.Nameservers, fmt.Sprintf("must not have more than %v nameservers", maxDNSNameservers)))
	}
	for i, ns := range cfg.Nameservers {
		allErrs = append(allErrs, utilvalidation.IsValidIP(fldPath.Child("nameservers").Index(i), ns)...)
	}
	if len(cfg.Searches) > maxDNSSearchPaths {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("searches"), cfg.Searches, fmt.Sprintf("must not have more than %v search paths", maxDNSSearchPaths)))
	}
	if len(strings.Join(cfg.Searches, " ")) > maxDNSSearchListChars {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("searches"), cfg.Searches, fmt.Sprintf("must not have more than %v characters (including spaces) in the search list", maxDNSSearchListChars)))
	}
	for i, s := range cfg.Searches {
		if s == "." {
			continue
		}
		s = strings.TrimSuffix(s, ".")
		allErrs = append(allErrs, invalidEach(fldPath.Child("searches").Index(i), s, utilvalidation.IsDNS1123SubdomainWithUnderscore(s))...)
	}
	for i, o := range cfg.Options {
		if o.Name == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("options").Index(i), "must not be empty"))
		}
	}
	return allErrs
}

var validFSGroupChangePolicies = []corev1.PodFSGroupChangePolicy{corev1.FSGroupChangeAlways, corev1.FSGroupChangeOnRootMismatch}

func podSecurityContext(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	sc := spec.SecurityContext
	if sc == nil {
		return nil
	}
	var allErrs field.ErrorList
	if sc.FSGroup != nil {
		allErrs = append(allErrs, invalidEach(fldPath.Child("fsGroup"), *sc.FSGroup, utilvalidation.IsValidGroupID(*sc.FSGroup))...)
	}
	if sc.RunAsUser != nil {
		allErrs = append(allErrs, invalidEach(fldPath.Child("runAsUser"), *sc.RunAsUser, utilvalidation.IsValidUserID(*sc.RunAsUser))...)
	}
	if sc.RunAsGroup != nil {
		allErrs = append(allErrs, invalidEach(fldPath.Child("runAsGroup"), *sc.RunAsGroup, utilvalidation.IsValidGroupID(*sc.RunAsGroup))...)
	}
	for i, gid := range sc.SupplementalGroups {
		allErrs = append(allErrs, invalidEach(fldPath.Child("supplementalGroups").Index(i), gid, utilvalidation.IsValidGroupID(gid))...)
	}
	if spec.ShareProcessNamespace != nil && spec.HostPID && *spec.ShareProcessNamespace {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("shareProcessNamespace"), *spec.ShareProcessNamespace, "ShareProcessNamespace and HostPID cannot both be enabled"))
	}
	allErrs = append(allErrs, sysctls(sc.Sysctls, spec, fldPath.Child("sysctls"))...)
	if sc.FSGroupChangePolicy != nil {
		p := *sc.FSGroupChangePolicy
		if p != corev1.FSGroupChangeAlways && p != corev1.FSGroupChangeOnRootMismatch {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("fsGroupChangePolicy"), sc.FSGroupChangePolicy, validFSGroupChangePolicies))
		}
	}
	allErrs = append(allErrs, seccompProfile(sc.SeccompProfile, fldPath.Child("seccompProfile"))...)
	allErrs = append(allErrs, appArmorProfile(sc.AppArmorProfile, fldPath.Child("appArmorProfile"))...)
	if p := sc.SupplementalGroupsPolicy; p != nil && *p != corev1.SupplementalGroupsPolicyMerge && *p != corev1.SupplementalGroupsPolicyStrict {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("supplementalGroupsPolicy"), sc.SupplementalGroupsPolicy,
			[]corev1.SupplementalGroupsPolicy{corev1.SupplementalGroupsPolicyMerge, corev1.SupplementalGroupsPolicyStrict}))
	}
	if p := sc.SELinuxChangePolicy; p != nil && *p != corev1.SELinuxChangePolicyRecursive && *p != corev1.SELinuxChangePolicyMountOption {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("seLinuxChangePolicy"), *p,
			[]corev1.PodSELinuxChangePolicy{corev1.SELinuxChangePolicyMountOption, corev1.SELinuxChangePolicyRecursive}))
	}
	return allErrs
}

const sysctlMaxLength = 253

var sysctlRegexp = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

func sysctls(ss []corev1.Sysctl, spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	names := map[string]bool{}
	for i, s := range ss {
		p := fldPath.Index(i).Child("name")
		switch {
		case s.Name == "":
			allErrs = append(allErrs, field.Required(p, ""))
		case len(s.Name) > sysctlMaxLength || !sysctlRegexp.MatchString(s.Name):
			allErrs = append(allErrs, field.Invalid(p, s.Name, fmt.Sprintf("must have at most %d characters and match regex %s", sysctlMaxLength, sysctlRegexp)))
		case names[s.Name]:
			allErrs = append(allErrs, field.Duplicate(p, s.Name))
		}
		// Namespaced sysctls make no sense in a pod sharing that namespace
		// with the host.
		name := strings.ReplaceAll(s.Name, "/", ".")
		isIPC := name == "kernel.sem" || strings.HasPrefix(name, "kernel.shm") || strings.HasPrefix(name, "kernel.msg") || strings.HasPrefix(name, "fs.mqueue.")
		switch {
		case spec.HostNetwork && strings.HasPrefix(name, "net."):
			allErrs = append(allErrs, field.Invalid(p, s.Name, "may not be specified when 'hostNetwork' is true"))
		case spec.HostIPC && isIPC:
			allErrs = append(allErrs, field.Invalid(p, s.Name, "may not be specified when 'hostIPC' is true"))
		}
		names[s.Name] = true
	}
	return allErrs
}

func seccompProfile(sp *corev1.SeccompProfile, fldPath *field.Path) field.ErrorList {
	if sp == nil {
		return nil
	}
	var allErrs field.ErrorList
	switch sp.Type {
	case corev1.SeccompProfileTypeLocalhost, corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined:
	case "":
		allErrs = append(allErrs, field.Required(fldPath.Child("type"), "type is required when seccompProfile is set"))
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("type"), sp.Type, []corev1.SeccompProfileType{
			corev1.SeccompProfileTypeLocalhost, corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined}))
	}
	if sp.Type == corev1.SeccompProfileTypeLocalhost {
		if sp.LocalhostProfile == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("localhostProfile"), "must be set when seccomp type is Localhost"))
		} else {
			allErrs = append(allErrs, localDescendingPath(*sp.LocalhostProfile, fldPath.Child("localhostProfile"))...)
		}
	} else if sp.LocalhostProfile != nil {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("localhostProfile"), sp, "can only be set when seccomp type is Localhost"))
	}
	return allErrs
}

func appArmorProfile(ap *corev1.AppArmorProfile, fldPath *field.Path) field.ErrorList {
	if ap == nil {
		return nil
	}
	var allErrs field.ErrorList
	switch ap.Type {
	case corev1.AppArmorProfileTypeLocalhost:
		lp := fldPath.Child("localhostProfile")
		switch {
		case ap.LocalhostProfile == nil:
			allErrs = append(allErrs, field.Required(lp, "must be set when AppArmor type is Localhost"))
		case strings.TrimSpace(*ap.LocalhostProfile) != *ap.LocalhostProfile:
			allErrs = append(allErrs, field.Invalid(lp, *ap.LocalhostProfile, "must not be padded with whitespace"))
		case *ap.LocalhostProfile == "":
			allErrs = append(allErrs, field.Required(lp, "must be set when AppArmor type is Localhost"))
		}
		if ap.LocalhostProfile != nil && len(*ap.LocalhostProfile) > 4095 {
			allErrs = append(allErrs, field.TooLong(lp, "", 4095))
		}
	case corev1.AppArmorProfileTypeRuntimeDefault, corev1.AppArmorProfileTypeUnconfined:
		if ap.LocalhostProfile != nil {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("localhostProfile"), ap.LocalhostProfile, "can only be set when AppArmor type is Localhost"))
		}
	case "":
		allErrs = append(allErrs, field.Required(fldPath.Child("type"), "type is required when appArmorProfile is set"))
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("type"), ap.Type, []corev1.AppArmorProfileType{
			corev1.AppArmorProfileTypeLocalhost, corev1.AppArmorProfileTypeRuntimeDefault, corev1.AppArmorProfileTypeUnconfined}))
	}
	return allErrs
}

// securityContext validates a container's security context. Privileged
// containers are allowed (kube-apiserver --allow-privileged=true, as every
// common installer sets it).
func securityContext(sc *corev1.SecurityContext, hostUsers bool, fldPath *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	var allErrs field.ErrorList
	if sc.RunAsUser != nil {
		allErrs = append(allErrs, invalidEach(fldPath.Child("runAsUser"), *sc.RunAsUser, utilvalidation.IsValidUserID(*sc.RunAsUser))...)
	}
	if sc.RunAsGroup != nil {
		allErrs = append(allErrs, invalidEach(fldPath.Child("runAsGroup"), *sc.RunAsGroup, utilvalidation.IsValidGroupID(*sc.RunAsGroup))...)
	}
	if pm := sc.ProcMount; pm != nil {
		if *pm != corev1.DefaultProcMount && *pm != corev1.UnmaskedProcMount {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("procMount"), *pm, []corev1.ProcMountType{corev1.DefaultProcMount, corev1.UnmaskedProcMount}))
		}
		if hostUsers && *pm == corev1.UnmaskedProcMount {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("procMount"), sc.ProcMount, "`hostUsers` must be false to use `Unmasked`"))
		}
	}
	allErrs = append(allErrs, seccompProfile(sc.SeccompProfile, fldPath.Child("seccompProfile"))...)
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		if sc.Privileged != nil && *sc.Privileged {
			allErrs = append(allErrs, field.Invalid(fldPath, sc, "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
		}
		if sc.Capabilities != nil {
			for _, c := range sc.Capabilities.Add {
				if c == "CAP_SYS_ADMIN" {
					allErrs = append(allErrs, field.Invalid(fldPath, sc, "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
				}
			}
		}
	}
	return append(allErrs, appArmorProfile(sc.AppArmorProfile, fldPath.Child("appArmorProfile"))...)
}

// podOS validates spec.os and the fields that make no sense for that OS.
func podOS(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	osPath := fldPath.Child("os")
	switch spec.OS.Name {
	case "":
		return field.ErrorList{field.Required(osPath.Child("name"), "cannot be empty")}
	case corev1.Linux:
		var allErrs field.ErrorList
		const msg = "windows options cannot be set for a linux pod"
		if sc := spec.SecurityContext; sc != nil && sc.WindowsOptions != nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("securityContext").Child("windowsOptions"), msg))
		}
		visitContainers(spec, fldPath, func(c *corev1.Container, p *field.Path) {
			if c.SecurityContext != nil && c.SecurityContext.WindowsOptions != nil {
				allErrs = append(allErrs, field.Forbidden(p.Child("securityContext", "windowsOptions"), msg))
			}
		})
		return allErrs
	case corev1.Windows:
		return windowsPod(spec, fldPath)
	}
	return field.ErrorList{field.NotSupported(osPath, spec.OS.Name, []corev1.OSName{corev1.Linux, corev1.Windows})}
}

func windowsPod(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	const msg = "cannot be set for a windows pod"
	forbid := func(p *field.Path, set bool) {
		if set {
			allErrs = append(allErrs, field.Forbidden(p, msg))
		}
	}
	scPath := fldPath.Child("securityContext")
	if sc := spec.SecurityContext; sc != nil {
		forbid(scPath.Child("appArmorProfile"), sc.AppArmorProfile != nil)
		forbid(scPath.Child("seLinuxOptions"), sc.SELinuxOptions != nil)
		forbid(scPath.Child("seccompProfile"), sc.SeccompProfile != nil)
		forbid(scPath.Child("fsGroup"), sc.FSGroup != nil)
		forbid(scPath.Child("fsGroupChangePolicy"), sc.FSGroupChangePolicy != nil)
		forbid(scPath.Child("sysctls"), len(sc.Sysctls) > 0)
		forbid(scPath.Child("runAsUser"), sc.RunAsUser != nil)
		forbid(scPath.Child("runAsGroup"), sc.RunAsGroup != nil)
		forbid(scPath.Child("supplementalGroups"), sc.SupplementalGroups != nil)
		forbid(scPath.Child("supplementalGroupsPolicy"), sc.SupplementalGroupsPolicy != nil)
		forbid(scPath.Child("seLinuxChangePolicy"), sc.SELinuxChangePolicy != nil)
	}
	forbid(fldPath.Child("hostUsers"), spec.HostUsers != nil)
	forbid(fldPath.Child("hostPID"), spec.HostPID)
	forbid(fldPath.Child("hostIPC"), spec.HostIPC)
	forbid(fldPath.Child("shareProcessNamespace"), spec.ShareProcessNamespace != nil)
	visitContainers(spec, fldPath, func(c *corev1.Container, p *field.Path) {
		sc := c.SecurityContext
		if sc == nil {
			return
		}
		sp := p.Child("securityContext")
		forbid(sp.Child("appArmorProfile"), sc.AppArmorProfile != nil)
		forbid(sp.Child("seLinuxOptions"), sc.SELinuxOptions != nil)
		forbid(sp.Child("seccompProfile"), sc.SeccompProfile != nil)
		forbid(sp.Child("capabilities"), sc.Capabilities != nil)
		forbid(sp.Child("readOnlyRootFilesystem"), sc.ReadOnlyRootFilesystem != nil)
		forbid(sp.Child("privileged"), sc.Privileged != nil)
		forbid(sp.Child("allowPrivilegeEscalation"), sc.AllowPrivilegeEscalation != nil)
		forbid(sp.Child("procMount"), sc.ProcMount != nil)
		forbid(sp.Child("runAsUser"), sc.RunAsUser != nil)
		forbid(sp.Child("runAsGroup"), sc.RunAsGroup != nil)
	})
	return allErrs
}

// visitContainers calls fn for every init, regular and ephemeral container
// with its field path, in kube's order.
func visitContainers(spec *corev1.PodSpec, fldPath *field.Path, fn func(*corev1.Container, *field.Path)) {
	for i := range spec.InitContainers {
		fn(&spec.InitContainers[i], fldPath.Child("initContainers").Index(i))
	}
	for i := range spec.Containers {
		fn(&spec.Containers[i], fldPath.Child("containers").Index(i))
	}
	for i := range spec.EphemeralContainers {
		fn((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon), fldPath.Child("ephemeralContainers").Index(i))
	}
}
