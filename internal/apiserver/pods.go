package apiserver

import (
	"errors"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeplane/nodeplane/internal/apiserver/admission"
	"github.com/nodeplane/nodeplane/internal/apiserver/store"
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
		setPodCondition(&pod.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, metav1.NewTime(h.s.cfg.Clock.Now()))
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

// evict serves POST pods/<name>/eviction: no disruption budgets are
// served, so an eviction is a delete with the eviction's options, preceded
// by the DisruptionTarget condition.
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
	for attempt := 0; ; attempt++ {
		cur, err := h.current(r.Context(), info, -1)
		if err != nil {
			writeError(w, r, err, gr, info.Name)
			return
		}
		pod := cur.(*corev1.Pod)
		if err := h.admit(r.Context(), admission.Create, info, ev, pod); err != nil {
			writeError(w, r, err, gr, info.Name)
			return
		}
		terminal := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
		if !terminal && pod.DeletionTimestamp == nil && len(opts.DryRun) == 0 {
			setPodCondition(&pod.Status, corev1.PodCondition{
				Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting",
			}, metav1.NewTime(h.s.cfg.Clock.Now()))
			rv, _ := store.ObjectRV(pod)
			updated, err := h.st.Update(r.Context(), pod, rv)
			if errors.Is(err, storage.ErrConflict) && attempt < maxWriteRetries {
				continue
			}
			if err != nil {
				writeError(w, r, err, gr, info.Name)
				return
			}
			cur = updated
		}
		_, err = h.deleteObject(r.Context(), cur, opts)
		if errors.Is(err, storage.ErrConflict) && attempt < maxWriteRetries && (opts.Preconditions == nil) {
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

func writeStatusSuccess(w http.ResponseWriter, r *http.Request, code int) {
	f, ok := negotiate(r, false)
	if !ok {
		f = responseFormat{info: serializerFor(mediaJSON)}
	}
	writeRaw(w, code, f.info, successStatus(code))
}

// setPodCondition sets or replaces a condition, moving lastTransitionTime
// only when the status changes.
func setPodCondition(status *corev1.PodStatus, c corev1.PodCondition, now metav1.Time) {
	for i := range status.Conditions {
		if status.Conditions[i].Type != c.Type {
			continue
		}
		if status.Conditions[i].Status != c.Status {
			c.LastTransitionTime = now
		} else {
			c.LastTransitionTime = status.Conditions[i].LastTransitionTime
		}
		c.LastProbeTime = status.Conditions[i].LastProbeTime
		status.Conditions[i] = c
		return
	}
	c.LastTransitionTime = now
	status.Conditions = append(status.Conditions, c)
}
