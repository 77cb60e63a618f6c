package validation

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

// taintsPath is where kube reports spec.taints errors. kube builds it from
// the metadata path ("metadata.taints[0].effect"), and clients see exactly
// that, so nodeplane keeps the same path.
var taintsPath = metadataPath.Child("taints")

const podCIDRChangeMsg = "node updates may not change podCIDR except from \"\" to valid"

// Node validates a node on create: the name is a DNS subdomain, taints are
// well formed and unique by key and effect, capacity and allocatable
// quantities are valid, and spec.podCIDRs holds at most one valid CIDR per
// IP family.
func Node(n *corev1.Node) field.ErrorList {
	allErrs := objectMeta(&n.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, metadataPath)
	allErrs = append(allErrs, nodeAnnotations(n.Annotations, metadataPath.Child("annotations"))...)
	if len(n.Spec.Taints) > 0 {
		allErrs = append(allErrs, taints(n.Spec.Taints, taintsPath)...)
	}
	allErrs = append(allErrs, nodeResources(n)...)
	allErrs = append(allErrs, podCIDRs(effectivePodCIDRs(&n.Spec))...)
	return allErrs
}

// NodeUpdate validates an update of a node through the main resource. Like
// kube it runs the create checks on the new object and then the update
// rules, so an invalid label is reported by both passes.
func NodeUpdate(n, old *corev1.Node) field.ErrorList {
	return append(Node(n), nodeUpdate(n, old)...)
}

// NodeStatusUpdate validates an update through the status subresource.
func NodeStatusUpdate(n, old *corev1.Node) field.ErrorList {
	return nodeUpdate(n, old)
}

func nodeUpdate(n, old *corev1.Node) field.ErrorList {
	allErrs := objectMetaUpdate(&n.ObjectMeta, &old.ObjectMeta, metadataPath)
	allErrs = append(allErrs, nodeAnnotations(n.Annotations, metadataPath.Child("annotations"))...)
	allErrs = append(allErrs, nodeResources(n)...)

	seen := map[corev1.NodeAddress]bool{}
	for i, addr := range n.Status.Addresses {
		if seen[addr] {
			allErrs = append(allErrs, field.Duplicate(field.NewPath("status", "addresses").Index(i), addr))
		}
		seen[addr] = true
	}

	// The node IPAM controller may assign CIDRs once; after that they stay.
	if oldCIDRs, newCIDRs := effectivePodCIDRs(&old.Spec), effectivePodCIDRs(&n.Spec); len(oldCIDRs) > 0 {
		cidrPath := field.NewPath("spec", "podCIDRs")
		if len(oldCIDRs) != len(newCIDRs) {
			allErrs = append(allErrs, field.Forbidden(cidrPath, podCIDRChangeMsg))
		} else {
			for i := range oldCIDRs {
				if oldCIDRs[i] != newCIDRs[i] {
					allErrs = append(allErrs, field.Forbidden(cidrPath, podCIDRChangeMsg))
				}
			}
		}
	}
	if old.Spec.ProviderID != "" && old.Spec.ProviderID != n.Spec.ProviderID {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("spec", "providerID"), "node updates may not change providerID except from \"\" to valid"))
	}
	if n.Spec.ConfigSource != nil {
		allErrs = append(allErrs, nodeConfigSource(n.Spec.ConfigSource, false, field.NewPath("spec", "configSource"))...)
	}
	if cfg := n.Status.Config; cfg != nil {
		cfgPath := field.NewPath("status", "config")
		if cfg.Assigned != nil {
			allErrs = append(allErrs, nodeConfigSource(cfg.Assigned, true, cfgPath.Child("assigned"))...)
		}
		if cfg.Active != nil {
			allErrs = append(allErrs, nodeConfigSource(cfg.Active, true, cfgPath.Child("active"))...)
		}
		if cfg.LastKnownGood != nil {
			allErrs = append(allErrs, nodeConfigSource(cfg.LastKnownGood, true, cfgPath.Child("lastKnownGood"))...)
		}
	}
	if len(n.Spec.Taints) > 0 {
		allErrs = append(allErrs, taints(n.Spec.Taints, taintsPath)...)
	}
	if n.Spec.DoNotUseExternalID != old.Spec.DoNotUseExternalID {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("spec", "externalID"), "may not be updated"))
	}
	return allErrs
}

// effectivePodCIDRs is what kube's internal type holds: spec.podCIDRs, or
// the single legacy spec.podCIDR when the list is empty.
func effectivePodCIDRs(spec *corev1.NodeSpec) []string {
	if len(spec.PodCIDRs) == 0 && spec.PodCIDR != "" {
		return []string{spec.PodCIDR}
	}
	return spec.PodCIDRs
}

