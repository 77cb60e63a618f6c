package validation

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

var specPath = field.NewPath("spec")

// PodUpdateForbiddenMsg starts the detail of the Forbidden error on spec
// for a pod update that changes a field pods do not allow to change. The
// wording is kube's (unchanged through 1.36); kube appends a newline and a
// diff of the spec, and so does PodUpdate.
const PodUpdateForbiddenMsg = "pod updates may not change fields other than " +
	"`spec.containers[*].image`," +
	"`spec.initContainers[*].image`," +
	"`spec.activeDeadlineSeconds`," +
	"`spec.tolerations` (only additions to existing tolerations)," +
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"

// Pod validates a pod on create: metadata (namespaced, DNS subdomain
// name), the pod-specific annotations and the whole spec.
func Pod(p *corev1.Pod) field.ErrorList {
	allErrs := podMetadataAndSpec(p)
	if len(p.Spec.EphemeralContainers) > 0 {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("ephemeralContainers"), "cannot be set on create"))
	}
	if p.Spec.NodeName != "" && len(p.Spec.SchedulingGates) != 0 {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("nodeName"), "cannot be set until all schedulingGates have been cleared"))
	}
	return allErrs
}

func podMetadataAndSpec(p *corev1.Pod) field.ErrorList {
	allErrs := objectMeta(&p.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metadataPath)
	allErrs = append(allErrs, podAnnotations(p.Annotations, &p.Spec, metadataPath.Child("annotations"))...)
	allErrs = append(allErrs, podSpec(&p.Spec, &p.ObjectMeta, specPath, podSpecOpts{resourceIsPod: true})...)
	if p.Spec.ServiceAccountName == "" {
		for vi, v := range p.Spec.Volumes {
			if v.Projected == nil {
				continue
			}
			for si, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil {
					allErrs = append(allErrs, field.Forbidden(specPath.Child("volumes").Index(vi).Child("projected", "sources").Index(si).Child("serviceAccountToken"),
						"must not be specified when serviceAccountName is not set"))
				}
			}
		}
	}
	for i, c := range p.Spec.Containers {
		allErrs = append(allErrs, imageWhitespace(c.Image, specPath.Child("containers").Index(i).Child("image"))...)
	}
	for i, c := range p.Spec.InitContainers {
		allErrs = append(allErrs, imageWhitespace(c.Image, specPath.Child("initContainers").Index(i).Child("image"))...)
	}
	return allErrs
}

// podAnnotations validates the annotations kube gives meaning to on pods:
// the mirror-pod marker needs spec.nodeName, and the deletion cost must be
// a canonical 32-bit integer.
func podAnnotations(a map[string]string, spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if v, ok := a[corev1.MirrorPodAnnotationKey]; ok && spec.NodeName == "" {
		allErrs = append(allErrs, field.Invalid(fldPath.Key(corev1.MirrorPodAnnotationKey), v, "must set spec.nodeName if mirror pod annotation is set"))
	}
	if v, ok := a[corev1.PodDeletionCost]; ok && !validDeletionCost(v) {
		allErrs = append(allErrs, field.Invalid(fldPath.Key(corev1.PodDeletionCost), v, "must be a 32bit integer"))
	}
	return allErrs
}

// validDeletionCost: a base-10 int32 without a plus sign or leading zeros.
func validDeletionCost(v string) bool {
	if v == "" || v[0] == '+' || (v[0] == '0' && v != "0") {
		return false
	}
	_, err := strconv.ParseInt(v, 10, 32)
	return err == nil
}

func podAnnotationUpdates(p, old *corev1.Pod, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	const apparmorPrefix = corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix
	for k, oldVal := range old.Annotations {
		if newVal, ok := p.Annotations[k]; ok && newVal == oldVal {
			continue
		}
		if strings.HasPrefix(k, apparmorPrefix) {
			allErrs = append(allErrs, field.Forbidden(fldPath.Key(k), "may not remove or update AppArmor annotations"))
		}
		if k == corev1.MirrorPodAnnotationKey {
			allErrs = append(allErrs, field.Forbidden(fldPath.Key(k), "may not remove or update mirror pod annotation"))
		}
	}
	for k := range p.Annotations {
		if _, ok := old.Annotations[k]; ok {
			continue
		}
		if strings.HasPrefix(k, apparmorPrefix) {
			allErrs = append(allErrs, field.Forbidden(fldPath.Key(k), "may not add AppArmor annotations"))
		}
		if k == corev1.MirrorPodAnnotationKey {
			allErrs = append(allErrs, field.Forbidden(fldPath.Key(k), "may not add mirror pod annotation"))
		}
	}
	return append(allErrs, podAnnotations(p.Annotations, &p.Spec, fldPath)...)
}

