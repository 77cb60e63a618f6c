package validation

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PodTemplateSpec validates a pod template embedded in a workload: labels
// and annotations, the pod spec (as a template, so host ports may stay 0
// with hostNetwork), and no ephemeral containers. fldPath is the template's
// path, e.g. spec.template. kube reports template labels at
// <path>.labels, not <path>.metadata.labels; kept as is.
func PodTemplateSpec(t *corev1.PodTemplateSpec, fldPath *field.Path) field.ErrorList {
	allErrs := labels(t.Labels, fldPath.Child("labels"))
	allErrs = append(allErrs, annotations(t.Annotations, fldPath.Child("annotations"))...)
	allErrs = append(allErrs, podAnnotations(t.Annotations, &t.Spec, fldPath.Child("annotations"))...)
	allErrs = append(allErrs, podSpec(&t.Spec, nil, fldPath.Child("spec"), podSpecOpts{})...)
	if len(t.Spec.EphemeralContainers) > 0 {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("spec", "ephemeralContainers"), "ephemeral containers not allowed in pod template"))
	}
	return allErrs
}

// workloadTemplate validates a ReplicaSet or Deployment template: it must
// match the selector, restart Always and have no active deadline.
func workloadTemplate(t *corev1.PodTemplateSpec, selector k8slabels.Selector, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if !selector.Empty() && !selector.Matches(k8slabels.Set(t.Labels)) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("metadata", "labels"), t.Labels, "`selector` does not match template `labels`"))
	}
	allErrs = append(allErrs, PodTemplateSpec(t, fldPath)...)
	if t.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("spec", "restartPolicy"), t.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if t.Spec.ActiveDeadlineSeconds != nil {
		// kube says ReplicaSet here for Deployments too.
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in ReplicaSet is not Supported"))
	}
	return allErrs
}

// requiredSelector validates a workload selector that must be set and
// non-empty, then the template against it.
func requiredSelector(sel *metav1.LabelSelector, t *corev1.PodTemplateSpec, specPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	selPath := specPath.Child("selector")
	if sel == nil {
		allErrs = append(allErrs, field.Required(selPath, ""))
	} else {
		allErrs = append(allErrs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, selPath)...)
		if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
			// kube says deployment for ReplicaSets too.
			allErrs = append(allErrs, field.Invalid(selPath, sel, "empty selector is invalid for deployment"))
		}
	}
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return append(allErrs, field.Invalid(selPath, sel, "invalid label selector"))
	}
	return append(allErrs, workloadTemplate(t, selector, specPath.Child("template"))...)
}

// Deployment validates an apps/v1 Deployment on create: replicas >= 0, a
// selector that matches the template labels, a valid pod template, a
// known strategy whose maxSurge and maxUnavailable are not both 0, and
// progressDeadlineSeconds > minReadySeconds.
func Deployment(d *appsv1.Deployment) field.ErrorList {
	allErrs := objectMeta(&d.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metadataPath)
	return append(allErrs, deploymentSpec(&d.Spec, specPath)...)
}

// DeploymentUpdate validates a Deployment update; spec.selector is
// immutable in apps/v1.
func DeploymentUpdate(d, old *appsv1.Deployment) field.ErrorList {
	allErrs := objectMetaUpdate(&d.ObjectMeta, &old.ObjectMeta, metadataPath)
	allErrs = append(allErrs, deploymentSpec(&d.Spec, specPath)...)
	return append(allErrs, immutable(d.Spec.Selector, old.Spec.Selector, specPath.Child("selector"))...)
}

// DeploymentStatusUpdate validates an update through the status
// subresource: counters are non-negative and consistent.
func DeploymentStatusUpdate(d, old *appsv1.Deployment) field.ErrorList {
	allErrs := objectMetaUpdate(&d.ObjectMeta, &old.ObjectMeta, metadataPath)
	s, p := &d.Status, field.NewPath("status")
	allErrs = append(allErrs, nonNegative(s.ObservedGeneration, p.Child("observedGeneration"))...)
	allErrs = append(allErrs, replicaCounts(p, []replicaCount{
		{"replicas", s.Replicas}, {"updatedReplicas", s.UpdatedReplicas}, {"readyReplicas", s.ReadyReplicas},
		{"availableReplicas", s.AvailableReplicas}, {"unavailableReplicas", s.UnavailableReplicas},
	})...)
	if s.CollisionCount != nil {
		allErrs = append(allErrs, nonNegative(int64(*s.CollisionCount), p.Child("collisionCount"))...)
	}
	const msg = "cannot be greater than status.replicas"
	if s.UpdatedReplicas > s.Replicas {
		allErrs = append(allErrs, field.Invalid(p.Child("updatedReplicas"), s.UpdatedReplicas, msg))
	}
	allErrs = append(allErrs, readyAvailable(p, s.Replicas, s.ReadyReplicas, s.AvailableReplicas)...)
	return append(allErrs, collisionCountDecrement(s.CollisionCount, old.Status.CollisionCount, p)...)
}

