package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeplane/nodeplane/internal/apiserver/admission"
	"github.com/nodeplane/nodeplane/internal/apiserver/store"
	"github.com/nodeplane/nodeplane/internal/podcondition"
	"github.com/nodeplane/nodeplane/internal/storage"
)

var (
	bindingGVK  = corev1.SchemeGroupVersion.WithKind("Binding")
	evictionGVK = policyv1.SchemeGroupVersion.WithKind("Eviction")
)

// bind serves POST pods/<name>/binding: it sets spec.nodeName once.
func (h *resourceHandler) bind(w http.ResponseWriter, r *http.Request, info requestInfo) {
	gr := h.r.GroupResource()
	params, err := parseWriteParams(r)
	if err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	obj, err := decodeBody(w, r, bindingGVK, func() runtime.Object { return &corev1.Binding{} }, params.fieldValidation)
	if err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	b := obj.(*corev1.Binding)
	if b.Name == "" {
		b.Name = info.Name
	}
	if b.Namespace == "" {
		b.Namespace = info.Namespace
	}
	if b.Name != info.Name || b.Namespace != info.Namespace {
		writeError(w, r, apierrors.NewBadRequest("the binding's name and namespace must match the pod's"), gr, info.Name)
		return
	}
	var errs field.ErrorList
	if b.Target.Name == "" {
		errs = append(errs, field.Required(field.NewPath("target", "name"), ""))
	}
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		errs = append(errs, field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node", "<empty>"}))
	}
	if len(errs) > 0 {
		writeError(w, r, apierrors.NewInvalid(bindingGVK.GroupKind(), b.Name, errs), gr, info.Name)
		return
	}
	for attempt := 0; ; attempt++ {
		cur, err := h.current(r.Context(), info, -1)
		if err != nil {
			writeError(w, r, err, gr, info.Name)
			return
		}
		pod := cur.(*corev1.Pod)
		if err := h.admit(r.Context(), admission.Create, info, b, pod); err != nil {
			writeError(w, r, err, gr, info.Name)
			return
		}
		if pod.DeletionTimestamp != nil {
			writeError(w, r, apierrors.NewConflict(gr, info.Name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", pod.Name)), gr, info.Name)
			return
		}
		if pod.Spec.NodeName != "" {
			writeError(w, r, apierrors.NewConflict(gr, info.Name, fmt.Errorf("pod %v is already assigned to node %q", pod.Name, pod.Spec.NodeName)), gr, info.Name)
			return
		}
		pod.Spec.NodeName = b.Target.Name
		for k, v := range b.Annotations {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = v
		}
		podcondition.Set(&pod.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, h.s.cfg.Clock.Now())
		if params.dryRun {
			writeRaw(w, http.StatusCreated, serializerFor(mediaJSON), successStatus(http.StatusCreated))
			return
		}
		rv, _ := store.ObjectRV(pod)
		_, err = h.st.Update(r.Context(), pod, rv)
		if errors.Is(err, storage.ErrConflict) && attempt < maxWriteRetries {
			continue
		}
		if err != nil {
			writeError(w, r, err, gr, info.Name)
			return
		}
		writeStatusSuccess(w, r, http.StatusCreated)
		return
	}
}

// evict serves POST pods/<name>/eviction: a delete with the eviction's
// options that honours the pod's disruption budget as kube-apiserver does
// (see eviction.go for the decision): finished, pending and terminating
// pods go at once; a pod matched by one budget takes one of its allowed
// disruptions (written to the budget's status first, with optimistic
// concurrency) or is refused with 429; several budgets are a 500. The pod
// gets the DisruptionTarget condition just before it is deleted.
func (h *resourceHandler) evict(w http.ResponseWriter, r *http.Request, info requestInfo) {
	gr := h.r.GroupResource()
	params, err := parseWriteParams(r)
	if err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	obj, err := decodeBody(w, r, evictionGVK, func() runtime.Object { return &policyv1.Eviction{} }, params.fieldValidation)
	if err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	ev := obj.(*policyv1.Eviction)
	if ev.Name != "" && ev.Name != info.Name {
		writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("name in URL does not match name in Eviction object (%s, %s)", info.Name, ev.Name)), gr, info.Name)
		return
	}
	opts := ev.DeleteOptions
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	}
	if params.dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if err := h.evictPod(r.Context(), info, ev, opts); err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	writeStatusSuccess(w, r, http.StatusCreated)
}

