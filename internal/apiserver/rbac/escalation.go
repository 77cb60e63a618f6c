package rbac

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Covers reports whether the owner's rules together allow everything the
// requested rules allow, and returns the pieces they do not: each requested
// rule is split into one rule per verb, API group, resource and resource
// name (or per non-resource URL and verb), and each piece must be covered by
// a single owner rule. A wildcard is only covered by the same wildcard
// ("get" does not cover "*"); "*/log" covers "pods/log"; "/logs/*" covers
// "/logs/x"; an owner rule with resourceNames covers only requests naming
// some of them.
func Covers(owner, requested []rbacv1.PolicyRule) (bool, []rbacv1.PolicyRule) {
	var missing []rbacv1.PolicyRule
	for _, req := range requested {
		for _, piece := range atomize(req) {
			if !slices.ContainsFunc(owner, func(o rbacv1.PolicyRule) bool { return ruleCovers(o, piece) }) {
				missing = append(missing, piece)
			}
		}
	}
	return len(missing) == 0, missing
}

// atomize splits a rule into single-verb, single-target rules.
func atomize(rule rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, verb := range rule.Verbs {
		for _, group := range rule.APIGroups {
			for _, res := range rule.Resources {
				piece := rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{group}, Resources: []string{res}}
				if len(rule.ResourceNames) == 0 {
					out = append(out, piece)
					continue
				}
				for _, name := range rule.ResourceNames {
					p := piece
					p.ResourceNames = []string{name}
					out = append(out, p)
				}
			}
		}
		for _, url := range rule.NonResourceURLs {
			out = append(out, rbacv1.PolicyRule{Verbs: []string{verb}, NonResourceURLs: []string{url}})
		}
	}
	return out
}

// ruleCovers reports whether owner alone covers the atomic rule piece.
func ruleCovers(owner, piece rbacv1.PolicyRule) bool {
	if !slices.Contains(owner.Verbs, rbacv1.VerbAll) && !containsAll(owner.Verbs, piece.Verbs) {
		return false
	}
	if len(piece.NonResourceURLs) > 0 {
		for _, url := range piece.NonResourceURLs {
			if !slices.ContainsFunc(owner.NonResourceURLs, func(o string) bool { return urlCovers(o, url) }) {
				return false
			}
		}
		return true
	}
	if !slices.Contains(owner.APIGroups, rbacv1.APIGroupAll) && !containsAll(owner.APIGroups, piece.APIGroups) {
		return false
	}
	if !resourcesCover(owner.Resources, piece.Resources) {
		return false
	}
	if len(owner.ResourceNames) == 0 {
		return true
	}
	return len(piece.ResourceNames) > 0 && containsAll(owner.ResourceNames, piece.ResourceNames)
}

func containsAll(set, want []string) bool {
	for _, w := range want {
		if !slices.Contains(set, w) {
			return false
		}
	}
	return true
}

// resourcesCover: "*" covers any resource; otherwise each wanted resource
// must be listed, or be a subresource "x/sub" with "*/sub" listed.
func resourcesCover(owner, want []string) bool {
	if slices.Contains(owner, rbacv1.ResourceAll) {
		return true
	}
	for _, w := range want {
		if slices.Contains(owner, w) {
			continue
		}
		_, sub, ok := strings.Cut(w, "/")
		if !ok || !slices.Contains(owner, "*/"+sub) {
			return false
		}
	}
	return true
}

// urlCovers: an owner URL ending in "*" covers every path it prefixes.
func urlCovers(owner, path string) bool {
	if owner == path {
		return true
	}
	return strings.HasSuffix(owner, "*") && strings.HasPrefix(path, strings.TrimRight(owner, "*"))
}

// CompactString renders a rule as upstream's escalation message does:
// {APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}.
func CompactString(r rbacv1.PolicyRule) string {
	var parts []string
	for _, f := range []struct {
		name string
		v    []string
	}{
		{"APIGroups", r.APIGroups}, {"Resources", r.Resources}, {"ResourceNames", r.ResourceNames},
		{"NonResourceURLs", r.NonResourceURLs}, {"Verbs", r.Verbs},
	} {
		if len(f.v) == 0 {
			continue
		}
		q := make([]string, len(f.v))
		for i, s := range f.v {
			q[i] = fmt.Sprintf("%q", s)
		}
		parts = append(parts, f.name+":["+strings.Join(q, " ")+"]")
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
