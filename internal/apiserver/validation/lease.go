package validation

import (
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var validLeaseStrategies = []coordinationv1.CoordinatedLeaseStrategy{coordinationv1.OldestEmulationVersion}

// Lease validates a Lease on create: the name is a DNS subdomain,
// leaseDurationSeconds is positive and leaseTransitions non-negative when
// set, strategy is a known or domain-prefixed name, and preferredHolder
// needs a strategy.
func Lease(l *coordinationv1.Lease) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMeta(&l.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metadataPath)
	return append(allErrs, leaseSpec(&l.Spec, specPath)...)
}

// LeaseUpdate validates a Lease update: metadata update rules and the same
// spec rules as create. Every spec field may change.
func LeaseUpdate(l, old *coordinationv1.Lease) field.ErrorList {
	allErrs := metadataUpdate(&l.ObjectMeta, &old.ObjectMeta)
	return append(allErrs, leaseSpec(&l.Spec, specPath)...)
}

func leaseSpec(spec *coordinationv1.LeaseSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if d := spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("leaseDurationSeconds"), d, "must be greater than 0"))
	}
	if t := spec.LeaseTransitions; t != nil && *t < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("leaseTransitions"), t, "must be greater than or equal to 0"))
	}
	if spec.Strategy != nil {
		allErrs = append(allErrs, leaseStrategy(*spec.Strategy, fldPath.Child("strategy"))...)
	}
	if h := spec.PreferredHolder; h != nil && *h != "" && (spec.Strategy == nil || *spec.Strategy == "") {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return allErrs
}

// leaseStrategy: an unprefixed strategy must be one kube defines; a
// prefixed one must be a qualified name. kube appends "strategy" to a path
// that already ends in it ("spec.strategy.strategy"); kept as is.
func leaseStrategy(s coordinationv1.CoordinatedLeaseStrategy, fldPath *field.Path) field.ErrorList {
	p := fldPath.Child("strategy")
	if !strings.Contains(string(s), "/") {
		for _, v := range validLeaseStrategies {
			if s == v {
				return nil
			}
		}
		return field.ErrorList{field.NotSupported(p, s, validLeaseStrategies)}
	}
	return qualifiedName(string(s), p)
}