// PodUpdate validates an update of a pod through the main resource. The
// spec is immutable except container and init-container images,
// activeDeadlineSeconds (set or lowered), additions to tolerations, removal
// of scheduling gates, and, while the pod is still gated, additions to its
// node selector and required node affinity. spec.nodeName is only set
// through the binding subresource.
func PodUpdate(p, old *corev1.Pod) field.ErrorList {
	allErrs := objectMetaUpdate(&p.ObjectMeta, &old.ObjectMeta, metadataPath)
	allErrs = append(allErrs, podMetadataAndSpec(p)...)
	allErrs = append(allErrs, podAnnotationUpdates(p, old, metadataPath.Child("annotations"))...)

	errs, stop := containerUpdates(p.Spec.Containers, old.Spec.Containers, specPath.Child("containers"))
	allErrs = append(allErrs, errs...)
	if stop {
		return allErrs
	}
	errs, stop = containerUpdates(p.Spec.InitContainers, old.Spec.InitContainers, specPath.Child("initContainers"))
	allErrs = append(allErrs, errs...)
	if stop {
		return allErrs
	}

	// activeDeadlineSeconds may go from nil to positive, or down.
	adsPath := specPath.Child("activeDeadlineSeconds")
	if ads := p.Spec.ActiveDeadlineSeconds; ads != nil {
		if *ads < 0 || *ads > math.MaxInt32 {
			return append(allErrs, field.Invalid(adsPath, *ads, utilvalidation.InclusiveRangeError(0, math.MaxInt32)))
		}
		if old.Spec.ActiveDeadlineSeconds != nil && *old.Spec.ActiveDeadlineSeconds < *ads {
			return append(allErrs, field.Invalid(adsPath, *ads, "must be less than or equal to previous value"))
		}
	} else if old.Spec.ActiveDeadlineSeconds != nil {
		allErrs = append(allErrs, field.Invalid(adsPath, p.Spec.ActiveDeadlineSeconds, "must not update from a positive integer to nil value"))
	}

	allErrs = append(allErrs, onlyAddedTolerations(p.Spec.Tolerations, old.Spec.Tolerations, specPath.Child("tolerations"))...)
	allErrs = append(allErrs, onlyDeletedSchedulingGates(p.Spec.SchedulingGates, old.Spec.SchedulingGates, specPath.Child("schedulingGates"))...)

	if equality.Semantic.DeepEqual(p.Spec, old.Spec) {
		return allErrs
	}
	munged, errs := mungePodSpecForUpdate(&p.Spec, &old.Spec)
	allErrs = append(allErrs, errs...)
	if !equality.Semantic.DeepEqual(*munged, old.Spec) {
		diff := fieldDiff(old.Spec, *munged)
		allErrs = append(allErrs, field.Forbidden(specPath, fmt.Sprintf("%s\n%v", PodUpdateForbiddenMsg, diff)))
	}
	return allErrs
}

