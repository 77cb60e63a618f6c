// Package defaults fills in, in place, the fields kube-apiserver's v1
// defaulters fill in, so objects stored by nodeplane read back the way
// they would from Kubernetes (restartPolicy Always, imagePullPolicy from
// the image tag, protocol TCP, ...).
//
// It owns only defaulting: no validation (see package validation, which
// expects defaulted objects), no storage, no clock. Every function is
// idempotent and safe to call on create and on update, except
// NamespaceForCreate, which adds what kube adds on create only.
package defaults
