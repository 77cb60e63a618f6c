package validation

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Resource-name classes as kube defines them (pkg/apis/core/helper).

var standardContainerResources = map[corev1.ResourceName]bool{
	corev1.ResourceCPU:              true,
	corev1.ResourceMemory:           true,
	corev1.ResourceEphemeralStorage: true,
}

var standardResources = map[corev1.ResourceName]bool{
	corev1.ResourceCPU:                      true,
	corev1.ResourceMemory:                   true,
	corev1.ResourceEphemeralStorage:         true,
	corev1.ResourceRequestsCPU:              true,
	corev1.ResourceRequestsMemory:           true,
	corev1.ResourceRequestsEphemeralStorage: true,
	corev1.ResourceLimitsCPU:                true,
	corev1.ResourceLimitsMemory:             true,
	corev1.ResourceLimitsEphemeralStorage:   true,
	corev1.ResourcePods:                     true,
	corev1.ResourceQuotas:                   true,
	corev1.ResourceServices:                 true,
	corev1.ResourceReplicationControllers:   true,
	corev1.ResourceSecrets:                  true,
	corev1.ResourcePersistentVolumeClaims:   true,
	corev1.ResourceConfigMaps:               true,
	corev1.ResourceServicesNodePorts:        true,
	corev1.ResourceServicesLoadBalancers:    true,
	corev1.ResourceStorage:                  true,
	corev1.ResourceRequestsStorage:          true,
}

var integerResources = map[corev1.ResourceName]bool{
	corev1.ResourcePods:                   true,
	corev1.ResourceQuotas:                 true,
	corev1.ResourceServices:               true,
	corev1.ResourceReplicationControllers: true,
	corev1.ResourceSecrets:                true,
	corev1.ResourceConfigMaps:             true,
	corev1.ResourcePersistentVolumeClaims: true,
	corev1.ResourceServicesNodePorts:      true,
	corev1.ResourceServicesLoadBalancers:  true,
}

func isHugePageResourceName(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// isNativeResource: unprefixed or in the kubernetes.io domain.
func isNativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}

func isExtendedResourceName(name corev1.ResourceName) bool {
	if isNativeResource(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(utilvalidation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(name))) == 0
}

func isStandardResourceName(name corev1.ResourceName) bool {
	return standardResources[name] || isHugePageResourceName(name)
}

func isStandardContainerResourceName(name corev1.ResourceName) bool {
	return standardContainerResources[name] || isHugePageResourceName(name)
}

func isOvercommitAllowed(name corev1.ResourceName) bool {
	return isNativeResource(name) && !isHugePageResourceName(name)
}

func isIntegerResourceName(name corev1.ResourceName) bool {
	return integerResources[name] || isExtendedResourceName(name)
}

// resourceName validates a compute resource name.
func resourceName(name corev1.ResourceName, fldPath *field.Path) field.ErrorList {
	allErrs := invalidEach(fldPath, name, utilvalidation.IsQualifiedName(string(name)))
	if len(allErrs) != 0 {
		return allErrs
	}
	if !strings.Contains(string(name), "/") && !isStandardResourceName(name) {
		return append(allErrs, field.Invalid(fldPath, name, "must be a standard resource type or fully qualified"))
	}
	return allErrs
}

// containerResourceName validates a resource name in a container's
// requests or limits.
func containerResourceName(name corev1.ResourceName, fldPath *field.Path) field.ErrorList {
	allErrs := resourceName(name, fldPath)
	if !strings.Contains(string(name), "/") {
		if !isStandardContainerResourceName(name) {
			return append(allErrs, field.Invalid(fldPath, name, "must be a standard resource for containers"))
		}
	} else if !isNativeResource(name) && !isExtendedResourceName(name) {
		return append(allErrs, field.Invalid(fldPath, name, "doesn't follow extended resource name standard"))
	}
	return allErrs
}

func nonNegativeQuantity(value resource.Quantity, fldPath *field.Path) field.ErrorList {
	if value.Cmp(resource.Quantity{}) < 0 {
		return field.ErrorList{field.Invalid(fldPath, value.String(), isNegativeErrorMsg)}
	}
	return nil
}

func positiveQuantity(value resource.Quantity, fldPath *field.Path) field.ErrorList {
	if value.Cmp(resource.Quantity{}) <= 0 {
		return field.ErrorList{field.Invalid(fldPath, value.String(), isNotPositiveErrorMsg)}
	}
	return nil
}

// resourceQuantityValue: non-negative, and whole for integer resources.
func resourceQuantityValue(name corev1.ResourceName, value resource.Quantity, fldPath *field.Path) field.ErrorList {
	allErrs := nonNegativeQuantity(value, fldPath)
	if isIntegerResourceName(name) && value.MilliValue()%1000 != 0 {
		allErrs = append(allErrs, field.Invalid(fldPath, value, isNotIntegerErrorMsg))
	}
	return allErrs
}