// mungePodSpecForUpdate copies the new spec and puts back the old values
// of every field an update may change, so that what still differs is
// forbidden.
func mungePodSpecForUpdate(spec, old *corev1.PodSpec) (*corev1.PodSpec, field.ErrorList) {
	var allErrs field.ErrorList
	m := spec.DeepCopy()
	for i := range m.Containers {
		m.Containers[i].Image = old.Containers[i].Image
	}
	for i := range m.InitContainers {
		m.InitContainers[i].Image = old.InitContainers[i].Image
	}
	m.ActiveDeadlineSeconds = nil
	if old.ActiveDeadlineSeconds != nil {
		v := *old.ActiveDeadlineSeconds
		m.ActiveDeadlineSeconds = &v
	}
	m.SchedulingGates = old.SchedulingGates
	m.Tolerations = old.Tolerations
	if g := old.TerminationGracePeriodSeconds; g != nil && *g < 0 && m.TerminationGracePeriodSeconds != nil && *m.TerminationGracePeriodSeconds == 1 {
		m.TerminationGracePeriodSeconds = old.TerminationGracePeriodSeconds
	}
	if len(old.SchedulingGates) > 0 {
		// A gated pod may gain node selector entries and node affinity
		// requirements before it is scheduled.
		if !equality.Semantic.DeepEqual(m.NodeSelector, old.NodeSelector) {
			allErrs = append(allErrs, nodeSelectorMutation(specPath.Child("nodeSelector"), m.NodeSelector, old.NodeSelector)...)
			m.NodeSelector = old.NodeSelector
		}
		var oldNA, newNA *corev1.NodeAffinity
		if old.Affinity != nil {
			oldNA = old.Affinity.NodeAffinity
		}
		if m.Affinity != nil {
			newNA = m.Affinity.NodeAffinity
		}
		if !equality.Semantic.DeepEqual(oldNA, newNA) {
			allErrs = append(allErrs, nodeAffinityMutation(specPath.Child("affinity").Child("nodeAffinity"), newNA, oldNA)...)
			switch {
			case m.Affinity == nil && oldNA == nil:
			case m.Affinity == nil:
				m.Affinity = &corev1.Affinity{NodeAffinity: oldNA}
			case old.Affinity == nil && m.Affinity.PodAntiAffinity == nil && m.Affinity.PodAffinity == nil:
				m.Affinity = nil
			default:
				m.Affinity.NodeAffinity = oldNA
			}
		}
	}
	return m, allErrs
}

func containerUpdates(cs, old []corev1.Container, fldPath *field.Path) (field.ErrorList, bool) {
	if len(cs) != len(old) {
		return field.ErrorList{field.Forbidden(fldPath, "pod updates may not add or remove containers")}, true
	}
	var allErrs field.ErrorList
	for i, c := range cs {
		if c.Image == "" {
			allErrs = append(allErrs, field.Required(fldPath.Index(i).Child("image"), ""))
		}
		allErrs = append(allErrs, imageWhitespace(c.Image, fldPath.Index(i).Child("image"))...)
	}
	return allErrs, false
}

func onlyDeletedSchedulingGates(gates, old []corev1.PodSchedulingGate, fldPath *field.Path) field.ErrorList {
	oldNames := map[string]bool{}
	for _, g := range old {
		oldNames[g.Name] = true
	}
	var allErrs field.ErrorList
	for i, g := range gates {
		if !oldNames[g.Name] {
			allErrs = append(allErrs, field.Forbidden(fldPath.Index(i).Child("name"), fmt.Sprintf("only deletion is allowed, but found new scheduling gate '%s'", g.Name)))
		}
	}
	return allErrs
}

func nodeSelectorMutation(fldPath *field.Path, sel, old map[string]string) field.ErrorList {
	for k, v := range old {
		if nv, ok := sel[k]; !ok || nv != v {
			return field.ErrorList{field.Invalid(fldPath, sel, "only additions to spec.nodeSelector are allowed (no mutations or deletions)")}
		}
	}
	return nil
}

func nodeAffinityMutation(fldPath *field.Path, na, old *corev1.NodeAffinity) field.ErrorList {
	if old == nil || old.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	oldTerms := old.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	var terms []corev1.NodeSelectorTerm
	if na != nil && na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	termsPath := fldPath.Child("requiredDuringSchedulingIgnoredDuringExecution").Child("nodeSelectorTerms")
	if len(oldTerms) > 0 && len(oldTerms) != len(terms) {
		return field.ErrorList{field.Invalid(termsPath, terms, "no additions/deletions to non-empty NodeSelectorTerms list are allowed")}
	}
	var allErrs field.ErrorList
	for i := range oldTerms {
		if !termOnlyAdds(terms[i], oldTerms[i]) {
			allErrs = append(allErrs, field.Invalid(termsPath.Index(i), terms[i], "only additions are allowed (no mutations or deletions)"))
		}
	}
	return allErrs
}

func termOnlyAdds(term, old corev1.NodeSelectorTerm) bool {
	if len(old.MatchExpressions) == 0 && len(old.MatchFields) == 0 {
		return len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0
	}
	if l := len(old.MatchExpressions); l > 0 && (len(term.MatchExpressions) < l || !equality.Semantic.DeepEqual(term.MatchExpressions[:l], old.MatchExpressions)) {
		return false
	}
	if l := len(old.MatchFields); l > 0 && (len(term.MatchFields) < l || !equality.Semantic.DeepEqual(term.MatchFields[:l], old.MatchFields)) {
		return false
	}
	return true
}

