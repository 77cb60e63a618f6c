package authz

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// decideNode applies the Node authorizer's rules (SPEC AUTH-2, AUTH-3,
// AUTH-5, AUTH-6) to a resource request of node, for the resources
// nodeplane serves. Anything not listed here is refused.
func decideNode(ctx context.Context, node string, objs Objects, a Attributes) (bool, string, error) {
	switch {
	case a.APIGroup == "" && a.Resource == "nodes":
		ok, reason := decideNodes(node, a)
		return ok, reason, nil
	case a.APIGroup == "" && a.Resource == "pods":
		return decidePods(ctx, node, objs, a)
	case a.APIGroup == "coordination.k8s.io" && a.Resource == "leases":
		ok, reason := decideLeases(node, a)
		return ok, reason, nil
	case (a.APIGroup == "" || a.APIGroup == "events.k8s.io") && a.Resource == "events":
		// The system:node role: nodes record events about anything.
		ok := a.Subresource == "" && (a.Verb == "create" || a.Verb == "update" || a.Verb == "patch")
		return ok, "", nil
	case a.APIGroup == "" && (a.Resource == "configmaps" || a.Resource == "secrets"):
		return decideReferenced(ctx, node, objs, a)
	case a.APIGroup == "" && a.Resource == "persistentvolumeclaims":
		return decideClaims(ctx, node, objs, a)
	case a.APIGroup == "" && a.Resource == "persistentvolumes":
		if a.Subresource != "" || a.Verb != "get" {
			return false, "", nil
		}
		return volumeRelated(ctx, node, objs, a.Name)
	case a.APIGroup == "storage.k8s.io" && a.Resource == "volumeattachments":
		if a.Subresource != "" || a.Verb != "get" {
			return false, "", nil
		}
		return attachmentRelated(ctx, node, objs, a.Name)
	}
	return false, "", nil
}

// decideNodes: a node may read only its own Node (a list or watch must
// select it with metadata.name), and may create, update and patch Nodes
// and their status; NodeRestriction admission keeps those writes to its own.
func decideNodes(node string, a Attributes) (bool, string) {
	switch a.Subresource {
	case "":
		switch a.Verb {
		case "create", "update", "patch":
			return true, ""
		case "get", "list", "watch":
			switch targetName(a) {
			case node:
				return true, ""
			case "":
				return false, fmt.Sprintf("node %q can only %s nodes with fieldSelector metadata.name=%s", node, a.Verb, node)
			default:
				return false, "nodes may not read other nodes"
			}
		}
	case "status":
		if a.Verb == "update" || a.Verb == "patch" {
			return true, ""
		}
	}
	return false, fmt.Sprintf("node %q may only get, list and watch its own Node, create, update and patch Nodes, and update and patch nodes/status", node)
}

// decidePods: a node may read only pods bound to it (a list or watch must
// select spec.nodeName=<node>, or name one bound pod), may create and
// delete pods (admission allows only its own mirror pods), update their
// status and evict them (admission checks the binding).
func decidePods(ctx context.Context, node string, objs Objects, a Attributes) (bool, string, error) {
	switch a.Subresource {
	case "":
		switch a.Verb {
		case "get":
			return podRelated(ctx, node, objs, a.Namespace, a.Name)
		case "list", "watch":
			if v, ok := exactField(a.FieldSelector, "spec.nodeName"); ok && v == node {
				return true, "", nil
			}
			if name := targetName(a); name != "" && a.Namespace != "" {
				return podRelated(ctx, node, objs, a.Namespace, name)
			}
			return false, fmt.Sprintf("node %q can only %s pods with fieldSelector spec.nodeName=%s", node, a.Verb, node), nil
		case "create", "delete":
			return true, "", nil
		}
	case "status":
		if a.Verb == "update" || a.Verb == "patch" {
			return true, "", nil
		}
	case "eviction":
		if a.Verb == "create" {
			return true, "", nil
		}
	}
	return false, fmt.Sprintf("node %q may only get, list, watch, create and delete pods, update and patch pods/status, and create pods/eviction", node), nil
}

// decideLeases: a node may get, create, update, patch and delete leases
// in kube-node-lease, named after itself (the name of a create is checked
// by admission, since the path does not carry it).
func decideLeases(node string, a Attributes) (bool, string) {
	switch a.Verb {
	case "get", "create", "update", "patch", "delete":
	default:
		return false, "can only get, create, update, patch or delete a node lease"
	}
	if a.Subresource != "" {
		return false, "can only get, create, update, patch or delete a node lease"
	}
	if a.Namespace != corev1.NamespaceNodeLease {
		return false, "can only access leases in namespace " + corev1.NamespaceNodeLease
	}
	if a.Verb != "create" && a.Name != node {
		return false, "can only access node lease with the same name as the requesting node"
	}
	return true, ""
}

// decideClaims: a node may get a claim, and get, update and patch its
// status, when a pod bound to the node uses it.
func decideClaims(ctx context.Context, node string, objs Objects, a Attributes) (bool, string, error) {
	switch {
	case a.Subresource == "" && a.Verb == "get",
		a.Subresource == "status" && (a.Verb == "get" || a.Verb == "update" || a.Verb == "patch"):
		return claimRelated(ctx, node, objs, a.Namespace, a.Name)
	}
	return false, "", nil
}

func noRelationship(node string) string {
	return fmt.Sprintf("no relationship found between node '%s' and this object", node)
}

