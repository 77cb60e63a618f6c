package registry

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeplane/nodeplane/internal/apiserver/printers"
	"github.com/nodeplane/nodeplane/internal/apiserver/validation"
)

var rbacV1 = rbacv1.SchemeGroupVersion

// defaultSubjects fills a subject's apiGroup as upstream's defaulting does:
// "" for service accounts, rbac.authorization.k8s.io for users and groups.
func defaultSubjects(subjects []rbacv1.Subject) {
	for i := range subjects {
		s := &subjects[i]
		if s.APIGroup != "" {
			continue
		}
		if s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind {
			s.APIGroup = rbacv1.GroupName
		}
	}
}

// defaultRoleRef fills an empty roleRef.apiGroup.
func defaultRoleRef(ref *rbacv1.RoleRef) {
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
}

// Roles declares rbac.authorization.k8s.io/v1 roles. Writes go through the
// API server's escalation check (see package rbac).
func Roles() *Resource {
	return &Resource{
		GroupVersion: rbacV1, Resource: "roles", Singular: "role", Kind: "Role", ListKind: "RoleList",
		Namespaced: true,
		New:        func() runtime.Object { return &rbacv1.Role{} },
		NewList:    func() runtime.Object { return &rbacv1.RoleList{} },
		Printer:    printers.Roles(),
		Strategy: Strategy{
			Validate: func(obj runtime.Object) field.ErrorList { return validation.Role(obj.(*rbacv1.Role)) },
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.RoleUpdate(obj.(*rbacv1.Role), old.(*rbacv1.Role))
			},
		},
	}
}

// ClusterRoles declares rbac.authorization.k8s.io/v1 clusterroles.
// aggregationRule is stored but not evaluated.
func ClusterRoles() *Resource {
	return &Resource{
		GroupVersion: rbacV1, Resource: "clusterroles", Singular: "clusterrole", Kind: "ClusterRole", ListKind: "ClusterRoleList",
		New:     func() runtime.Object { return &rbacv1.ClusterRole{} },
		NewList: func() runtime.Object { return &rbacv1.ClusterRoleList{} },
		Printer: printers.Roles(),
		Strategy: Strategy{
			Validate: func(obj runtime.Object) field.ErrorList { return validation.ClusterRole(obj.(*rbacv1.ClusterRole)) },
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.ClusterRoleUpdate(obj.(*rbacv1.ClusterRole), old.(*rbacv1.ClusterRole))
			},
		},
	}
}

// RoleBindings declares rbac.authorization.k8s.io/v1 rolebindings.
func RoleBindings() *Resource {
	return &Resource{
		GroupVersion: rbacV1, Resource: "rolebindings", Singular: "rolebinding", Kind: "RoleBinding", ListKind: "RoleBindingList",
		Namespaced: true,
		New:        func() runtime.Object { return &rbacv1.RoleBinding{} },
		NewList:    func() runtime.Object { return &rbacv1.RoleBindingList{} },
		Printer:    printers.RoleBindings(),
		Strategy: Strategy{
			Default: func(obj runtime.Object) {
				b := obj.(*rbacv1.RoleBinding)
				defaultRoleRef(&b.RoleRef)
				defaultSubjects(b.Subjects)
			},
			Validate: func(obj runtime.Object) field.ErrorList { return validation.RoleBinding(obj.(*rbacv1.RoleBinding)) },
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.RoleBindingUpdate(obj.(*rbacv1.RoleBinding), old.(*rbacv1.RoleBinding))
			},
		},
	}
}

// ClusterRoleBindings declares rbac.authorization.k8s.io/v1
// clusterrolebindings.
func ClusterRoleBindings() *Resource {
	return &Resource{
		GroupVersion: rbacV1, Resource: "clusterrolebindings", Singular: "clusterrolebinding", Kind: "ClusterRoleBinding", ListKind: "ClusterRoleBindingList",
		New:     func() runtime.Object { return &rbacv1.ClusterRoleBinding{} },
		NewList: func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
		Printer: printers.ClusterRoleBindings(),
		Strategy: Strategy{
			Default: func(obj runtime.Object) {
				b := obj.(*rbacv1.ClusterRoleBinding)
				defaultRoleRef(&b.RoleRef)
				defaultSubjects(b.Subjects)
			},
			Validate: func(obj runtime.Object) field.ErrorList {
				return validation.ClusterRoleBinding(obj.(*rbacv1.ClusterRoleBinding))
			},
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.ClusterRoleBindingUpdate(obj.(*rbacv1.ClusterRoleBinding), old.(*rbacv1.ClusterRoleBinding))
			},
		},
	}
}