func deploymentSpec(spec *appsv1.DeploymentSpec, fldPath *field.Path) field.ErrorList {
	allErrs := nonNegative(int64(derefInt32(spec.Replicas)), fldPath.Child("replicas"))
	allErrs = append(allErrs, requiredSelector(spec.Selector, &spec.Template, fldPath)...)
	allErrs = append(allErrs, deploymentStrategy(&spec.Strategy, fldPath.Child("strategy"))...)
	allErrs = append(allErrs, nonNegative(int64(spec.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	if spec.RevisionHistoryLimit != nil {
		allErrs = append(allErrs, nonNegative(int64(*spec.RevisionHistoryLimit), fldPath.Child("revisionHistoryLimit"))...)
	}
	if pds := spec.ProgressDeadlineSeconds; pds != nil {
		allErrs = append(allErrs, nonNegative(int64(*pds), fldPath.Child("progressDeadlineSeconds"))...)
		if *pds <= spec.MinReadySeconds {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("progressDeadlineSeconds"), pds, "must be greater than minReadySeconds"))
		}
	}
	return allErrs
}

func deploymentStrategy(s *appsv1.DeploymentStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			return field.ErrorList{field.Forbidden(fldPath.Child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'")}
		}
		return nil
	case appsv1.RollingUpdateDeploymentStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "this should be defaulted and never be nil")}
		}
		ruPath := fldPath.Child("rollingUpdate")
		maxUnavailable, maxSurge := intOrZero(s.RollingUpdate.MaxUnavailable), intOrZero(s.RollingUpdate.MaxSurge)
		allErrs := intOrPercent(maxUnavailable, ruPath.Child("maxUnavailable"))
		allErrs = append(allErrs, intOrPercent(maxSurge, ruPath.Child("maxSurge"))...)
		if intOrPercentValue(maxUnavailable) == 0 && intOrPercentValue(maxSurge) == 0 {
			allErrs = append(allErrs, field.Invalid(ruPath.Child("maxUnavailable"), maxUnavailable, "may not be 0 when `maxSurge` is 0"))
		}
		return append(allErrs, notMoreThan100Percent(maxUnavailable, ruPath.Child("maxUnavailable"))...)
	}
	return field.ErrorList{field.NotSupported(fldPath, *s, []string{string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType)})}
}

func intOrZero(v *intstr.IntOrString) intstr.IntOrString {
	if v == nil {
		return intstr.FromInt32(0)
	}
	return *v
}

// intOrPercent: a non-negative integer or a percentage like "25%".
func intOrPercent(v intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	if v.Type == intstr.String {
		return invalidEach(fldPath, v, utilvalidation.IsValidPercent(v.StrVal))
	}
	return nonNegative(int64(v.IntValue()), fldPath)
}

func percentValue(v intstr.IntOrString) (int, bool) {
	if v.Type != intstr.String || len(utilvalidation.IsValidPercent(v.StrVal)) != 0 {
		return 0, false
	}
	n, _ := strconv.Atoi(v.StrVal[:len(v.StrVal)-1])
	return n, true
}

func intOrPercentValue(v intstr.IntOrString) int {
	if n, ok := percentValue(v); ok {
		return n
	}
	return v.IntValue()
}

func notMoreThan100Percent(v intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	if n, ok := percentValue(v); ok && n > 100 {
		return field.ErrorList{field.Invalid(fldPath, v, "must not be greater than 100%")}
	}
	return nil
}

