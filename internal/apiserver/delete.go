package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodeplane/nodeplane/internal/apiserver/admission"
	"github.com/nodeplane/nodeplane/internal/apiserver/scheme"
	"github.com/nodeplane/nodeplane/internal/apiserver/store"
	"github.com/nodeplane/nodeplane/internal/storage"
)

var deleteOptionsGVK = metav1.SchemeGroupVersion.WithKind("DeleteOptions")

// parseDeleteOptions reads DeleteOptions from the body (JSON, YAML or
// protobuf) and the query parameters. A value that does not parse is 400
// BadRequest; options that do not go together or an unknown
// propagationPolicy or dryRun are 422 Invalid DeleteOptions, as in
// kube-apiserver.
func parseDeleteOptions(w http.ResponseWriter, r *http.Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if len(body) > 0 {
		info, ct, ok := bodySerializer(r)
		if !ok {
			return nil, unsupportedMediaType(ct)
		}
		obj, _, err := info.Serializer.Decode(body, &deleteOptionsGVK, opts)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("decode DeleteOptions: %v", err))
		}
		o, ok := obj.(*metav1.DeleteOptions)
		if !ok {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("expected DeleteOptions, got %T", obj))
		}
		opts = o
	}
	q := r.URL.Query()
	if len(q) > 0 {
		var fromQuery metav1.DeleteOptions
		if err := scheme.ParameterCodec.DecodeParameters(q, metav1.SchemeGroupVersion, &fromQuery); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if opts.GracePeriodSeconds == nil {
			opts.GracePeriodSeconds = fromQuery.GracePeriodSeconds
		}
		if opts.PropagationPolicy == nil {
			opts.PropagationPolicy = fromQuery.PropagationPolicy
		}
		if opts.OrphanDependents == nil {
			opts.OrphanDependents = fromQuery.OrphanDependents
		}
		if len(opts.DryRun) == 0 {
			opts.DryRun = fromQuery.DryRun
		}
	}
	if errs := metav1validation.ValidateDeleteOptions(opts); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "DeleteOptions"}, "", errs)
	}
	return opts, nil
}

func (h *resourceHandler) delete(w http.ResponseWriter, r *http.Request, info requestInfo) {
	gr := h.r.GroupResource()
	opts, err := parseDeleteOptions(w, r)
	if err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	out, err := h.deleteWithRetry(r.Context(), info, opts)
	if err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	h.writeObject(w, r, http.StatusOK, out)
}

func (h *resourceHandler) deleteWithRetry(ctx context.Context, info requestInfo, opts *metav1.DeleteOptions) (runtime.Object, error) {
	for attempt := 0; ; attempt++ {
		cur, err := h.current(ctx, info, -1)
		if err != nil {
			return nil, err
		}
		if err := h.admit(ctx, admission.Delete, info, nil, cur); err != nil {
			return nil, err
		}
		out, err := h.deleteObject(ctx, cur, opts)
		if errors.Is(err, storage.ErrConflict) && attempt < maxWriteRetries {
			continue
		}
		return out, err
	}
}

// checkPreconditions compares DeleteOptions preconditions with the object.
func (h *resourceHandler) checkPreconditions(a metav1.Object, opts *metav1.DeleteOptions) error {
	if opts.Preconditions == nil {
		return nil
	}
	gr := h.r.GroupResource()
	if uid := opts.Preconditions.UID; uid != nil && *uid != a.GetUID() {
		return apierrors.NewConflict(gr, a.GetName(), fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *uid, a.GetUID()))
	}
	if rv := opts.Preconditions.ResourceVersion; rv != nil && *rv != a.GetResourceVersion() {
		return apierrors.NewConflict(gr, a.GetName(), fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *rv, a.GetResourceVersion()))
	}
	return nil
}

