// Package rbac evaluates rbac.authorization.k8s.io/v1 policy with the
// upstream semantics: which rules apply to a user (through ClusterRoleBindings
// everywhere and RoleBindings in their namespace; User, Group and
// ServiceAccount subjects), whether a rule allows a request (verbs, API
// groups, resources and subresources, resourceNames, non-resource URLs, the
// "*" wildcards), and whether a set of rules covers another (the escalation
// check: nobody grants what they do not hold). It also declares the default
// cluster roles and bindings created at start.
//
// It is pure: it reads roles and bindings only through the Policy interface
// its caller implements (the API server, over its watch caches), and it does
// not decide anything about administrators or nodes: package authz runs the
// fixed rules first and asks RBAC only about everyone else.
package rbac

import (
	"context"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
)

// Policy reads the stored roles and bindings. Role and ClusterRole return
// nil and no error for a role that does not exist (a binding to it grants
// nothing). Returned objects must not be mutated.
type Policy interface {
	ClusterRole(ctx context.Context, name string) (*rbacv1.ClusterRole, error)
	Role(ctx context.Context, namespace, name string) (*rbacv1.Role, error)
	ClusterRoleBindings(ctx context.Context) ([]*rbacv1.ClusterRoleBinding, error)
	RoleBindings(ctx context.Context, namespace string) ([]*rbacv1.RoleBinding, error)
}

// Request is what RBAC needs to know about a request.
type Request struct {
	// Verb is a Kubernetes verb (get, list, ..., escalate, bind) for a
	// resource request, the lower-case HTTP method for a non-resource one.
	Verb            string
	ResourceRequest bool
	APIGroup        string
	Resource        string
	Subresource     string
	Namespace       string
	Name            string
	// Path is the URL path of a non-resource request.
	Path string
}

// serviceAccountPrefix starts the user name of a service account.
const serviceAccountPrefix = "system:serviceaccount:"

// Allows reports whether some rule bound to u allows req.
func Allows(ctx context.Context, p Policy, u *authn.User, req Request) (bool, error) {
	allowed := false
	err := visitRules(ctx, p, u, req.Namespace, func(rule rbacv1.PolicyRule) bool {
		if RuleAllows(rule, req) {
			allowed = true
			return false
		}
		return true
	})
	return allowed, err
}

// Rules returns every rule that applies to u in namespace (cluster-wide
// rules only when namespace is empty).
func Rules(ctx context.Context, p Policy, u *authn.User, namespace string) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	err := visitRules(ctx, p, u, namespace, func(rule rbacv1.PolicyRule) bool {
		rules = append(rules, rule)
		return true
	})
	return rules, err
}

// visitRules calls visit for each rule bound to u that applies in namespace
// until visit returns false.
func visitRules(ctx context.Context, p Policy, u *authn.User, namespace string, visit func(rbacv1.PolicyRule) bool) error {
	crbs, err := p.ClusterRoleBindings(ctx)
	if err != nil {
		return fmt.Errorf("list clusterrolebindings: %w", err)
	}
	for _, b := range crbs {
		if !boundTo(b.Subjects, u, "") {
			continue
		}
		rules, err := roleRules(ctx, p, b.RoleRef, "")
		if err != nil {
			return err
		}
		for _, r := range rules {
			if !visit(r) {
				return nil
			}
		}
	}
	if namespace == "" {
		return nil
	}
	rbs, err := p.RoleBindings(ctx, namespace)
	if err != nil {
		return fmt.Errorf("list rolebindings in %s: %w", namespace, err)
	}
	for _, b := range rbs {
		if !boundTo(b.Subjects, u, namespace) {
			continue
		}
		rules, err := roleRules(ctx, p, b.RoleRef, namespace)
		if err != nil {
			return err
		}
		for _, r := range rules {
			if !visit(r) {
				return nil
			}
		}
	}
	return nil
}

// RoleRefRules returns the rules of the role a binding in namespace
// refers to; none when it does not exist.
func RoleRefRules(ctx context.Context, p Policy, ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	return roleRules(ctx, p, ref, namespace)
}

func roleRules(ctx context.Context, p Policy, ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "ClusterRole":
		r, err := p.ClusterRole(ctx, ref.Name)
		if err != nil || r == nil {
			return nil, err
		}
		return r.Rules, nil
	case "Role":
		if namespace == "" {
			return nil, nil
		}
		r, err := p.Role(ctx, namespace, ref.Name)
		if err != nil || r == nil {
			return nil, err
		}
		return r.Rules, nil
	}
	return nil, nil
}

// boundTo reports whether one of subjects is u. A ServiceAccount subject
// without a namespace takes the binding's (bindingNamespace).
func boundTo(subjects []rbacv1.Subject, u *authn.User, bindingNamespace string) bool {
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			if s.Name == u.Name {
				return true
			}
		case rbacv1.GroupKind:
			if u.InGroup(s.Name) {
				return true
			}
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = bindingNamespace
			}
			if ns != "" && u.Name == serviceAccountPrefix+ns+":"+s.Name {
				return true
			}
		}
	}
	return false
}

// RuleAllows reports whether rule allows req.
func RuleAllows(rule rbacv1.PolicyRule, req Request) bool {
	if !matches(rule.Verbs, req.Verb) {
		return false
	}
	if !req.ResourceRequest {
		return urlMatches(rule.NonResourceURLs, req.Path)
	}
	if !matches(rule.APIGroups, req.APIGroup) || !resourceMatches(rule.Resources, req.Resource, req.Subresource) {
		return false
	}
	if len(rule.ResourceNames) == 0 {
		return true
	}
	for _, n := range rule.ResourceNames {
		if req.Name != "" && n == req.Name {
			return true
		}
	}
	return false
}

// matches: the list names v or "*".
func matches(list []string, v string) bool {
	for _, s := range list {
		if s == "*" || s == v {
			return true
		}
	}
	return false
}

// resourceMatches: "*" matches everything, "pods" only the resource
// itself, "pods/log" that subresource and "*/log" the log subresource of
// anything.
func resourceMatches(list []string, resource, sub string) bool {
	combined := resource
	if sub != "" {
		combined += "/" + sub
	}
	for _, s := range list {
		switch {
		case s == rbacv1.ResourceAll, s == combined:
			return true
		case sub != "" && s == "*/"+sub:
			return true
		}
	}
	return false
}

// urlMatches: "*" matches every path, "/apis/*" every path under /apis/,
// anything else only itself.
func urlMatches(list []string, path string) bool {
	for _, s := range list {
		switch {
		case s == rbacv1.NonResourceAll, s == path:
			return true
		case strings.HasSuffix(s, "*") && strings.HasPrefix(path, strings.TrimSuffix(s, "*")):
			return true
		}
	}
	return false
}
