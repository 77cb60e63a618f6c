package clusterroleaggregation

import (
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func role(name string, labels map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: rules}
}

func aggregating(name string, rules []rbacv1.PolicyRule, selectors ...metav1.LabelSelector) *rbacv1.ClusterRole {
	r := role(name, nil, rules...)
	r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: selectors}
	return r
}

func rule(verb, resource string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{""}, Resources: []string{resource}}
}

func sel(k string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchLabels: map[string]string{k: "true"}}
}

func TestAggregate(t *testing.T) {
	toView := map[string]string{"aggregate-to-view": "true"}
	for _, c := range []struct {
		name    string
		role    *rbacv1.ClusterRole
		all     []*rbacv1.ClusterRole
		want    []rbacv1.PolicyRule
		wantOK  bool
		wantErr string
	}{
		{
			name:   "a role without an aggregationRule is not aggregated",
			role:   role("plain", nil, rule("get", "pods")),
			wantOK: false,
		},
		{
			name: "the rules of every matching role, in name order, each once",
			role: aggregating("view", []rbacv1.PolicyRule{rule("get", "stale")}, sel("aggregate-to-view")),
			all: []*rbacv1.ClusterRole{
				role("b-extra", toView, rule("get", "secrets"), rule("get", "pods")),
				role("a-base", toView, rule("get", "pods")),
				role("other", map[string]string{"aggregate-to-edit": "true"}, rule("delete", "pods")),
			},
			want:   []rbacv1.PolicyRule{rule("get", "pods"), rule("get", "secrets")},
			wantOK: true,
		},
		{
			name: "two selectors take the union of both",
			role: aggregating("both", nil, sel("a"), sel("b")),
			all: []*rbacv1.ClusterRole{
				role("x", map[string]string{"b": "true"}, rule("list", "nodes")),
				role("y", map[string]string{"a": "true"}, rule("get", "nodes")),
			},
			want:   []rbacv1.PolicyRule{rule("get", "nodes"), rule("list", "nodes")},
			wantOK: true,
		},
		{
			name: "a role that matches its own selector does not aggregate itself",
			role: func() *rbacv1.ClusterRole {
				r := aggregating("self", []rbacv1.PolicyRule{rule("get", "x")}, sel("s"))
				r.Labels = map[string]string{"s": "true"}
				return r
			}(),
			want:   []rbacv1.PolicyRule{},
			wantOK: true,
		},
		{
			name:    "a selector that does not parse is an error naming it",
			role:    aggregating("bad", nil, metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Nope"}}}),
			wantOK:  true,
			wantErr: "aggregationRule.clusterRoleSelectors[0]",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			all := append([]*rbacv1.ClusterRole{c.role}, c.all...)
			got, ok, err := Aggregate(c.role, all)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || ok != c.wantOK {
				t.Fatalf("ok %v err %v, want ok %v", ok, err, c.wantOK)
			}
			if ok && !reflect.DeepEqual(got, c.want) {
				t.Errorf("rules %v, want %v", got, c.want)
			}
		})
	}
}

func TestNeedsUpdate(t *testing.T) {
	r := role("r", nil, rule("get", "pods"))
	if NeedsUpdate(r, []rbacv1.PolicyRule{rule("get", "pods")}) {
		t.Error("equal rules need an update")
	}
	if !NeedsUpdate(r, []rbacv1.PolicyRule{}) {
		t.Error("a removed rule needs no update")
	}
	if NeedsUpdate(role("empty", nil), []rbacv1.PolicyRule{}) {
		t.Error("nil and empty rules differ")
	}
}