// ReplicaSet validates an apps/v1 ReplicaSet on create.
func ReplicaSet(rs *appsv1.ReplicaSet) field.ErrorList {
	allErrs := objectMeta(&rs.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metadataPath)
	return append(allErrs, replicaSetSpec(&rs.Spec, specPath)...)
}

// ReplicaSetUpdate validates a ReplicaSet update; spec.selector is
// immutable in apps/v1.
func ReplicaSetUpdate(rs, old *appsv1.ReplicaSet) field.ErrorList {
	allErrs := objectMetaUpdate(&rs.ObjectMeta, &old.ObjectMeta, metadataPath)
	allErrs = append(allErrs, replicaSetSpec(&rs.Spec, specPath)...)
	return append(allErrs, immutable(rs.Spec.Selector, old.Spec.Selector, specPath.Child("selector"))...)
}

// ReplicaSetStatusUpdate validates an update through the status
// subresource.
func ReplicaSetStatusUpdate(rs, old *appsv1.ReplicaSet) field.ErrorList {
	allErrs := objectMetaUpdate(&rs.ObjectMeta, &old.ObjectMeta, metadataPath)
	s, p := &rs.Status, field.NewPath("status")
	allErrs = append(allErrs, replicaCounts(p, []replicaCount{
		{"replicas", s.Replicas}, {"fullyLabeledReplicas", s.FullyLabeledReplicas},
		{"readyReplicas", s.ReadyReplicas}, {"availableReplicas", s.AvailableReplicas},
	})...)
	allErrs = append(allErrs, nonNegative(s.ObservedGeneration, p.Child("observedGeneration"))...)
	if s.FullyLabeledReplicas > s.Replicas {
		allErrs = append(allErrs, field.Invalid(p.Child("fullyLabeledReplicas"), s.FullyLabeledReplicas, "cannot be greater than status.replicas"))
	}
	return append(allErrs, readyAvailable(p, s.Replicas, s.ReadyReplicas, s.AvailableReplicas)...)
}

