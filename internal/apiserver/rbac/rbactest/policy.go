// Package rbactest holds an in-memory rbac.Policy for tests of the packages
// that evaluate RBAC.
package rbactest

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Policy is an in-memory rbac.Policy; the zero value holds nothing.
type Policy struct {
	ClusterRoleList        []*rbacv1.ClusterRole
	RoleList               []*rbacv1.Role
	ClusterRoleBindingList []*rbacv1.ClusterRoleBinding
	RoleBindingList        []*rbacv1.RoleBinding
	// Err, when set, is returned by every read.
	Err error
}

// ClusterRole returns the named cluster role or nil.
func (p *Policy) ClusterRole(_ context.Context, name string) (*rbacv1.ClusterRole, error) {
	for _, r := range p.ClusterRoleList {
		if r.Name == name {
			return r, p.Err
		}
	}
	return nil, p.Err
}

// Role returns the named role or nil.
func (p *Policy) Role(_ context.Context, namespace, name string) (*rbacv1.Role, error) {
	for _, r := range p.RoleList {
		if r.Namespace == namespace && r.Name == name {
			return r, p.Err
		}
	}
	return nil, p.Err
}

// ClusterRoleBindings returns every cluster role binding.
func (p *Policy) ClusterRoleBindings(context.Context) ([]*rbacv1.ClusterRoleBinding, error) {
	return p.ClusterRoleBindingList, p.Err
}

// RoleBindings returns the role bindings of namespace.
func (p *Policy) RoleBindings(_ context.Context, namespace string) ([]*rbacv1.RoleBinding, error) {
	var out []*rbacv1.RoleBinding
	for _, b := range p.RoleBindingList {
		if b.Namespace == namespace {
			out = append(out, b)
		}
	}
	return out, p.Err
}
