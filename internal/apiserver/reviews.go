package apiserver

import (
	"context"
	"fmt"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	authenticationv1alpha1 "k8s.io/api/authentication/v1alpha1"
	authenticationv1beta1 "k8s.io/api/authentication/v1beta1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/apiserver/authz"
	"github.com/nodeplane/nodeplane/internal/apiserver/rbac"
)

// review answers a create of an access review (registry.Reviews) with the
// same authorizer that guards requests, so `kubectl auth can-i` never
// disagrees with what the server then does. Nothing is stored. The create
// itself has been authorized like any other (system:basic-user lets every
// authenticated user review themselves; reviewing others needs a grant on
// subjectaccessreviews or localsubjectaccessreviews).
func (h *resourceHandler) review(w http.ResponseWriter, r *http.Request, info requestInfo) {
	gr := h.r.GroupResource()
	if info.Verb != "create" || info.Name != "" || info.Subresource != "" {
		writeStatus(w, r, statusOf(apierrors.NewMethodNotSupported(gr, info.Verb)))
		return
	}
	obj, err := decodeBody(w, r, h.r.GVK(), h.r.New, r.URL.Query().Get("fieldValidation"))
	if err != nil {
		writeError(w, r, err, gr, "")
		return
	}
	u, _ := authn.UserFrom(r.Context())
	if u == nil {
		u = &authn.User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}
	}
	if err := h.answer(r.Context(), u, info, obj); err != nil {
		writeError(w, r, err, gr, "")
		return
	}
	obj.GetObjectKind().SetGroupVersionKind(h.r.GVK())
	h.writeObject(w, r, http.StatusCreated, obj)
}

// answer fills the review's status.
func (h *resourceHandler) answer(ctx context.Context, requester *authn.User, info requestInfo, obj runtime.Object) error {
	switch o := obj.(type) {
	case *authorizationv1.SelfSubjectAccessReview:
		if errs := accessSpec(o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes); len(errs) > 0 {
			return h.invalid("", errs)
		}
		o.Status = h.s.access(ctx, requester, o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes)
	case *authorizationv1.SubjectAccessReview:
		errs := accessSpec(o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes)
		if o.Spec.User == "" && len(o.Spec.Groups) == 0 {
			errs = append(errs, field.Invalid(field.NewPath("spec", "user"), o.Spec.User, `at least one of user or group must be specified`))
		}
		if len(errs) > 0 {
			return h.invalid("", errs)
		}
		subject := &authn.User{Name: o.Spec.User, UID: o.Spec.UID, Groups: o.Spec.Groups}
		o.Status = h.s.access(ctx, subject, o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes)
	case *authorizationv1.LocalSubjectAccessReview:
		if o.Namespace == "" {
			o.Namespace = info.Namespace
		}
		if o.Namespace != info.Namespace {
			return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		errs := accessSpec(o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes)
		if o.Spec.NonResourceAttributes != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "nonResourceAttributes"), o.Spec.NonResourceAttributes, `disallowed on this kind of request`))
		}
		if o.Spec.ResourceAttributes != nil && o.Spec.ResourceAttributes.Namespace != o.Namespace {
			errs = append(errs, field.Invalid(field.NewPath("spec", "resourceAttributes", "namespace"), o.Spec.ResourceAttributes.Namespace, `must match metadata.namespace`))
		}
		if o.Spec.User == "" && len(o.Spec.Groups) == 0 {
			errs = append(errs, field.Invalid(field.NewPath("spec", "user"), o.Spec.User, `at least one of user or group must be specified`))
		}
		if len(errs) > 0 {
			return h.invalid("", errs)
		}
		subject := &authn.User{Name: o.Spec.User, UID: o.Spec.UID, Groups: o.Spec.Groups}
		o.Status = h.s.access(ctx, subject, o.Spec.ResourceAttributes, nil)
	case *authorizationv1.SelfSubjectRulesReview:
		if o.Spec.Namespace == "" {
			return h.invalid("", field.ErrorList{field.Required(field.NewPath("spec", "namespace"), "")})
		}
		o.Status = h.s.rules(ctx, requester, o.Spec.Namespace)
	case *authenticationv1.SelfSubjectReview:
		o.Status.UserInfo = authenticationv1.UserInfo{Username: requester.Name, UID: requester.UID, Groups: requester.Groups}
	case *authenticationv1beta1.SelfSubjectReview:
		o.Status.UserInfo = authenticationv1.UserInfo{Username: requester.Name, UID: requester.UID, Groups: requester.Groups}
	case *authenticationv1alpha1.SelfSubjectReview:
		o.Status.UserInfo = authenticationv1.UserInfo{Username: requester.Name, UID: requester.UID, Groups: requester.Groups}
	default:
		return fmt.Errorf("review of %T is not supported", obj)
	}
	return nil
}

// accessSpec checks that exactly one of the attribute kinds is given.
func accessSpec(res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes) field.ErrorList {
	if (res == nil) == (nonRes == nil) {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "resourceAttributes"), res, "exactly one of nonResourceAttributes or resourceAttributes must be specified")}
	}
	return nil
}

// access asks the authorizer whether subject may make the described request.
func (s *Server) access(ctx context.Context, subject *authn.User, res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
	if s.cfg.Authorizer == nil {
		return authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "the server authorizes every request"}
	}
	var a authz.Attributes
	if res != nil {
		a = authz.Attributes{
			Verb: res.Verb, ResourceRequest: true, APIGroup: res.Group, Resource: res.Resource,
			Subresource: res.Subresource, Namespace: res.Namespace, Name: res.Name,
		}
		if res.FieldSelector != nil {
			a.FieldSelector = res.FieldSelector.RawSelector
		}
		if res.LabelSelector != nil {
			a.LabelSelector = res.LabelSelector.RawSelector
		}
	} else {
		a = authz.Attributes{Verb: nonRes.Verb, Path: nonRes.Path}
	}
	// As upstream, a SubjectAccessReview is about exactly the user and
	// groups it names (system:authenticated is not implied).
	err := s.cfg.Authorizer.Authorize(authn.WithUser(ctx, subject), objectReader{s}, a)
	switch {
	case err == nil:
		return authorizationv1.SubjectAccessReviewStatus{Allowed: true}
	case apierrors.IsForbidden(err):
		return authorizationv1.SubjectAccessReviewStatus{}
	default:
		return authorizationv1.SubjectAccessReviewStatus{EvaluationError: err.Error()}
	}
}

// rules lists what u may do in namespace: the RBAC rules bound to u there
// plus the discovery paths every user may read. A node's and a built-in
// controller's access does not come from RBAC: their list is marked
// incomplete.
func (s *Server) rules(ctx context.Context, u *authn.User, namespace string) authorizationv1.SubjectRulesReviewStatus {
	var st authorizationv1.SubjectRulesReviewStatus
	held, err := rbac.Rules(ctx, objectReader{s}, u, namespace)
	if err != nil {
		st.EvaluationError = err.Error()
		st.Incomplete = true
	}
	for _, r := range held {
		if len(r.NonResourceURLs) > 0 {
			st.NonResourceRules = append(st.NonResourceRules, authorizationv1.NonResourceRule{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
			continue
		}
		st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
	}
	st.NonResourceRules = append(st.NonResourceRules, authorizationv1.NonResourceRule{Verbs: []string{"get"}, NonResourceURLs: authz.PublicPaths()})
	if _, isNode := authz.NodeName(u); isNode || u.Name == authz.UserControllerManager || u.Name == authz.UserScheduler {
		st.Incomplete = true
	}
	return st
}