// podRelated: the pod is bound to node.
func podRelated(ctx context.Context, node string, objs Objects, namespace, name string) (bool, string, error) {
	if objs == nil || name == "" {
		return false, noRelationship(node), nil
	}
	pod, err := objs.Pod(ctx, namespace, name)
	if err != nil {
		return false, "", fmt.Errorf("authorize node %q: read pod %s/%s: %w", node, namespace, name, err)
	}
	if pod == nil || pod.Spec.NodeName != node {
		return false, noRelationship(node), nil
	}
	return true, "", nil
}

// claimRelated: a pod bound to node uses the claim.
func claimRelated(ctx context.Context, node string, objs Objects, namespace, name string) (bool, string, error) {
	if objs == nil || name == "" {
		return false, noRelationship(node), nil
	}
	pods, err := objs.PodsOnNode(ctx, node)
	if err != nil {
		return false, "", fmt.Errorf("authorize node %q: list its pods: %w", node, err)
	}
	for _, pod := range pods {
		if pod.Namespace != namespace {
			continue
		}
		for _, claim := range claimNames(pod) {
			if claim == name {
				return true, "", nil
			}
		}
	}
	return false, noRelationship(node), nil
}

// volumeRelated: a claim used by a pod bound to node is bound to the volume.
func volumeRelated(ctx context.Context, node string, objs Objects, name string) (bool, string, error) {
	if objs == nil || name == "" {
		return false, noRelationship(node), nil
	}
	pods, err := objs.PodsOnNode(ctx, node)
	if err != nil {
		return false, "", fmt.Errorf("authorize node %q: list its pods: %w", node, err)
	}
	seen := map[[2]string]bool{}
	for _, pod := range pods {
		for _, claim := range claimNames(pod) {
			key := [2]string{pod.Namespace, claim}
			if seen[key] {
				continue
			}
			seen[key] = true
			pvc, err := objs.PersistentVolumeClaim(ctx, pod.Namespace, claim)
			if err != nil {
				return false, "", fmt.Errorf("authorize node %q: read claim %s/%s: %w", node, pod.Namespace, claim, err)
			}
			if pvc != nil && pvc.Spec.VolumeName == name {
				return true, "", nil
			}
		}
	}
	return false, noRelationship(node), nil
}

// attachmentRelated: the volume attachment is for node.
func attachmentRelated(ctx context.Context, node string, objs Objects, name string) (bool, string, error) {
	if objs == nil || name == "" {
		return false, noRelationship(node), nil
	}
	va, err := objs.VolumeAttachment(ctx, name)
	if err != nil {
		return false, "", fmt.Errorf("authorize node %q: read volume attachment %s: %w", node, name, err)
	}
	if va == nil || va.Spec.NodeName != node {
		return false, noRelationship(node), nil
	}
	return true, "", nil
}

// decideReferenced: a node may get (or list and watch by metadata.name) a
// ConfigMap or Secret that a pod bound to it references — for its volumes,
// env and envFrom, or (secrets) as an image pull secret.
func decideReferenced(ctx context.Context, node string, objs Objects, a Attributes) (bool, string, error) {
	if a.Subresource != "" || (a.Verb != "get" && a.Verb != "list" && a.Verb != "watch") {
		return false, fmt.Sprintf("node %q may only get, list and watch %s referenced by its pods", node, a.Resource), nil
	}
	name := targetName(a)
	if objs == nil || name == "" || a.Namespace == "" {
		return false, noRelationship(node), nil
	}
	pods, err := objs.PodsOnNode(ctx, node)
	if err != nil {
		return false, "", fmt.Errorf("authorize node %q: list its pods: %w", node, err)
	}
	for _, pod := range pods {
		if pod.Namespace != a.Namespace {
			continue
		}
		refs := configMapNames(pod)
		if a.Resource == "secrets" {
			refs = secretNames(pod)
		}
		for _, r := range refs {
			if r == name {
				return true, "", nil
			}
		}
	}
	return false, noRelationship(node), nil
}

// envSources are the env and envFrom entries of all of a pod's containers.
func envSources(pod *corev1.Pod) ([]corev1.EnvVar, []corev1.EnvFromSource) {
	var env []corev1.EnvVar
	var from []corev1.EnvFromSource
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			env = append(env, c.Env...)
			from = append(from, c.EnvFrom...)
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		env = append(env, c.Env...)
		from = append(from, c.EnvFrom...)
	}
	return env, from
}

// configMapNames are the ConfigMaps a pod references.
func configMapNames(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			out = append(out, v.ConfigMap.Name)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					out = append(out, s.ConfigMap.Name)
				}
			}
		}
	}
	env, from := envSources(pod)
	for _, e := range env {
		if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
			out = append(out, e.ValueFrom.ConfigMapKeyRef.Name)
		}
	}
	for _, f := range from {
		if f.ConfigMapRef != nil {
			out = append(out, f.ConfigMapRef.Name)
		}
	}
	return out
}

// secretNames are the Secrets a pod references.
func secretNames(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Secret != nil:
			out = append(out, v.Secret.SecretName)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					out = append(out, s.Secret.Name)
				}
			}
		}
	}
	env, from := envSources(pod)
	for _, e := range env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			out = append(out, e.ValueFrom.SecretKeyRef.Name)
		}
	}
	for _, f := range from {
		if f.SecretRef != nil {
			out = append(out, f.SecretRef.Name)
		}
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		out = append(out, s.Name)
	}
	return out
}

// claimNames are the persistent volume claims a pod uses: named claims and
// the claims of its generic ephemeral volumes (<pod>-<volume>).
func claimNames(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			out = append(out, pod.Name+"-"+v.Name)
		}
	}
	return out
}
