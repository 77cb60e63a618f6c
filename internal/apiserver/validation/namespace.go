package validation

import (
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Namespace validates a namespace on create: the name is a DNS label and
// every spec.finalizers entry is a qualified, known-or-prefixed name.
func Namespace(ns *corev1.Namespace) field.ErrorList {
	allErrs := objectMeta(&ns.ObjectMeta, false, apivalidation.ValidateNamespaceName, metadataPath)
	// kube reports these at spec.finalizers without an index on create.
	for _, f := range ns.Spec.Finalizers {
		allErrs = append(allErrs, finalizerName(string(f), field.NewPath("spec", "finalizers"))...)
	}
	return allErrs
}

// NamespaceUpdate validates a namespace update. kube only checks metadata
// here; spec and status are reset by the registry strategy.
func NamespaceUpdate(ns, old *corev1.Namespace) field.ErrorList {
	return objectMetaUpdate(&ns.ObjectMeta, &old.ObjectMeta, metadataPath)
}

// NamespaceStatusUpdate validates a status update: the phase must be Active
// while the namespace is not being deleted and Terminating once it is.
func NamespaceStatusUpdate(ns, old *corev1.Namespace) field.ErrorList {
	allErrs := objectMetaUpdate(&ns.ObjectMeta, &old.ObjectMeta, metadataPath)
	phasePath := field.NewPath("status", "Phase")
	if ns.DeletionTimestamp.IsZero() {
		if ns.Status.Phase != corev1.NamespaceActive {
			allErrs = append(allErrs, field.Invalid(phasePath, ns.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty"))
		}
	} else if ns.Status.Phase != corev1.NamespaceTerminating {
		allErrs = append(allErrs, field.Invalid(phasePath, ns.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty"))
	}
	return allErrs
}

// NamespaceFinalizeUpdate validates an update through the finalize
// subresource: each spec.finalizers entry must be a valid finalizer name.
func NamespaceFinalizeUpdate(ns, old *corev1.Namespace) field.ErrorList {
	allErrs := objectMetaUpdate(&ns.ObjectMeta, &old.ObjectMeta, metadataPath)
	fldPath := field.NewPath("spec", "finalizers")
	for i, f := range ns.Spec.Finalizers {
		allErrs = append(allErrs, finalizerName(string(f), fldPath.Index(i))...)
	}
	return allErrs
}
