package validation_test

import (
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodeplane/nodeplane/internal/apiserver/validation"
)

func validPDB() *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr(intstr.FromInt32(2)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
}

func TestPodDisruptionBudget(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *policyv1.PodDisruptionBudget)
		want   []want
	}{
		{"a budget with minAvailable and a selector is valid", func(*policyv1.PodDisruptionBudget) {}, nil},
		{"a budget with maxUnavailable instead is valid", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MinAvailable, p.Spec.MaxUnavailable = nil, ptr(intstr.FromInt32(1))
		}, nil},
		{"a budget with neither minAvailable nor maxUnavailable is valid, as in kube", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MinAvailable = nil
		}, nil},
		{"minAvailable and maxUnavailable may not both be set", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MaxUnavailable = ptr(intstr.FromInt32(1))
		}, []want{invalid("spec")}},
		{"percentages from 0% to 100% are valid", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MinAvailable = ptr(intstr.FromString("100%"))
		}, nil},
		{"0% maxUnavailable is valid (no voluntary disruption at all)", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MinAvailable, p.Spec.MaxUnavailable = nil, ptr(intstr.FromString("0%"))
		}, nil},
		{"minAvailable may not exceed 100%", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MinAvailable = ptr(intstr.FromString("101%"))
		}, []want{invalid("spec.minAvailable")}},
		{"maxUnavailable may not exceed 100%", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MinAvailable, p.Spec.MaxUnavailable = nil, ptr(intstr.FromString("150%"))
		}, []want{invalid("spec.maxUnavailable")}},
		{"a negative minAvailable is invalid", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MinAvailable = ptr(intstr.FromInt32(-1))
		}, []want{invalid("spec.minAvailable")}},
		{"a negative maxUnavailable is invalid", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MinAvailable, p.Spec.MaxUnavailable = nil, ptr(intstr.FromInt32(-2))
		}, []want{invalid("spec.maxUnavailable")}},
		{"a string that is not a percentage is invalid", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MinAvailable = ptr(intstr.FromString("half"))
		}, []want{invalid("spec.minAvailable")}},
		{"a budget without a selector is valid (it selects no pods)", func(p *policyv1.PodDisruptionBudget) { p.Spec.Selector = nil }, nil},
		{"an empty selector is valid (it selects every pod)", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.Selector = &metav1.LabelSelector{}
		}, nil},
		{"a selector with a bad operator is invalid", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}
		}, []want{invalid("spec.selector.matchExpressions[0].operator")}},
		{"a selector label value must be a valid label value", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.Selector.MatchLabels["app"] = "not a value"
		}, []want{invalid("spec.selector.matchLabels")}},
		{"AlwaysAllow is a known unhealthy-pod policy", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.UnhealthyPodEvictionPolicy = ptr(policyv1.AlwaysAllow)
		}, nil},
		{"IfHealthyBudget is a known unhealthy-pod policy", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.UnhealthyPodEvictionPolicy = ptr(policyv1.IfHealthyBudget)
		}, nil},
		{"an unknown unhealthy-pod policy is refused", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.UnhealthyPodEvictionPolicy = ptr(policyv1.UnhealthyPodEvictionPolicyType("Sometimes"))
		}, []want{notSupported("spec.unhealthyPodEvictionPolicy")}},
		{"the name must be a DNS subdomain", func(p *policyv1.PodDisruptionBudget) { p.Name = "Web_1" }, []want{invalid("metadata.name")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPDB()
			tt.mutate(p)
			checkErrs(t, validation.PodDisruptionBudget(p), tt.want...)
		})
	}
}

func TestPodDisruptionBudgetUpdate(t *testing.T) {
	old := validPDB()
	old.ResourceVersion = "3"
	tests := []struct {
		name   string
		old    func(p *policyv1.PodDisruptionBudget)
		mutate func(p *policyv1.PodDisruptionBudget)
		want   []want
	}{
		{"the spec may change (mutable since 1.15)", nil, func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MinAvailable = ptr(intstr.FromString("50%"))
			p.Spec.Selector.MatchLabels["tier"] = "front"
		}, nil},
		{"an update keeps the create rules", nil, func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MaxUnavailable = ptr(intstr.FromInt32(1))
		}, []want{invalid("spec")}},
		{"a selector expression that already had a bad value may keep it", func(p *policyv1.PodDisruptionBudget) {
			p.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"not a value"}}}
		}, func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = ptr(intstr.FromInt32(1)) }, nil},
		{"a new bad selector expression value is refused", nil, func(p *policyv1.PodDisruptionBudget) {
			p.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"not a value"}}}
		}, []want{invalid("spec.selector.matchExpressions[0].values[0]")}},
		{"a new bad label value is refused", nil, func(p *policyv1.PodDisruptionBudget) {
			p.Spec.Selector.MatchLabels["app"] = "not a value"
		}, []want{invalid("spec.selector.matchLabels")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := old.DeepCopy()
			if tt.old != nil {
				tt.old(o)
			}
			p := o.DeepCopy()
			tt.mutate(p)
			checkErrs(t, validation.PodDisruptionBudgetUpdate(p, o), tt.want...)
		})
	}
}

func TestPodDisruptionBudgetStatusUpdate(t *testing.T) {
	old := validPDB()
	old.ResourceVersion = "3"
	condition := metav1.Condition{
		Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue, Reason: policyv1.SufficientPodsReason,
		LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
	}
	tests := []struct {
		name   string
		mutate func(s *policyv1.PodDisruptionBudgetStatus)
		want   []want
	}{
		{"counters and a DisruptionAllowed condition are valid", func(s *policyv1.PodDisruptionBudgetStatus) {
			*s = policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: 3, DesiredHealthy: 2, ExpectedPods: 3, Conditions: []metav1.Condition{condition}}
		}, nil},
		{"negative counters are invalid", func(s *policyv1.PodDisruptionBudgetStatus) {
			*s = policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: -1, CurrentHealthy: -1, DesiredHealthy: -1, ExpectedPods: -1}
		}, []want{invalid("status.disruptionsAllowed"), invalid("status.currentHealthy"), invalid("status.desiredHealthy"), invalid("status.expectedPods")}},
		{"a condition needs a reason and a transition time", func(s *policyv1.PodDisruptionBudgetStatus) {
			s.Conditions = []metav1.Condition{{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse}}
		}, []want{required("status.conditions[0].reason"), required("status.conditions[0].lastTransitionTime")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := old.DeepCopy()
			tt.mutate(&p.Status)
			checkErrs(t, validation.PodDisruptionBudgetStatusUpdate(p, old), tt.want...)
		})
	}
}