func podCIDRs(cidrs []string) field.ErrorList {
	if len(cidrs) == 0 {
		return nil
	}
	var allErrs field.ErrorList
	fldPath := field.NewPath("spec", "podCIDRs")
	for i, c := range cidrs {
		allErrs = append(allErrs, utilvalidation.IsValidCIDR(fldPath.Index(i), c)...)
	}
	if len(cidrs) > 1 {
		dualStack, err := netutils.IsDualStackCIDRStrings(cidrs)
		if err != nil {
			allErrs = append(allErrs, field.InternalError(fldPath, fmt.Errorf("invalid PodCIDRs. failed to check with dual stack with error:%v", err)))
		}
		if !dualStack || len(cidrs) > 2 {
			allErrs = append(allErrs, field.Invalid(fldPath, cidrs, "may specify no more than one CIDR for each IP family"))
		}
		seen := map[string]bool{}
		for i, c := range cidrs {
			if seen[c] {
				allErrs = append(allErrs, field.Duplicate(fldPath.Index(i), c))
			}
			seen[c] = true
		}
	}
	return allErrs
}

// nodeResources checks capacity and allocatable quantities. kube builds
// these paths with Child, not Key: "status.capacity.cpu".
func nodeResources(n *corev1.Node) field.ErrorList {
	var allErrs field.ErrorList
	for k, v := range n.Status.Capacity {
		allErrs = append(allErrs, resourceQuantityValue(k, v, field.NewPath("status", "capacity", string(k)))...)
	}
	for k, v := range n.Status.Allocatable {
		allErrs = append(allErrs, resourceQuantityValue(k, v, field.NewPath("status", "allocatable", string(k)))...)
	}
	return allErrs
}

// nodeConfigSource validates the deprecated dynamic kubelet config source.
// In spec uid and resourceVersion must be empty; in status they must be set.
func nodeConfigSource(src *corev1.NodeConfigSource, inStatus bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if cm := src.ConfigMap; cm != nil {
		cmPath := fldPath.Child("configMap")
		switch {
		case !inStatus && cm.UID != "":
			allErrs = append(allErrs, field.Forbidden(cmPath.Child("uid"), "uid must not be set in spec"))
		case inStatus && cm.UID == "":
			allErrs = append(allErrs, field.Required(cmPath.Child("uid"), "uid must be set in status"))
		}
		switch {
		case !inStatus && cm.ResourceVersion != "":
			allErrs = append(allErrs, field.Forbidden(cmPath.Child("resourceVersion"), "resourceVersion must not be set in spec"))
		case inStatus && cm.ResourceVersion == "":
			allErrs = append(allErrs, field.Required(cmPath.Child("resourceVersion"), "resourceVersion must be set in status"))
		}
		if cm.Namespace == "" {
			allErrs = append(allErrs, field.Required(cmPath.Child("namespace"), "namespace must be set"))
		} else {
			allErrs = append(allErrs, invalidEach(cmPath.Child("namespace"), cm.Namespace, apivalidation.ValidateNamespaceName(cm.Namespace, false))...)
		}
		if cm.Name == "" {
			allErrs = append(allErrs, field.Required(cmPath.Child("name"), "name must be set"))
		} else {
			allErrs = append(allErrs, dnsSubdomain(cm.Name, cmPath.Child("name"))...)
		}
		if cm.KubeletConfigKey == "" {
			allErrs = append(allErrs, field.Required(cmPath.Child("kubeletConfigKey"), "kubeletConfigKey must be set"))
		} else {
			allErrs = append(allErrs, invalidEach(cmPath.Child("kubeletConfigKey"), cm.KubeletConfigKey, utilvalidation.IsConfigMapKey(cm.KubeletConfigKey))...)
		}
	} else {
		allErrs = append(allErrs, field.Invalid(fldPath, src, "exactly one reference subfield must be non-nil"))
	}
	return allErrs
}

const (
	taintsAnnotationKey          = "scheduler.alpha.kubernetes.io/taints"
	preferAvoidPodsAnnotationKey = corev1.PreferAvoidPodsAnnotationKey
)

// nodeAnnotations validates the legacy scheduler annotations kube still
// parses on nodes.
func nodeAnnotations(annotations map[string]string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if raw := annotations[taintsAnnotationKey]; raw != "" {
		var ts []corev1.Taint
		if err := json.Unmarshal([]byte(raw), &ts); err != nil {
			allErrs = append(allErrs, field.Invalid(fldPath, taintsAnnotationKey, err.Error()))
		} else if len(ts) > 0 {
			allErrs = append(allErrs, taints(ts, fldPath.Child(taintsAnnotationKey))...)
		}
	}
	if raw := annotations[preferAvoidPodsAnnotationKey]; raw != "" {
		var avoid corev1.AvoidPods
		if err := json.Unmarshal([]byte(raw), &avoid); err != nil {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("AvoidPods"), preferAvoidPodsAnnotationKey, err.Error()))
		} else {
			for i, entry := range avoid.PreferAvoidPods {
				idxPath := fldPath.Child(preferAvoidPodsAnnotationKey).Index(i)
				ctrl := entry.PodSignature.PodController
				switch {
				case ctrl == nil:
					allErrs = append(allErrs, field.Required(idxPath.Child("PodSignature"), ""))
				case ctrl.Controller == nil || !*ctrl.Controller:
					allErrs = append(allErrs, field.Invalid(idxPath.Child("PodSignature").Child("PodController").Child("Controller"), ctrl.Controller, "must point to a controller"))
				}
			}
		}
	}
	return allErrs
}
