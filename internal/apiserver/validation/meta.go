package validation

import (
	"fmt"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

const (
	isNegativeErrorMsg    = apivalidation.IsNegativeErrorMsg
	isNotPositiveErrorMsg = `must be greater than zero`
	isNotIntegerErrorMsg  = `must be an integer`
	fieldImmutableMsg     = apivalidation.FieldImmutableErrorMsg
)

// metadataPath is the root of every object's metadata errors.
var metadataPath = field.NewPath("metadata")

// ObjectMeta validates the metadata of an object being created: name (with
// nameFn), namespace presence (namespaced) or absence, labels, annotations,
// owner references and finalizers. Errors are reported under "metadata".
func ObjectMeta(meta *metav1.ObjectMeta, namespaced bool, nameFn apivalidation.ValidateNameFunc) field.ErrorList {
	return objectMeta(meta, namespaced, nameFn, metadataPath)
}

// ObjectMetaUpdate validates the metadata of an object being updated: name,
// namespace, uid and creationTimestamp are immutable, resourceVersion must be
// set, generation may not go down, labels and annotations must stay valid.
func ObjectMetaUpdate(meta, old *metav1.ObjectMeta) field.ErrorList {
	return objectMetaUpdate(meta, old, metadataPath)
}

// GenericObjectMeta is the metadata check kube's generic registry runs on
// every created object after the kind's own validation: name (as a path
// segment), namespace, labels, annotations, owner references, finalizers.
// Use it for kinds without a function here (ConfigMap, Secret, ...) and
// after the kind's function, as kube does, for the rest.
func GenericObjectMeta(obj metav1.Object, namespaced bool) field.ErrorList {
	return apivalidation.ValidateObjectMetaAccessor(obj, namespaced, path.ValidatePathSegmentName, metadataPath)
}

// GenericObjectMetaUpdate is the metadata check kube's generic registry
// runs on every update after the kind's own validation.
func GenericObjectMetaUpdate(obj, old metav1.Object) field.ErrorList {
	return apivalidation.ValidateObjectMetaAccessorUpdate(obj, old, metadataPath)
}

func objectMeta(meta *metav1.ObjectMeta, namespaced bool, nameFn apivalidation.ValidateNameFunc, fldPath *field.Path) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMeta(meta, namespaced, nameFn, fldPath)
	for i := range meta.Finalizers {
		allErrs = append(allErrs, kubeFinalizerName(meta.Finalizers[i], fldPath.Child("finalizers").Index(i))...)
	}
	return allErrs
}

func objectMetaUpdate(meta, old *metav1.ObjectMeta, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if fldPath == metadataPath {
		allErrs = metadataUpdate(meta, old)
	} else {
		allErrs = apivalidation.ValidateObjectMetaUpdate(meta, old, fldPath)
	}
	for i := range meta.Finalizers {
		allErrs = append(allErrs, kubeFinalizerName(meta.Finalizers[i], fldPath.Child("finalizers").Index(i))...)
	}
	return allErrs
}

// The paths of the metadata checks that do not depend on the old object,
// built once: a field.Path is immutable.
var (
	labelsPath          = metadataPath.Child("labels")
	annotationsPath     = metadataPath.Child("annotations")
	ownerReferencesPath = metadataPath.Child("ownerReferences")
	managedFieldsPath   = metadataPath.Child("managedFields")
)

// metadataUpdate returns exactly what
// apivalidation.ValidateObjectMetaUpdate(meta, old, metadataPath) returns.
// Upstream builds eleven field paths on every call, errors or not; on an
// update that keeps every immutable field (the common case, and every
// renewal of a Lease: the handler copies uid, creationTimestamp,
// deletionTimestamp, deletionGracePeriodSeconds and generation from the
// stored object before validating), those checks cannot fail, so only the
// checks of labels, annotations, owner references and managed fields run,
// with paths built once. Anything else goes to upstream unchanged.
// TestMetadataUpdateIsUpstreams compares both on valid and invalid updates.
func metadataUpdate(meta, old *metav1.ObjectMeta) field.ErrorList {
	if !immutableMetaKept(meta, old) {
		return apivalidation.ValidateObjectMetaUpdate(meta, old, metadataPath)
	}
	var allErrs field.ErrorList
	if len(meta.Labels) > 0 {
		allErrs = append(allErrs, metav1validation.ValidateLabels(meta.Labels, labelsPath)...)
	}
	if len(meta.Annotations) > 0 {
		allErrs = append(allErrs, apivalidation.ValidateAnnotations(meta.Annotations, annotationsPath)...)
	}
	if len(meta.OwnerReferences) > 0 {
		allErrs = append(allErrs, apivalidation.ValidateOwnerReferences(meta.OwnerReferences, ownerReferencesPath)...)
	}
	if len(meta.ManagedFields) > 0 {
		allErrs = append(allErrs, metav1validation.ValidateManagedFields(meta.ManagedFields, managedFieldsPath, metav1validation.CoveredByDeclarative)...)
	}
	return allErrs
}

