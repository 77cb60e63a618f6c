// Package nodelabels holds the label policy for nodes that both sides of the
// node identity enforce: the agent refuses to start with a --node-labels key
// a node may not set, and the API server's NodeRestriction admission refuses
// a node identity that tries to set one (SPEC AUTH-10, KUB-2).
//
// It owns only the policy on label keys; it does not validate key syntax
// (apimachinery does) and knows nothing about requests.
package nodelabels

import (
	"sort"
	"strings"
)

// Well-known node labels written by the agent at registration (SPEC KUB-2).
const (
	Hostname   = "kubernetes.io/hostname"
	OS         = "kubernetes.io/os"
	Arch       = "kubernetes.io/arch"
	BetaOS     = "beta.kubernetes.io/os"
	BetaArch   = "beta.kubernetes.io/arch"
	Zone       = "topology.kubernetes.io/zone"
	Region     = "topology.kubernetes.io/region"
	BetaZone   = "failure-domain.beta.kubernetes.io/zone"
	BetaRegion = "failure-domain.beta.kubernetes.io/region"

	InstanceType     = "node.kubernetes.io/instance-type"
	BetaInstanceType = "beta.kubernetes.io/instance-type"
)

// kubeletLabels are the exact keys in the kubernetes.io / k8s.io namespaces a
// node may set on itself.
var kubeletLabels = map[string]bool{
	Hostname: true, OS: true, Arch: true, BetaOS: true, BetaArch: true,
	BetaInstanceType: true, InstanceType: true,
	Zone: true, Region: true, BetaZone: true, BetaRegion: true,
}

// kubeletNamespaces are label namespaces (with their subdomains) a node may
// use freely even though they are under kubernetes.io.
var kubeletNamespaces = []string{"kubelet.kubernetes.io", "node.kubernetes.io"}

// restrictedNamespace may never be set by a node: it exists so that admins
// can label nodes with something a compromised node cannot claim.
const restrictedNamespace = "node-restriction.kubernetes.io"

// AllowedForNode reports whether a node identity may add, change or remove
// the label key on its own Node.
func AllowedForNode(key string) bool {
	ns := namespaceOf(key)
	if ns == "" {
		return true
	}
	if inNamespace(ns, restrictedNamespace) {
		return false
	}
	if !inNamespace(ns, "kubernetes.io") && !inNamespace(ns, "k8s.io") {
		return true
	}
	if kubeletLabels[key] {
		return true
	}
	for _, allowed := range kubeletNamespaces {
		if inNamespace(ns, allowed) {
			return true
		}
	}
	return false
}

// Forbidden returns the keys a node may not set, sorted, or nil.
func Forbidden(keys []string) []string {
	var out []string
	for _, k := range keys {
		if !AllowedForNode(k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// namespaceOf returns the prefix of a label key ("" when it has none),
// lower-cased as DNS names compare.
func namespaceOf(key string) string {
	i := strings.IndexByte(key, '/')
	if i < 0 {
		return ""
	}
	return strings.ToLower(key[:i])
}

// inNamespace reports whether ns is domain or a subdomain of it.
func inNamespace(ns, domain string) bool {
	return ns == domain || strings.HasSuffix(ns, "."+domain)
}