// evictPod carries out one eviction.
func (h *resourceHandler) evictPod(ctx context.Context, info requestInfo, ev *policyv1.Eviction, opts *metav1.DeleteOptions) error {
	userRV := opts.Preconditions != nil && opts.Preconditions.ResourceVersion != nil
	var pod *corev1.Pod
	for attempt := 1; ; attempt++ {
		cur, err := h.current(ctx, info, -1)
		if err != nil {
			return err
		}
		pod = cur.(*corev1.Pod)
		if err := h.admit(ctx, admission.Create, info, ev, pod); err != nil {
			return err
		}
		if !skipsBudgets(pod) {
			break
		}
		o := opts
		if guardsVersion(pod) && !userRV {
			o = withResourceVersion(opts, pod.ResourceVersion)
		}
		err = h.markAndDelete(ctx, info, o)
		if isConflict(err) && !userRV && attempt < evictionAttempts {
			continue
		}
		return err
	}
	budgets, err := h.s.budgetsOf(ctx, pod.Namespace)
	if err != nil {
		return err
	}
	path, budget, err := decideEviction(pod, budgetsFor(pod, budgets))
	if err != nil {
		return err
	}
	dryRun := len(opts.DryRun) > 0
	o := opts
	switch path {
	case chargeBudget:
		if err := h.s.chargeBudget(ctx, budget, pod.Name, dryRun); err != nil {
			return err
		}
	case deleteIfUnchanged:
		o = withResourceVersion(opts, pod.ResourceVersion)
	}
	err = h.markAndDelete(ctx, info, o)
	if path == deleteIfUnchanged && !userRV && isConflict(err) {
		return budgetInProgress(budget.Name)
	}
	return err
}

// markAndDelete sets the DisruptionTarget condition on the latest pod
// (not on a dry run), then deletes it with opts. A resourceVersion
// precondition is checked against the pod before the condition is written
// and moved to the version that write produced, as upstream. Conflicting
// writes are retried only when opts carry no resourceVersion precondition.
func (h *resourceHandler) markAndDelete(ctx context.Context, info requestInfo, opts *metav1.DeleteOptions) error {
	pinned := opts.Preconditions != nil && opts.Preconditions.ResourceVersion != nil
	for attempt := 1; ; attempt++ {
		cur, err := h.current(ctx, info, -1)
		if err != nil {
			return err
		}
		a, err := apimeta.Accessor(cur)
		if err != nil {
			return err
		}
		if err := h.checkPreconditions(a, opts); err != nil {
			return err
		}
		o := opts
		if len(opts.DryRun) == 0 {
			pod := cur.(*corev1.Pod)
			podcondition.Set(&pod.Status, corev1.PodCondition{
				Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting",
			}, h.s.cfg.Clock.Now())
			rv, _ := store.ObjectRV(pod)
			updated, err := h.st.Update(ctx, pod, rv)
			if isConflict(err) && !pinned && attempt < evictionAttempts {
				continue
			}
			if err != nil {
				return err
			}
			cur = updated
			if pinned {
				o = withResourceVersion(opts, updated.(*corev1.Pod).ResourceVersion)
			}
		}
		_, err = h.deleteObject(ctx, cur, o)
		if errors.Is(err, storage.ErrConflict) && !pinned && attempt < evictionAttempts {
			continue
		}
		return err
	}
}

// budgetsOf reads the disruption budgets of a namespace from storage (none
// when the server does not serve them).
func (s *Server) budgetsOf(ctx context.Context, namespace string) ([]*policyv1.PodDisruptionBudget, error) {
	h := s.resources[pdbsResource]
	if h == nil {
		return nil, nil
	}
	page, err := h.st.ListFromStorage(ctx, store.Predicate{Namespace: namespace}, 0, "", 0)
	if err != nil {
		return nil, err
	}
	out := make([]*policyv1.PodDisruptionBudget, 0, len(page.Items))
	for _, obj := range page.Items {
		if b, ok := obj.(*policyv1.PodDisruptionBudget); ok {
			out = append(out, b)
		}
	}
	return out, nil
}

// chargeBudget takes one disruption from budget for podName and writes the
// budget's status with its resourceVersion as precondition; on a conflict
// it re-reads the budget and decides again, a bounded number of times. A
// dry run only checks.
func (s *Server) chargeBudget(ctx context.Context, budget *policyv1.PodDisruptionBudget, podName string, dryRun bool) error {
	h := s.resources[pdbsResource]
	gr := pdbsResource.GroupResource()
	for attempt := 1; ; attempt++ {
		updated, err := charge(budget, podName, dryRun, s.cfg.Clock.Now())
		if err != nil || updated == nil {
			return err
		}
		rv, _ := store.ObjectRV(budget)
		_, err = h.st.Update(ctx, updated, rv)
		if !errors.Is(err, storage.ErrConflict) {
			return err
		}
		if attempt == evictionAttempts {
			return apierrors.NewConflict(gr, budget.Name, errors.New(conflictMessage))
		}
		fresh, err := h.st.Get(ctx, budget.Namespace, budget.Name)
		if errors.Is(err, storage.ErrNotFound) {
			return apierrors.NewNotFound(gr, budget.Name)
		}
		if err != nil {
			return err
		}
		budget = fresh.(*policyv1.PodDisruptionBudget)
	}
}

// withResourceVersion returns a copy of opts requiring the pod to be at rv.
func withResourceVersion(opts *metav1.DeleteOptions, rv string) *metav1.DeleteOptions {
	o := opts.DeepCopy()
	if o.Preconditions == nil {
		o.Preconditions = &metav1.Preconditions{}
	}
	o.Preconditions.ResourceVersion = &rv
	return o
}

func isConflict(err error) bool {
	return errors.Is(err, storage.ErrConflict) || apierrors.IsConflict(err)
}

func writeStatusSuccess(w http.ResponseWriter, r *http.Request, code int) {
	f, ok := negotiate(r, false)
	if !ok {
		f = responseFormat{info: serializerFor(mediaJSON)}
	}
	writeRaw(w, code, f.info, successStatus(code))
}