func replicaSetSpec(spec *appsv1.ReplicaSetSpec, fldPath *field.Path) field.ErrorList {
	allErrs := nonNegative(int64(derefInt32(spec.Replicas)), fldPath.Child("replicas"))
	allErrs = append(allErrs, nonNegative(int64(spec.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	return append(allErrs, requiredSelector(spec.Selector, &spec.Template, fldPath)...)
}

// DaemonSet validates an apps/v1 DaemonSet on create: a non-empty selector
// matching the template labels, a valid template that restarts Always, and
// an update strategy where exactly one of maxSurge and maxUnavailable is
// non-zero.
func DaemonSet(ds *appsv1.DaemonSet) field.ErrorList {
	allErrs := objectMeta(&ds.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metadataPath)
	return append(allErrs, daemonSetSpec(&ds.Spec, specPath)...)
}

// DaemonSetUpdate validates a DaemonSet update; spec.selector is
// immutable in apps/v1.
func DaemonSetUpdate(ds, old *appsv1.DaemonSet) field.ErrorList {
	allErrs := objectMetaUpdate(&ds.ObjectMeta, &old.ObjectMeta, metadataPath)
	allErrs = append(allErrs, daemonSetSpec(&ds.Spec, specPath)...)
	return append(allErrs, immutable(ds.Spec.Selector, old.Spec.Selector, specPath.Child("selector"))...)
}

// DaemonSetStatusUpdate validates an update through the status
// subresource.
func DaemonSetStatusUpdate(ds, old *appsv1.DaemonSet) field.ErrorList {
	allErrs := objectMetaUpdate(&ds.ObjectMeta, &old.ObjectMeta, metadataPath)
	s, p := &ds.Status, field.NewPath("status")
	allErrs = append(allErrs, replicaCounts(p, []replicaCount{
		{"currentNumberScheduled", s.CurrentNumberScheduled}, {"numberMisscheduled", s.NumberMisscheduled},
		{"desiredNumberScheduled", s.DesiredNumberScheduled}, {"numberReady", s.NumberReady},
	})...)
	allErrs = append(allErrs, nonNegative(s.ObservedGeneration, p.Child("observedGeneration"))...)
	allErrs = append(allErrs, replicaCounts(p, []replicaCount{
		{"updatedNumberScheduled", s.UpdatedNumberScheduled}, {"numberAvailable", s.NumberAvailable}, {"numberUnavailable", s.NumberUnavailable},
	})...)
	if s.CollisionCount != nil {
		allErrs = append(allErrs, nonNegative(int64(*s.CollisionCount), p.Child("collisionCount"))...)
	}
	return append(allErrs, collisionCountDecrement(s.CollisionCount, old.Status.CollisionCount, p)...)
}

func daemonSetSpec(spec *appsv1.DaemonSetSpec, fldPath *field.Path) field.ErrorList {
	selPath := fldPath.Child("selector")
	allErrs := metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, selPath)
	if selector, err := metav1.LabelSelectorAsSelector(spec.Selector); err == nil && !selector.Matches(k8slabels.Set(spec.Template.Labels)) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("template", "metadata", "labels"), spec.Template.Labels, "`selector` does not match template `labels`"))
	}
	if spec.Selector != nil && len(spec.Selector.MatchLabels)+len(spec.Selector.MatchExpressions) == 0 {
		allErrs = append(allErrs, field.Invalid(selPath, spec.Selector, "empty selector is invalid for daemonset"))
	}
	tPath := fldPath.Child("template")
	allErrs = append(allErrs, PodTemplateSpec(&spec.Template, tPath)...)
	if spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		allErrs = append(allErrs, field.NotSupported(tPath.Child("spec", "restartPolicy"), spec.Template.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if spec.Template.Spec.ActiveDeadlineSeconds != nil {
		allErrs = append(allErrs, field.Forbidden(tPath.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in DaemonSet is not Supported"))
	}
	allErrs = append(allErrs, nonNegative(int64(spec.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	allErrs = append(allErrs, daemonSetUpdateStrategy(&spec.UpdateStrategy, fldPath.Child("updateStrategy"))...)
	if spec.RevisionHistoryLimit != nil {
		allErrs = append(allErrs, nonNegative(int64(*spec.RevisionHistoryLimit), fldPath.Child("revisionHistoryLimit"))...)
	}
	return allErrs
}

func daemonSetUpdateStrategy(s *appsv1.DaemonSetUpdateStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
		return nil
	case appsv1.RollingUpdateDaemonSetStrategyType:
		ruPath := fldPath.Child("rollingUpdate")
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(ruPath, "")}
		}
		maxUnavailable, maxSurge := intOrZero(s.RollingUpdate.MaxUnavailable), intOrZero(s.RollingUpdate.MaxSurge)
		allErrs := intOrPercent(maxUnavailable, ruPath.Child("maxUnavailable"))
		allErrs = append(allErrs, intOrPercent(maxSurge, ruPath.Child("maxSurge"))...)
		allErrs = append(allErrs, notMoreThan100Percent(maxUnavailable, ruPath.Child("maxUnavailable"))...)
		allErrs = append(allErrs, notMoreThan100Percent(maxSurge, ruPath.Child("maxSurge"))...)
		hasUnavailable, hasSurge := intOrPercentValue(maxUnavailable) != 0, intOrPercentValue(maxSurge) != 0
		switch {
		case hasUnavailable && hasSurge:
			allErrs = append(allErrs, field.Invalid(ruPath.Child("maxSurge"), maxSurge, "may not be set when maxUnavailable is non-zero"))
		case !hasUnavailable && !hasSurge:
			allErrs = append(allErrs, field.Required(ruPath.Child("maxUnavailable"), "cannot be 0 when maxSurge is 0"))
		}
		return allErrs
	}
	return field.ErrorList{field.NotSupported(fldPath, *s, []string{string(appsv1.RollingUpdateDaemonSetStrategyType), string(appsv1.OnDeleteDaemonSetStrategyType)})}
}

type replicaCount struct {
	name  string
	value int32
}

func replicaCounts(p *field.Path, counts []replicaCount) field.ErrorList {
	var allErrs field.ErrorList
	for _, c := range counts {
		allErrs = append(allErrs, nonNegative(int64(c.value), p.Child(c.name))...)
	}
	return allErrs
}

func readyAvailable(p *field.Path, replicas, ready, available int32) field.ErrorList {
	var allErrs field.ErrorList
	const msg = "cannot be greater than status.replicas"
	if ready > replicas {
		allErrs = append(allErrs, field.Invalid(p.Child("readyReplicas"), ready, msg))
	}
	if available > replicas {
		allErrs = append(allErrs, field.Invalid(p.Child("availableReplicas"), available, msg))
	}
	if available > ready {
		allErrs = append(allErrs, field.Invalid(p.Child("availableReplicas"), available, "cannot be greater than readyReplicas"))
	}
	return allErrs
}

func collisionCountDecrement(count, old *int32, p *field.Path) field.ErrorList {
	if isDecremented(count, old) {
		return field.ErrorList{field.Invalid(p.Child("collisionCount"), derefInt32(count), "cannot be decremented")}
	}
	return nil
}

// StatefulSet validates an apps/v1 StatefulSet on create: a selector
// matching the template labels, a valid template that restarts Always,
// known pod management and update strategies, a non-negative partition,
// known claim retention policies and claim templates with distinct,
// valid names.
func StatefulSet(ss *appsv1.StatefulSet) field.ErrorList {
	allErrs := objectMeta(&ss.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metadataPath)
	return append(allErrs, statefulSetSpec(&ss.Spec, specPath)...)
}

// StatefulSetUpdate validates a StatefulSet update: as upstream, only
// replicas, ordinals, template, updateStrategy, revisionHistoryLimit,
// persistentVolumeClaimRetentionPolicy and minReadySeconds may change.
func StatefulSetUpdate(ss, old *appsv1.StatefulSet) field.ErrorList {
	allErrs := objectMetaUpdate(&ss.ObjectMeta, &old.ObjectMeta, metadataPath)
	allErrs = append(allErrs, statefulSetSpec(&ss.Spec, specPath)...)
	rest, oldRest := ss.Spec.DeepCopy(), old.Spec.DeepCopy()
	for _, s := range []*appsv1.StatefulSetSpec{rest, oldRest} {
		s.Replicas, s.Ordinals, s.Template, s.UpdateStrategy = nil, nil, corev1.PodTemplateSpec{}, appsv1.StatefulSetUpdateStrategy{}
		s.RevisionHistoryLimit, s.PersistentVolumeClaimRetentionPolicy, s.MinReadySeconds = nil, nil, 0
	}
	if !apiequality.Semantic.DeepEqual(rest, oldRest) {
		allErrs = append(allErrs, field.Forbidden(specPath, "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"))
	}
	return allErrs
}

// StatefulSetStatusUpdate validates an update through the status
// subresource.
func StatefulSetStatusUpdate(ss, old *appsv1.StatefulSet) field.ErrorList {
	allErrs := objectMetaUpdate(&ss.ObjectMeta, &old.ObjectMeta, metadataPath)
	s, p := &ss.Status, field.NewPath("status")
	allErrs = append(allErrs, replicaCounts(p, []replicaCount{
		{"replicas", s.Replicas}, {"readyReplicas", s.ReadyReplicas}, {"currentReplicas", s.CurrentReplicas},
		{"updatedReplicas", s.UpdatedReplicas}, {"availableReplicas", s.AvailableReplicas},
	})...)
	allErrs = append(allErrs, nonNegative(s.ObservedGeneration, p.Child("observedGeneration"))...)
	const msg = "cannot be greater than status.replicas"
	for _, c := range []replicaCount{{"currentReplicas", s.CurrentReplicas}, {"updatedReplicas", s.UpdatedReplicas}} {
		if c.value > s.Replicas {
			allErrs = append(allErrs, field.Invalid(p.Child(c.name), c.value, msg))
		}
	}
	allErrs = append(allErrs, readyAvailable(p, s.Replicas, s.ReadyReplicas, s.AvailableReplicas)...)
	return append(allErrs, collisionCountDecrement(s.CollisionCount, old.Status.CollisionCount, p)...)
}

func statefulSetSpec(spec *appsv1.StatefulSetSpec, fldPath *field.Path) field.ErrorList {
	allErrs := nonNegative(int64(derefInt32(spec.Replicas)), fldPath.Child("replicas"))
	allErrs = append(allErrs, nonNegative(int64(spec.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	if spec.Ordinals != nil {
		allErrs = append(allErrs, nonNegative(int64(spec.Ordinals.Start), fldPath.Child("ordinals", "start"))...)
	}
	switch spec.PodManagementPolicy {
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	default:
		allErrs = append(allErrs, field.Invalid(fldPath.Child("podManagementPolicy"), spec.PodManagementPolicy,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement)))
	}
	us, usPath := spec.UpdateStrategy, fldPath.Child("updateStrategy")
	switch us.Type {
	case appsv1.OnDeleteStatefulSetStrategyType:
		if us.RollingUpdate != nil {
			allErrs = append(allErrs, field.Invalid(usPath.Child("rollingUpdate"), us.RollingUpdate,
				fmt.Sprintf("only allowed for updateStrategy '%s'", appsv1.RollingUpdateStatefulSetStrategyType)))
		}
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if us.RollingUpdate != nil && us.RollingUpdate.Partition != nil {
			allErrs = append(allErrs, nonNegative(int64(*us.RollingUpdate.Partition), usPath.Child("rollingUpdate", "partition"))...)
		}
	default:
		allErrs = append(allErrs, field.Invalid(usPath, us,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType)))
	}
	if rp := spec.PersistentVolumeClaimRetentionPolicy; rp != nil {
		rpPath := fldPath.Child("persistentVolumeClaimRetentionPolicy")
		ok := []string{string(appsv1.RetainPersistentVolumeClaimRetentionPolicyType), string(appsv1.DeletePersistentVolumeClaimRetentionPolicyType)}
		for name, v := range map[string]appsv1.PersistentVolumeClaimRetentionPolicyType{"whenDeleted": rp.WhenDeleted, "whenScaled": rp.WhenScaled} {
			if v != appsv1.RetainPersistentVolumeClaimRetentionPolicyType && v != appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
				allErrs = append(allErrs, field.NotSupported(rpPath.Child(name), v, ok))
			}
		}
	}
	seen := map[string]bool{}
	for i, t := range spec.VolumeClaimTemplates {
		p := fldPath.Child("volumeClaimTemplates").Index(i).Child("metadata", "name")
		switch {
		case t.Name == "":
			allErrs = append(allErrs, field.Required(p, ""))
		case seen[t.Name]:
			allErrs = append(allErrs, field.Duplicate(p, t.Name))
		default:
			for _, msg := range apivalidation.NameIsDNSSubdomain(t.Name, false) {
				allErrs = append(allErrs, field.Invalid(p, t.Name, msg))
			}
		}
		seen[t.Name] = true
	}
	// The controller gives each pod a claim volume per claim template, so
	// the template's mounts may name them (upstream does not check the
	// template's volumes against its mounts for the same reason).
	tmpl := withClaimVolumes(&spec.Template, spec.VolumeClaimTemplates)
	return append(allErrs, requiredSelector(spec.Selector, tmpl, fldPath)...)
}

// withClaimVolumes returns t with a persistentVolumeClaim volume for each
// claim template whose name no template volume has.
func withClaimVolumes(t *corev1.PodTemplateSpec, claims []corev1.PersistentVolumeClaim) *corev1.PodTemplateSpec {
	if len(claims) == 0 {
		return t
	}
	have := map[string]bool{}
	for _, v := range t.Spec.Volumes {
		have[v.Name] = true
	}
	out := t.DeepCopy()
	for _, c := range claims {
		if c.Name == "" || have[c.Name] {
			continue
		}
		have[c.Name] = true
		out.Spec.Volumes = append(out.Spec.Volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name},
		}})
	}
	return out
}

// ControllerRevision validates an apps/v1 ControllerRevision on create: a
// valid name and a non-negative revision.
func ControllerRevision(cr *appsv1.ControllerRevision) field.ErrorList {
	allErrs := objectMeta(&cr.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metadataPath)
	return append(allErrs, nonNegative(cr.Revision, field.NewPath("revision"))...)
}

// ControllerRevisionUpdate validates an update: data is immutable.
func ControllerRevisionUpdate(cr, old *appsv1.ControllerRevision) field.ErrorList {
	allErrs := objectMetaUpdate(&cr.ObjectMeta, &old.ObjectMeta, metadataPath)
	allErrs = append(allErrs, nonNegative(cr.Revision, field.NewPath("revision"))...)
	if !apiequality.Semantic.DeepEqual(cr.Data, old.Data) {
		allErrs = append(allErrs, field.Invalid(field.NewPath("data"), "", "field is immutable"))
	}
	return allErrs
}