// deleteObject deletes cur (this resource's representation, not shared):
// at once, or by marking it with a deletionTimestamp when it has
// finalizers or a grace period. Storage conflicts are returned for retry.
func (h *resourceHandler) deleteObject(ctx context.Context, cur runtime.Object, opts *metav1.DeleteOptions) (runtime.Object, error) {
	a, err := meta.Accessor(cur)
	if err != nil {
		return nil, err
	}
	if err := h.checkPreconditions(a, opts); err != nil {
		return nil, err
	}
	if h == h.s.namespaces {
		return h.s.beginNamespaceDelete(ctx, cur, len(opts.DryRun) > 0)
	}
	dryRun := len(opts.DryRun) > 0
	curRV, _ := store.ObjectRV(cur)
	var grace int64
	if h.r.Strategy.DeleteGracePeriod != nil {
		grace = h.r.Strategy.DeleteGracePeriod(cur, opts.GracePeriodSeconds)
	}
	now := h.s.cfg.Clock.Now()
	// The propagation policy becomes the orphan or foregroundDeletion
	// finalizer, which the garbage collector acts on; an object already
	// waiting out a grace period keeps its finalizers, as upstream.
	dts, prev := a.GetDeletionTimestamp(), a.GetDeletionGracePeriodSeconds()
	shorter := prev == nil || grace < *prev
	finalizersChanged := false
	if dts == nil || shorter || *prev == 0 {
		var finalizers []string
		if finalizers, finalizersChanged = gcFinalizers(a.GetFinalizers(), opts); finalizersChanged {
			a.SetFinalizers(finalizers)
		}
	}
	pending := len(a.GetFinalizers()) > 0 || grace > 0
	if !pending {
		if dryRun {
			return cur, nil
		}
		deleted, err := h.st.Delete(ctx, a.GetNamespace(), a.GetName(), curRV)
		if err != nil {
			return nil, err
		}
		return h.fromStorage(deleted)
	}
	if dts != nil {
		// Already being deleted: a shorter grace period may hurry it, and
		// a new policy may change the finalizers.
		if !shorter && !finalizersChanged {
			return cur, nil
		}
		if shorter {
			newDeadline := metav1.NewTime(now.Add(time.Duration(grace) * time.Second))
			if newDeadline.Before(dts) {
				a.SetDeletionTimestamp(&newDeadline)
			}
			a.SetDeletionGracePeriodSeconds(&grace)
		}
	} else {
		dts := metav1.NewTime(now.Add(time.Duration(grace) * time.Second))
		a.SetDeletionTimestamp(&dts)
		a.SetDeletionGracePeriodSeconds(&grace)
	}
	if dryRun {
		return cur, nil
	}
	stored, err := h.toStorage(cur)
	if err != nil {
		return nil, err
	}
	out, err := h.st.Update(ctx, stored, curRV)
	if err != nil {
		return nil, err
	}
	return h.fromStorage(out)
}

func (h *resourceHandler) deleteCollection(w http.ResponseWriter, r *http.Request, info requestInfo) {
	gr := h.r.GroupResource()
	p, err := h.parseListParams(r, info)
	if err != nil {
		writeError(w, r, err, gr, "")
		return
	}
	opts, err := parseDeleteOptions(w, r)
	if err != nil {
		writeError(w, r, err, gr, "")
		return
	}
	page, err := h.st.ListFromStorage(r.Context(), p.pred, 0, "", 0)
	if err != nil {
		writeError(w, r, err, gr, "")
		return
	}
	var results []runtime.Object
	for _, item := range page.Items {
		a, _ := meta.Accessor(item)
		out, err := h.deleteWithRetry(r.Context(), requestInfo{Namespace: a.GetNamespace(), Name: a.GetName()}, opts)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			writeError(w, r, err, gr, a.GetName())
			return
		}
		results = append(results, out)
	}
	list := h.r.NewList()
	if err := meta.SetList(list, results); err != nil {
		writeError(w, r, err, gr, "")
		return
	}
	list.GetObjectKind().SetGroupVersionKind(h.r.ListGVK())
	h.writeObject(w, r, http.StatusOK, list)
}
