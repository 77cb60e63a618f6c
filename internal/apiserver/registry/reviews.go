package registry

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	authenticationv1alpha1 "k8s.io/api/authentication/v1alpha1"
	authenticationv1beta1 "k8s.io/api/authentication/v1beta1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Reviews declares the create-only review resources the API server
// answers from its own authorizer and authenticator without storing
// anything: authorization.k8s.io/v1 SelfSubjectAccessReview,
// SelfSubjectRulesReview, SubjectAccessReview, LocalSubjectAccessReview
// and authentication.k8s.io SelfSubjectReview (v1, and v1beta1/v1alpha1
// for kubectl 1.27's `alpha auth whoami`).
func Reviews() []*Resource {
	authz := authorizationv1.SchemeGroupVersion
	review := func(gv schema.GroupVersion, resource, singular, kind string, namespaced bool, newFn func() runtime.Object) *Resource {
		return &Resource{GroupVersion: gv, Resource: resource, Singular: singular, Kind: kind, Namespaced: namespaced, New: newFn, CreateOnly: true}
	}
	return []*Resource{
		review(authz, "selfsubjectaccessreviews", "selfsubjectaccessreview", "SelfSubjectAccessReview", false, func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} }),
		review(authz, "selfsubjectrulesreviews", "selfsubjectrulesreview", "SelfSubjectRulesReview", false, func() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} }),
		review(authz, "subjectaccessreviews", "subjectaccessreview", "SubjectAccessReview", false, func() runtime.Object { return &authorizationv1.SubjectAccessReview{} }),
		review(authz, "localsubjectaccessreviews", "localsubjectaccessreview", "LocalSubjectAccessReview", true, func() runtime.Object { return &authorizationv1.LocalSubjectAccessReview{} }),
		review(authenticationv1.SchemeGroupVersion, "selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview", false, func() runtime.Object { return &authenticationv1.SelfSubjectReview{} }),
		review(authenticationv1beta1.SchemeGroupVersion, "selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview", false, func() runtime.Object { return &authenticationv1beta1.SelfSubjectReview{} }),
		review(authenticationv1alpha1.SchemeGroupVersion, "selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview", false, func() runtime.Object { return &authenticationv1alpha1.SelfSubjectReview{} }),
	}
}