// immutableMetaKept reports whether every check of
// apivalidation.ValidateObjectMetaAccessorUpdate other than those of
// labels, annotations, owner references and managed fields passes: the
// old object is not being deleted (so no finalizer check), a
// resourceVersion is set, generation is non-negative and not decremented,
// and name, namespace, uid, creationTimestamp (compared as
// apiequality.Semantic does), deletionTimestamp and
// deletionGracePeriodSeconds are unchanged.
func immutableMetaKept(meta, old *metav1.ObjectMeta) bool {
	return old.DeletionTimestamp == nil && meta.DeletionTimestamp == nil &&
		meta.ResourceVersion != "" &&
		meta.Generation >= 0 && meta.Generation >= old.Generation &&
		meta.Name == old.Name && meta.Namespace == old.Namespace && meta.UID == old.UID &&
		meta.CreationTimestamp.UTC() == old.CreationTimestamp.UTC() &&
		ptr.Equal(meta.DeletionGracePeriodSeconds, old.DeletionGracePeriodSeconds)
}

// standardFinalizers are the finalizer names kube accepts without a domain
// prefix.
var standardFinalizers = map[string]bool{
	"kubernetes":                     true,
	metav1.FinalizerOrphanDependents: true,
	metav1.FinalizerDeleteDependents: true,
}

// kubeFinalizerName rejects unprefixed finalizer names that kube does not
// define itself.
func kubeFinalizerName(name string, fldPath *field.Path) field.ErrorList {
	if !strings.Contains(name, "/") && !standardFinalizers[name] {
		return field.ErrorList{field.Invalid(fldPath, name, "name is neither a standard finalizer name nor is it fully qualified")}
	}
	return nil
}

// finalizerName applies both the generic and the kube-specific finalizer
// name rules.
func finalizerName(name string, fldPath *field.Path) field.ErrorList {
	allErrs := apivalidation.ValidateFinalizerName(name, fldPath)
	return append(allErrs, kubeFinalizerName(name, fldPath)...)
}

// invalidEach turns the messages of a utilvalidation.Is* check into one
// Invalid error each.
func invalidEach(fldPath *field.Path, value any, msgs []string) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range msgs {
		allErrs = append(allErrs, field.Invalid(fldPath, value, msg))
	}
	return allErrs
}

func labels(l map[string]string, fldPath *field.Path) field.ErrorList {
	return metav1validation.ValidateLabels(l, fldPath)
}

func annotations(a map[string]string, fldPath *field.Path) field.ErrorList {
	return apivalidation.ValidateAnnotations(a, fldPath)
}

func dnsLabel(value string, fldPath *field.Path) field.ErrorList {
	return invalidEach(fldPath, value, utilvalidation.IsDNS1123Label(value))
}

func dnsSubdomain(value string, fldPath *field.Path) field.ErrorList {
	return invalidEach(fldPath, value, utilvalidation.IsDNS1123Subdomain(value))
}

func qualifiedName(value string, fldPath *field.Path) field.ErrorList {
	return invalidEach(fldPath, value, utilvalidation.IsQualifiedName(value))
}

func nonNegative(value int64, fldPath *field.Path) field.ErrorList {
	return apivalidation.ValidateNonnegativeField(value, fldPath)
}

// immutable reports an Invalid "field is immutable" error when the values
// differ semantically.
func immutable(newVal, oldVal any, fldPath *field.Path) field.ErrorList {
	return apivalidation.ValidateImmutableField(newVal, oldVal, fldPath)
}

// isDecremented reports whether an optional counter went down or was cleared.
func isDecremented(update, old *int32) bool {
	if update == nil && old != nil {
		return true
	}
	if update == nil || old == nil {
		return false
	}
	return *update < *old
}

func derefInt32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func mustBeAtMost(n int) string { return fmt.Sprintf("can have at most %v characters", n) }