// PodStatusUpdate validates an update through the status subresource:
// spec.nodeName may not change here, qosClass is immutable, terminated
// containers of non-restarting pods stay terminated, custom conditions
// have qualified names, and podIPs/hostIPs are valid and dual-stack.
func PodStatusUpdate(p, old *corev1.Pod) field.ErrorList {
	allErrs := objectMetaUpdate(&p.ObjectMeta, &old.ObjectMeta, metadataPath)
	allErrs = append(allErrs, podAnnotationUpdates(p, old, metadataPath.Child("annotations"))...)
	// kube reports condition types under metadata; kept as is.
	allErrs = append(allErrs, podConditions(p.Status.Conditions, metadataPath.Child("conditions"))...)

	statusPath := field.NewPath("status")
	if p.Spec.NodeName != old.Spec.NodeName {
		allErrs = append(allErrs, field.Forbidden(statusPath.Child("nodeName"), "may not be changed directly"))
	}
	if n := p.Status.NominatedNodeName; n != old.Status.NominatedNodeName && n != "" {
		allErrs = append(allErrs, dnsSubdomain(n, statusPath.Child("nominatedNodeName"))...)
	}
	allErrs = append(allErrs, immutable(p.Status.QOSClass, old.Status.QOSClass, statusPath.Child("qosClass"))...)
	allErrs = append(allErrs, containerStateTransitions(p.Status.ContainerStatuses, old.Status.ContainerStatuses, statusPath.Child("containerStatuses"), old.Spec.RestartPolicy, nil)...)
	allErrs = append(allErrs, containerStateTransitions(p.Status.InitContainerStatuses, old.Status.InitContainerStatuses, statusPath.Child("initContainerStatuses"), old.Spec.RestartPolicy, old.Spec.InitContainers)...)
	// The kubelet never restarts ephemeral containers.
	allErrs = append(allErrs, containerStateTransitions(p.Status.EphemeralContainerStatuses, old.Status.EphemeralContainerStatuses, statusPath.Child("ephemeralContainerStatuses"), corev1.RestartPolicyNever, nil)...)
	allErrs = append(allErrs, podIPs(p.Status.PodIPs, statusPath.Child("podIPs"))...)
	allErrs = append(allErrs, hostIPs(p, statusPath.Child("hostIPs"))...)
	return allErrs
}

var systemPodConditions = map[corev1.PodConditionType]bool{
	corev1.PodScheduled:   true,
	corev1.PodReady:       true,
	corev1.PodInitialized: true,
}

func podConditions(conds []corev1.PodCondition, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, c := range conds {
		if systemPodConditions[c.Type] {
			continue
		}
		allErrs = append(allErrs, qualifiedName(string(c.Type), fldPath.Index(i).Child("Type"))...)
	}
	return allErrs
}

// containerStateTransitions forbids a terminated container from leaving
// the terminated state unless the restart policy would restart it.
// initContainers, when given, marks restartable (sidecar) init containers.
func containerStateTransitions(statuses, old []corev1.ContainerStatus, fldPath *field.Path, policy corev1.RestartPolicy, initContainers []corev1.Container) field.ErrorList {
	if policy == corev1.RestartPolicyAlways {
		return nil
	}
	var allErrs field.ErrorList
	for i, o := range old {
		if o.State.Terminated == nil {
			continue
		}
		if o.State.Terminated.ExitCode != 0 && policy == corev1.RestartPolicyOnFailure {
			continue
		}
		if isSidecar(o.Name, initContainers) {
			continue
		}
		for _, s := range statuses {
			if s.Name == o.Name && s.State.Terminated == nil {
				allErrs = append(allErrs, field.Forbidden(fldPath.Index(i).Child("state"), "may not be transitioned to non-terminated state"))
			}
		}
	}
	return allErrs
}

