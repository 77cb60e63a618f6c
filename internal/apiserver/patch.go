package apiserver

import (
	"errors"
	"fmt"
	"mime"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/nodeplane/nodeplane/internal/storage"
)

func (h *resourceHandler) patch(w http.ResponseWriter, r *http.Request, info requestInfo) {
	gr := h.r.GroupResource()
	// The patch type first, as kube-apiserver: an unknown one is 415
	// whatever the options say.
	ct := r.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	pt := types.PatchType(mt)
	switch pt {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType:
	case types.ApplyYAMLPatchType, types.ApplyCBORPatchType:
		writeError(w, r, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
			Message: "server-side apply is not supported by nodeplane; use client-side apply (kubectl apply without --server-side)",
		}}, gr, info.Name)
		return
	default:
		writeError(w, r, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
			Message: fmt.Sprintf("the body of the request was in an unknown format (%s) - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json", ct),
		}}, gr, info.Name)
		return
	}
	params, err := parseWriteParams(r)
	if err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	body, err := readBody(r)
	if err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	jsonInfo := serializerFor(mediaJSON)
	old, err := h.current(r.Context(), info, -1)
	for attempt := 0; err == nil; attempt++ {
		var out runtime.Object
		out, err = h.applyPatch(w, r, info, pt, body, old, jsonInfo, params)
		if errors.Is(err, errPatchPrecondition) {
			err = apierrors.NewConflict(gr, info.Name, errors.New(conflictMessage))
			break
		}
		if errors.Is(err, storage.ErrConflict) && attempt < maxWriteRetries {
			if cur, ok := h.st.DecodeConflict(err); ok {
				old, err = h.fromStorage(cur)
			} else {
				old, err = h.current(r.Context(), info, -1)
			}
			continue
		}
		if err == nil {
			h.writeObject(w, r, http.StatusOK, out)
			return
		}
	}
	writeError(w, r, err, gr, info.Name)
}

// errPatchPrecondition: the patch named a resourceVersion that is not current.
var errPatchPrecondition = errors.New("patch resourceVersion precondition failed")

func (h *resourceHandler) applyPatch(w http.ResponseWriter, r *http.Request, info requestInfo, pt types.PatchType, patch []byte, old runtime.Object, jsonInfo runtime.SerializerInfo, params writeParams) (runtime.Object, error) {
	oldCopy := old.DeepCopyObject()
	if oldCopy.GetObjectKind().GroupVersionKind().Empty() {
		oldCopy.GetObjectKind().SetGroupVersionKind(h.r.GVK())
	}
	original, err := runtime.Encode(jsonInfo.Serializer, oldCopy)
	if err != nil {
		return nil, err
	}
	var patched []byte
	switch pt {
	case types.JSONPatchType:
		p, perr := jsonpatch.DecodePatch(patch)
		if perr != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid JSON patch: %v", perr))
		}
		patched, err = p.Apply(original)
		if err != nil {
			return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
				Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
				Message: fmt.Sprintf("the JSON patch could not be applied: %v", err),
			}}
		}
	case types.MergePatchType:
		patched, err = jsonpatch.MergePatch(original, patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid merge patch: %v", err))
		}
	case types.StrategicMergePatchType:
		patched, err = strategicpatch.StrategicMergePatch(original, patch, h.r.New())
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid strategic merge patch: %v", err))
		}
	}
	obj, err := decodeBytes(w, patched, jsonInfo, h.r.GVK(), h.r.New, params.fieldValidation)
	if err != nil {
		return nil, err
	}
	a, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	oa, _ := meta.Accessor(old)
	if a.GetResourceVersion() != oa.GetResourceVersion() {
		return nil, errPatchPrecondition
	}
	if err := h.checkIdentity(obj, info); err != nil {
		return nil, err
	}
	return h.updateObject(r.Context(), info, obj, old, params)
}
