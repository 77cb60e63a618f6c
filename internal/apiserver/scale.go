package apiserver

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeplane/nodeplane/internal/storage"
)

var scaleGVK = autoscalingv1.SchemeGroupVersion.WithKind("Scale")

// scale serves the scale subresource (autoscaling/v1 Scale) of a resource
// that declares registry.Scale. GET reads spec.replicas, status.replicas
// and the selector; PUT and PATCH change spec.replicas through the main
// resource's update path (defaulting, validation, generation bump,
// admission as an update of the main resource), so a scale is a spec
// change like any other. A Scale's resourceVersion or uid, when set, is a
// precondition.
func (h *resourceHandler) scale(w http.ResponseWriter, r *http.Request, info requestInfo) {
	gr := h.r.GroupResource()
	if h.r.Scale == nil {
		writeStatus(w, r, notFoundPath())
		return
	}
	var out runtime.Object
	var err error
	switch info.Verb {
	case "get":
		out, err = h.current(r.Context(), info, -1)
	case "update":
		out, err = h.updateScale(w, r, info)
	case "patch":
		out, err = h.patchScale(w, r, info)
	default:
		err = apierrors.NewMethodNotSupported(gr, info.Verb)
	}
	if err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	s, err := h.scaleOf(out)
	if err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	f, ok := negotiate(r, false)
	if !ok {
		writeStatus(w, r, notAcceptable("only application/json, application/yaml and application/vnd.kubernetes.protobuf are supported"))
		return
	}
	writeRaw(w, http.StatusOK, f.info, s)
}

// scaleOf is the Scale of obj, an object of this resource.
func (h *resourceHandler) scaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	a, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	spec, status, selector := h.r.Scale.Get(obj)
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: scaleGVK.GroupVersion().String(), Kind: scaleGVK.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name: a.GetName(), Namespace: a.GetNamespace(), UID: a.GetUID(),
			ResourceVersion: a.GetResourceVersion(), CreationTimestamp: a.GetCreationTimestamp(),
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: spec},
		Status: autoscalingv1.ScaleStatus{Replicas: status, Selector: selector},
	}, nil
}

func newScale() runtime.Object { return &autoscalingv1.Scale{} }

func (h *resourceHandler) updateScale(w http.ResponseWriter, r *http.Request, info requestInfo) (runtime.Object, error) {
	params, err := parseWriteParams(r)
	if err != nil {
		return nil, err
	}
	in, err := decodeBody(w, r, scaleGVK, newScale, params.fieldValidation)
	if err != nil {
		return nil, err
	}
	if err := h.checkIdentity(in, info); err != nil {
		return nil, err
	}
	return h.writeScale(r.Context(), info, params, func(runtime.Object) (*autoscalingv1.Scale, error) {
		return in.(*autoscalingv1.Scale), nil
	})
}

func (h *resourceHandler) patchScale(w http.ResponseWriter, r *http.Request, info requestInfo) (runtime.Object, error) {
	params, err := parseWriteParams(r)
	if err != nil {
		return nil, err
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	pt := types.PatchType(mt)
	switch pt {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType:
	default:
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
			Message: fmt.Sprintf("the body of the request was in an unknown format (%s) - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json", mt),
		}}
	}
	patch, err := readBody(r)
	if err != nil {
		return nil, err
	}
	jsonInfo := serializerFor(mediaJSON)
	return h.writeScale(r.Context(), info, params, func(cur runtime.Object) (*autoscalingv1.Scale, error) {
		old, err := h.scaleOf(cur)
		if err != nil {
			return nil, err
		}
		original, err := runtime.Encode(jsonInfo.Serializer, old)
		if err != nil {
			return nil, err
		}
		patched, err := applyScalePatch(pt, original, patch)
		if err != nil {
			return nil, err
		}
		in, err := decodeBytes(w, patched, jsonInfo, scaleGVK, newScale, params.fieldValidation)
		if err != nil {
			return nil, err
		}
		if err := h.checkIdentity(in, info); err != nil {
			return nil, err
		}
		return in.(*autoscalingv1.Scale), nil
	})
}

// applyScalePatch applies a JSON, merge or strategic merge patch to a
// Scale's JSON.
func applyScalePatch(pt types.PatchType, original, patch []byte) ([]byte, error) {
	switch pt {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid JSON patch: %v", err))
		}
		out, err := p.Apply(original)
		if err != nil {
			return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
				Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
				Message: fmt.Sprintf("the JSON patch could not be applied: %v", err),
			}}
		}
		return out, nil
	case types.MergePatchType:
		out, err := jsonpatch.MergePatch(original, patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid merge patch: %v", err))
		}
		return out, nil
	default:
		out, err := strategicpatch.StrategicMergePatch(original, patch, &autoscalingv1.Scale{})
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid strategic merge patch: %v", err))
		}
		return out, nil
	}
}

// writeScale reads the object, asks desired for the Scale to write given
// it, and writes the new spec.replicas through the main resource's update
// path. A write that lost a race is redone on the newer object unless the
// Scale named a resourceVersion.
func (h *resourceHandler) writeScale(ctx context.Context, info requestInfo, params writeParams, desired func(cur runtime.Object) (*autoscalingv1.Scale, error)) (runtime.Object, error) {
	gr := h.r.GroupResource()
	main := info
	main.Subresource = ""
	for attempt := 0; ; attempt++ {
		cur, err := h.current(ctx, info, -1)
		if err != nil {
			return nil, err
		}
		s, err := desired(cur)
		if err != nil {
			return nil, err
		}
		if errs := apivalidation.ValidateNonnegativeField(int64(s.Spec.Replicas), field.NewPath("spec", "replicas")); len(errs) > 0 {
			return nil, apierrors.NewInvalid(scaleGVK.GroupKind(), info.Name, errs)
		}
		a, err := meta.Accessor(cur)
		if err != nil {
			return nil, err
		}
		if s.UID != "" && s.UID != a.GetUID() {
			return nil, apierrors.NewConflict(gr, info.Name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", s.UID, a.GetUID()))
		}
		if s.ResourceVersion != "" && s.ResourceVersion != a.GetResourceVersion() {
			return nil, apierrors.NewConflict(gr, info.Name, errors.New(conflictMessage))
		}
		obj := cur.DeepCopyObject()
		h.r.Scale.SetReplicas(obj, s.Spec.Replicas)
		out, err := h.updateObject(ctx, main, obj, cur, params)
		if errors.Is(err, storage.ErrConflict) && s.ResourceVersion == "" && attempt < maxWriteRetries {
			continue
		}
		return out, err
	}
}
