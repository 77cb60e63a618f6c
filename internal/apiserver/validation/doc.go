// Package validation checks k8s.io/api objects the way kube-apiserver does,
// so that nodeplane answers a bad request with the same 422 Invalid errors
// (same field paths, same error types, same wording) a client would get from
// Kubernetes.
//
// It owns the rules for each served kind and operation: one exported function
// per kind and operation (Node, NodeUpdate, NodeStatusUpdate, Pod, ...), each
// returning every error it finds as a field.ErrorList. The rules were learned
// from kube's pkg/apis/*/validation and rewritten against the versioned
// (k8s.io/api) types on top of the helpers apimachinery offers. Where kube
// reports an odd field path (for example node taints under metadata.taints)
// the odd path is kept on purpose: clients compare against kube.
//
// Validation assumes the object has already been defaulted (see package
// defaults), exactly as kube validates after defaulting: a pod without
// spec.restartPolicy is reported as "Required value", not silently accepted.
//
// The package is pure: no I/O, no clock, no storage. It must not import
// k8s.io/kubernetes.
package validation