func basicResource(quantity resource.Quantity, fldPath *field.Path) field.ErrorList {
	if quantity.Value() < 0 {
		return field.ErrorList{field.Invalid(fldPath, quantity.Value(), "must be a valid resource quantity")}
	}
	return nil
}

// hugePageDivisible reports whether a hugepages quantity is a whole
// multiple of the page size named by the resource.
func hugePageDivisible(name corev1.ResourceName, quantity resource.Quantity) bool {
	pageSize, err := resource.ParseQuantity(strings.TrimPrefix(string(name), corev1.ResourceHugePagesPrefix))
	if err != nil || pageSize.Value() <= 0 {
		return false
	}
	return quantity.Value()%pageSize.Value() == 0
}

// containerResourceRequirements validates a container's requests and
// limits: names, quantities, requests <= limits, and the extra rules for
// resources that cannot be overcommitted.
func containerResourceRequirements(req *corev1.ResourceRequirements, podClaimNames map[string]bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	limPath := fldPath.Child("limits")
	reqPath := fldPath.Child("requests")
	limCPUOrMemory, reqCPUOrMemory := false, false
	limHugePages, reqHugePages := false, false
	for name, quantity := range req.Limits {
		p := limPath.Key(string(name))
		allErrs = append(allErrs, containerResourceName(name, p)...)
		allErrs = append(allErrs, resourceQuantityValue(name, quantity, p)...)
		if isHugePageResourceName(name) {
			limHugePages = true
			if !hugePageDivisible(name, quantity) {
				allErrs = append(allErrs, field.Invalid(p, quantity.String(), fmt.Sprintf("%s is not positive integer multiple of %s", quantity.String(), name)))
			}
		}
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
			limCPUOrMemory = true
		}
	}
	for name, quantity := range req.Requests {
		p := reqPath.Key(string(name))
		allErrs = append(allErrs, containerResourceName(name, p)...)
		allErrs = append(allErrs, resourceQuantityValue(name, quantity, p)...)
		if limit, ok := req.Limits[name]; ok {
			switch {
			case quantity.Cmp(limit) != 0 && !isOvercommitAllowed(name):
				allErrs = append(allErrs, field.Invalid(reqPath, quantity.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
			case quantity.Cmp(limit) > 0:
				allErrs = append(allErrs, field.Invalid(reqPath, quantity.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
			}
		} else if !isOvercommitAllowed(name) {
			allErrs = append(allErrs, field.Required(limPath, "Limit must be set for non overcommitable resources"))
		}
		if isHugePageResourceName(name) {
			reqHugePages = true
			if !hugePageDivisible(name, quantity) {
				allErrs = append(allErrs, field.Invalid(p, quantity.String(), fmt.Sprintf("%s is not positive integer multiple of %s", quantity.String(), name)))
			}
		}
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
			reqCPUOrMemory = true
		}
	}
	if !limCPUOrMemory && !reqCPUOrMemory && (reqHugePages || limHugePages) {
		allErrs = append(allErrs, field.Forbidden(fldPath, "HugePages require cpu or memory"))
	}
	allErrs = append(allErrs, resourceClaimNames(req.Claims, podClaimNames, fldPath.Child("claims"))...)
	return allErrs
}

// resourceClaimNames checks that a container only refers to claims the pod
// declares in spec.resourceClaims.
func resourceClaimNames(claims []corev1.ResourceClaim, podClaimNames map[string]bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	seen := map[string]bool{}
	for i, claim := range claims {
		idxPath := fldPath.Index(i)
		if claim.Name == "" {
			allErrs = append(allErrs, field.Required(idxPath, ""))
			continue
		}
		if seen[claim.Name] {
			// Every request of that claim is already referenced.
			allErrs = append(allErrs, field.Duplicate(idxPath, claim.Name))
		} else {
			key := claim.Name
			if claim.Request != "" {
				allErrs = append(allErrs, dnsLabel(claim.Request, idxPath.Child("request"))...)
				key += "/" + claim.Request
			}
			switch {
			case seen[key]:
				allErrs = append(allErrs, field.Duplicate(idxPath, key))
			case claim.Request == "":
				// The whole claim overlaps any request of it named before.
				for k := range seen {
					if strings.HasPrefix(k, claim.Name+"/") {
						allErrs = append(allErrs, field.Duplicate(idxPath, claim.Name))
						break
					}
				}
			}
			seen[key] = true
		}
		if !podClaimNames[claim.Name] {
			notFound := field.NotFound(idxPath, claim.Name)
			notFound.Detail = "must be one of the names in pod.spec.resourceClaims"
			allErrs = append(allErrs, notFound)
		}
	}
	return allErrs
}