func isSidecar(name string, initContainers []corev1.Container) bool {
	for _, c := range initContainers {
		if c.Name == name {
			return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
	}
	return false
}

func podIPs(ips []corev1.PodIP, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	strs := make([]string, 0, len(ips))
	for i, ip := range ips {
		allErrs = append(allErrs, utilvalidation.IsValidIP(fldPath.Index(i), ip.IP)...)
		strs = append(strs, ip.IP)
	}
	if len(ips) > 1 {
		dualStack, err := netutils.IsDualStackIPStrings(strs)
		if err != nil {
			allErrs = append(allErrs, field.InternalError(fldPath, fmt.Errorf("failed to check for dual stack with error:%v", err)))
		}
		if !dualStack || len(ips) > 2 {
			allErrs = append(allErrs, field.Invalid(fldPath, ips, "may specify no more than one IP for each IP family"))
		}
		seen := map[string]bool{}
		for i, ip := range ips {
			if seen[ip.IP] {
				allErrs = append(allErrs, field.Duplicate(fldPath.Index(i), ip))
			}
			seen[ip.IP] = true
		}
	}
	return allErrs
}

func hostIPs(p *corev1.Pod, fldPath *field.Path) field.ErrorList {
	ips := p.Status.HostIPs
	if len(ips) == 0 {
		return nil
	}
	var allErrs field.ErrorList
	if p.Status.HostIP != ips[0].IP {
		allErrs = append(allErrs, field.Invalid(fldPath.Index(0).Child("ip"), ips[0].IP, "must be equal to `hostIP`"))
	}
	strs := make([]string, 0, len(ips))
	for i, ip := range ips {
		allErrs = append(allErrs, utilvalidation.IsValidIP(fldPath.Index(i), ip.IP)...)
		strs = append(strs, ip.IP)
	}
	if len(ips) > 1 {
		seen := map[string]bool{}
		for i, ip := range ips {
			if seen[ip.IP] {
				allErrs = append(allErrs, field.Duplicate(fldPath.Index(i), ip))
			}
			seen[ip.IP] = true
		}
		dualStack, err := netutils.IsDualStackIPStrings(strs)
		if err != nil {
			allErrs = append(allErrs, field.InternalError(fldPath, fmt.Errorf("failed to check for dual stack with error:%v", err)))
		}
		if !dualStack || len(ips) > 2 {
			allErrs = append(allErrs, field.Invalid(fldPath, ips, "may specify no more than one IP for each IP family"))
		}
	}
	return allErrs
}

// PodEphemeralContainersUpdate validates an update through the
// ephemeralcontainers subresource: ephemeral containers may be added but
// never removed or changed, and static pods get none.
func PodEphemeralContainersUpdate(p, old *corev1.Pod) field.ErrorList {
	allErrs := objectMetaUpdate(&p.ObjectMeta, &old.ObjectMeta, metadataPath)
	allErrs = append(allErrs, podMetadataAndSpec(p)...)
	allErrs = append(allErrs, podAnnotationUpdates(p, old, metadataPath.Child("annotations"))...)
	if _, ok := old.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "static pods do not support ephemeral containers")}
	}
	byName := map[string]*corev1.EphemeralContainer{}
	for i := range p.Spec.EphemeralContainers {
		byName[p.Spec.EphemeralContainers[i].Name] = &p.Spec.EphemeralContainers[i]
	}
	ecPath := specPath.Child("ephemeralContainers")
	for _, o := range old.Spec.EphemeralContainers {
		n, ok := byName[o.Name]
		switch {
		case !ok:
			allErrs = append(allErrs, field.Forbidden(ecPath, fmt.Sprintf("existing ephemeral containers %q may not be removed\n", o.Name)))
		case !equality.Semantic.DeepEqual(o, *n):
			allErrs = append(allErrs, field.Forbidden(ecPath, fmt.Sprintf("existing ephemeral containers %q may not be changed\n%v", o.Name, fieldDiff(o, *n))))
		}
	}
	return allErrs
}

// Binding validates a pods/binding request: the target is a Node (or the
// kind is left empty) and has a name.
func Binding(b *corev1.Binding) field.ErrorList {
	var allErrs field.ErrorList
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		allErrs = append(allErrs, field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node", "<empty>"}))
	}
	if b.Target.Name == "" {
		allErrs = append(allErrs, field.Required(field.NewPath("target", "name"), ""))
	}
	return allErrs
}

// Eviction validates a pods/eviction request body: it must name the pod
// and carry valid delete options. That the name matches the pod in the URL
// is a BadRequest the handler reports, not a validation error.
func Eviction(e *policyv1.Eviction) field.ErrorList {
	var allErrs field.ErrorList
	if e.Name == "" {
		allErrs = append(allErrs, field.Required(metadataPath.Child("name"), ""))
	}
	if e.DeleteOptions != nil {
		allErrs = append(allErrs, metav1validation.ValidateDeleteOptions(e.DeleteOptions)...)
	}
	return allErrs
}
