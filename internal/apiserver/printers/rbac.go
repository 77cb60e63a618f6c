package printers

import (
	"fmt"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Roles prints roles and cluster roles as Kubernetes does: NAME CREATED AT.
func Roles() Printer { return Default() }

// RoleBindings prints role bindings: NAME ROLE AGE, and with -o wide
// USERS GROUPS SERVICEACCOUNTS.
func RoleBindings() Printer {
	return bindingPrinter(func(obj runtime.Object) (metav1.ObjectMeta, rbacv1.RoleRef, []rbacv1.Subject, bool) {
		b, ok := obj.(*rbacv1.RoleBinding)
		if !ok {
			return metav1.ObjectMeta{}, rbacv1.RoleRef{}, nil, false
		}
		return b.ObjectMeta, b.RoleRef, b.Subjects, true
	})
}

// ClusterRoleBindings prints cluster role bindings like role bindings.
func ClusterRoleBindings() Printer {
	return bindingPrinter(func(obj runtime.Object) (metav1.ObjectMeta, rbacv1.RoleRef, []rbacv1.Subject, bool) {
		b, ok := obj.(*rbacv1.ClusterRoleBinding)
		if !ok {
			return metav1.ObjectMeta{}, rbacv1.RoleRef{}, nil, false
		}
		return b.ObjectMeta, b.RoleRef, b.Subjects, true
	})
}

func bindingPrinter(parts func(runtime.Object) (metav1.ObjectMeta, rbacv1.RoleRef, []rbacv1.Subject, bool)) Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Role", "string", rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"]),
			ageColumn(),
			wideColumn("Users", "string", "Users in the roleBinding"),
			wideColumn("Groups", "string", "Groups in the roleBinding"),
			wideColumn("ServiceAccounts", "string", "ServiceAccounts in the roleBinding"),
		},
		Cells: func(obj runtime.Object, now time.Time) ([]interface{}, error) {
			m, ref, subjects, ok := parts(obj)
			if !ok {
				return nil, fmt.Errorf("print a role binding: unexpected object type %T", obj)
			}
			var users, groups, sas []string
			for _, s := range subjects {
				switch s.Kind {
				case rbacv1.UserKind:
					users = append(users, s.Name)
				case rbacv1.GroupKind:
					groups = append(groups, s.Name)
				case rbacv1.ServiceAccountKind:
					sas = append(sas, s.Namespace+"/"+s.Name)
				}
			}
			return []interface{}{
				m.Name, ref.Kind + "/" + ref.Name, age(m.CreationTimestamp, now),
				strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", "),
			}, nil
		},
	}
}
