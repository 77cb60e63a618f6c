package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"mime"
	"net/http"
	"strings"

	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeplane/nodeplane/internal/apiserver/admission"
	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/apiserver/scheme"
	"github.com/nodeplane/nodeplane/internal/apiserver/store"
	"github.com/nodeplane/nodeplane/internal/storage"
)

// maxWriteRetries bounds retries of an unconditional write that lost a race.
const maxWriteRetries = 10

// writeParams are the query parameters of create, update and patch.
type writeParams struct {
	dryRun          bool
	fieldValidation string // Strict, Warn or Ignore
}

// parseWriteParams decodes and checks the options of a write: POST
// carries CreateOptions, PUT UpdateOptions and PATCH PatchOptions (for
// the patch type in Content-Type). As in kube-apiserver, a value that does
// not parse is 400 BadRequest and one the options do not allow (an
// unknown dryRun or fieldValidation, a fieldManager too long or with
// unprintable characters, force on a patch that is not an apply) is 422
// Invalid naming the options kind.
func parseWriteParams(r *http.Request) (writeParams, error) {
	// Without a query (or with only client-go's timeout), create and
	// update options are all defaults, which are valid (a patch is not: an
	// apply needs a fieldManager). This skips building empty options and
	// validating them on every agent heartbeat.
	if r.Method != http.MethodPatch && onlyTimeout(r.URL.RawQuery) {
		return writeParams{fieldValidation: metav1.FieldValidationWarn}, nil
	}
	var (
		p      writeParams
		kind   string
		dryRun []string
		fv     string
		errs   field.ErrorList
	)
	switch r.Method {
	case http.MethodPut:
		o := &metav1.UpdateOptions{}
		if err := decodeQuery(r, o); err != nil {
			return p, err
		}
		kind, dryRun, fv, errs = "UpdateOptions", o.DryRun, o.FieldValidation, metav1validation.ValidateUpdateOptions(o)
	case http.MethodPatch:
		o := &metav1.PatchOptions{}
		if err := decodeQuery(r, o); err != nil {
			return p, err
		}
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		kind, dryRun, fv, errs = "PatchOptions", o.DryRun, o.FieldValidation, metav1validation.ValidatePatchOptions(o, types.PatchType(mt))
	default:
		o := &metav1.CreateOptions{}
		if err := decodeQuery(r, o); err != nil {
			return p, err
		}
		kind, dryRun, fv, errs = "CreateOptions", o.DryRun, o.FieldValidation, metav1validation.ValidateCreateOptions(o)
	}
	if len(errs) > 0 {
		return p, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
	}
	p.dryRun = len(dryRun) > 0
	p.fieldValidation = fv
	if p.fieldValidation == "" {
		p.fieldValidation = metav1.FieldValidationWarn
	}
	return p, nil
}

// decodeQuery decodes the request's query parameters into the options
// struct opts; a value that does not parse is 400 BadRequest.
// onlyTimeout reports whether a query is empty or has no parameter but
// timeout, which client-go adds to every request of a client with a
// timeout (a kubelet's heartbeats, for one) and which no write option
// reads: such a write has the default options.
func onlyTimeout(rawQuery string) bool {
	for rest := rawQuery; rest != ""; {
		var param string
		param, rest, _ = strings.Cut(rest, "&")
		if key, _, _ := strings.Cut(param, "="); key != "timeout" {
			return false
		}
	}
	return true
}

func decodeQuery(r *http.Request, opts runtime.Object) error {
	if err := scheme.ParameterCodec.DecodeParameters(r.URL.Query(), metav1.SchemeGroupVersion, opts); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	return nil
}

func unsupportedMediaType(ct string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format (%s) - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf", ct),
	}}
}

// decodeBody reads and decodes the request body into a new object of kind
// gvk (made by newFn). Unknown or duplicate fields are refused (Strict),
// reported as warnings (Warn) or dropped (Ignore).
func decodeBody(w http.ResponseWriter, r *http.Request, gvk schema.GroupVersionKind, newFn func() runtime.Object, fieldValidation string) (runtime.Object, error) {
	info, ct, ok := bodySerializer(r)
	if !ok {
		return nil, unsupportedMediaType(ct)
	}
	body, err := readBodyLent(r)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, apierrors.NewBadRequest("the request body is empty")
	}
	return decodeBytes(w, body, info, gvk, newFn, fieldValidation)
}

func decodeBytes(w http.ResponseWriter, body []byte, info runtime.SerializerInfo, gvk schema.GroupVersionKind, newFn func() runtime.Object, fieldValidation string) (runtime.Object, error) {
	decoder := info.Serializer
	if fieldValidation != "Ignore" && info.StrictSerializer != nil {
		decoder = info.StrictSerializer
	}
	// The strict decoder returns the decoded object together with its
	// strict-decoding error (unknown or duplicate fields), so one pass does.
	obj, got, err := decoder.Decode(body, &gvk, newFn())
	if err != nil && runtime.IsStrictDecodingError(err) {
		if fieldValidation == "Strict" {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		var sde interface{ Errors() []error }
		if errors.As(err, &sde) {
			for _, e := range sde.Errors() {
				w.Header().Add("Warning", fmt.Sprintf("299 - %q", e.Error()))
			}
		}
		err = nil
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decode request body: %v", err))
	}
	if got == nil || got.Kind != gvk.Kind || got.GroupVersion() != gvk.GroupVersion() {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the object in the request is %s, but this endpoint expects %s", got, gvk))
	}
	return obj, nil
}

// invalid builds a 422 Invalid error for the resource.
func (h *resourceHandler) invalid(name string, errs field.ErrorList) error {
	return apierrors.NewInvalid(h.r.GVK().GroupKind(), name, errs)
}

// admit runs the admission plugins on a write by the user on ctx.
func (h *resourceHandler) admit(ctx context.Context, op admission.Operation, info requestInfo, obj, old runtime.Object) error {
	if err := h.confirmNoEscalation(ctx, op, info, obj); err != nil {
		return err
	}
	if len(h.s.cfg.Admission) == 0 {
		return nil
	}
	user, _ := authn.UserFrom(ctx)
	a := admission.Attributes{
		Operation: op, Resource: h.r.GroupResource(), Subresource: info.Subresource,
		Namespace: info.Namespace, Name: info.Name, Object: obj, OldObject: old,
		User: user, Objects: objectReader{h.s},
	}
	for _, p := range h.s.cfg.Admission {
		if err := p.Admit(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// generateNameSuffix is the alphabet of generated name suffixes (no vowels,
// no look-alike characters), as Kubernetes users know them.
const generateNameSuffix = "bcdfghjklmnpqrstvwxz2456789"

func generateName(base string) string {
	const maxBase = 63 - 5
	if len(base) > maxBase {
		base = base[:maxBase]
	}
	b := make([]byte, 5)
	for i := range b {
		b[i] = generateNameSuffix[rand.IntN(len(generateNameSuffix))]
	}
	return base + string(b)
}

func (h *resourceHandler) create(w http.ResponseWriter, r *http.Request, info requestInfo) {
	gr := h.r.GroupResource()
	params, err := parseWriteParams(r)
	if err != nil {
		writeError(w, r, err, gr, "")
		return
	}
	obj, err := decodeBody(w, r, h.r.GVK(), h.r.New, params.fieldValidation)
	if err != nil {
		writeError(w, r, err, gr, "")
		return
	}
	created, err := h.createObject(r.Context(), info, obj, params)
	if err != nil {
		name := ""
		if a, aerr := meta.Accessor(obj); aerr == nil {
			name = a.GetName()
		}
		writeError(w, r, err, gr, name)
		return
	}
	h.writeObject(w, r, http.StatusCreated, created)
}

// createObject runs the create path for a decoded object of this resource.
func (h *resourceHandler) createObject(ctx context.Context, info requestInfo, obj runtime.Object, params writeParams) (runtime.Object, error) {
	a, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if h.r.Namespaced {
		switch {
		case a.GetNamespace() == "":
			a.SetNamespace(info.Namespace)
		case info.Namespace != "" && a.GetNamespace() != info.Namespace:
			return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		if a.GetNamespace() == "" {
			return nil, apierrors.NewBadRequest("a namespace is required for a namespaced resource")
		}
	} else {
		a.SetNamespace("")
	}
	if a.GetResourceVersion() != "" {
		return nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	generated := a.GetName() == "" && a.GetGenerateName() != ""
	now := metav1.NewTime(h.s.cfg.Clock.Now().Truncate(1e9))
	a.SetUID(types.UID(uuid.NewString()))
	a.SetCreationTimestamp(now)
	a.SetDeletionTimestamp(nil)
	a.SetDeletionGracePeriodSeconds(nil)
	a.SetResourceVersion("")
	a.SetSelfLink("")
	a.SetManagedFields(nil)
	a.SetGeneration(0)
	if h.r.Strategy.SpecChanged != nil {
		a.SetGeneration(1)
	}
	if h.r.Strategy.PrepareForCreate != nil {
		h.r.Strategy.PrepareForCreate(obj)
	}
	if h.r.Strategy.Default != nil {
		h.r.Strategy.Default(obj)
	}
	if h.r.Namespaced {
		if err := h.s.checkNamespaceOpen(ctx, a.GetNamespace()); err != nil {
			return nil, err
		}
	}
	if err := h.admit(ctx, admission.Create, info, obj, nil); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		if generated {
			a.SetName(generateName(a.GetGenerateName()))
		}
		if h.r.Strategy.Validate != nil {
			if errs := h.r.Strategy.Validate(obj); len(errs) > 0 {
				return nil, h.invalid(a.GetName(), errs)
			}
		}
		if params.dryRun {
			return obj, nil
		}
		stored, err := h.toStorage(obj)
		if err != nil {
			return nil, err
		}
		out, err := h.st.Create(ctx, stored)
		if errors.Is(err, storage.ErrAlreadyExists) && generated && attempt < 3 {
			continue
		}
		if err != nil {
			return nil, err
		}
		return h.fromStorage(out)
	}
}

func (h *resourceHandler) update(w http.ResponseWriter, r *http.Request, info requestInfo) {
	gr := h.r.GroupResource()
	params, err := parseWriteParams(r)
	if err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	obj, err := decodeBody(w, r, h.r.GVK(), h.r.New, params.fieldValidation)
	if err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	if err := h.checkIdentity(obj, info); err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	a, _ := meta.Accessor(obj)
	bodyRV, err := store.ParseRV(a.GetResourceVersion())
	if err != nil {
		writeError(w, r, apierrors.NewBadRequest(err.Error()), gr, info.Name)
		return
	}
	old, err := h.currentForUpdate(r.Context(), info, bodyRV)
	if errors.Is(err, storage.ErrNotFound) && h.r.Strategy.AllowCreateOnUpdate && info.Subresource == "" {
		created, cerr := h.createObject(r.Context(), info, obj, params)
		if cerr != nil {
			writeError(w, r, cerr, gr, info.Name)
			return
		}
		h.writeObject(w, r, http.StatusCreated, created)
		return
	}
	if err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	for attempt := 0; ; attempt++ {
		if bodyRV != 0 {
			if cur, _ := store.ObjectRV(old); cur != bodyRV {
				writeError(w, r, apierrors.NewConflict(gr, info.Name, errors.New(conflictMessage)), gr, info.Name)
				return
			}
		}
		if err := uidPrecondition(gr, info.Name, a.GetUID(), old); err != nil {
			writeError(w, r, err, gr, info.Name)
			return
		}
		in := obj
		if attempt > 0 {
			in = obj.DeepCopyObject()
		}
		out, err := h.updateObject(r.Context(), info, in, old, params)
		if errors.Is(err, storage.ErrConflict) && bodyRV == 0 && attempt < maxWriteRetries {
			if cur, ok := h.st.DecodeConflict(err); ok {
				if old, err = h.fromStorage(cur); err == nil {
					continue
				}
			} else if old, err = h.current(r.Context(), info, -1); err == nil {
				continue
			}
		}
		if err != nil {
			writeError(w, r, err, gr, info.Name)
			return
		}
		h.writeObject(w, r, http.StatusOK, out)
		return
	}
}

// uidPrecondition: a uid in the body of an update is a precondition, as
// in kube-apiserver; one that is not the stored object's is 409 Conflict
// (the object was replaced since the client read it, or the client is
// trying to change what cannot change).
func uidPrecondition(gr schema.GroupResource, name string, uid types.UID, old runtime.Object) error {
	if uid == "" {
		return nil
	}
	oa, err := meta.Accessor(old)
	if err != nil {
		return err
	}
	if uid != oa.GetUID() {
		return apierrors.NewConflict(gr, name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", uid, oa.GetUID()))
	}
	return nil
}

// immutableMeta refuses an update that changes the uid or puts a
// deletionTimestamp on an object that has none: 422 Invalid, like
// kube-apiserver's object meta validation. Leaving either out keeps the
// stored value.
func (h *resourceHandler) immutableMeta(name string, a, oa metav1.Object) error {
	var errs field.ErrorList
	if uid := a.GetUID(); uid != "" && uid != oa.GetUID() {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "uid"), uid, "field is immutable"))
	}
	if dts := a.GetDeletionTimestamp(); dts != nil && oa.GetDeletionTimestamp() == nil {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "deletionTimestamp"), dts, "field is immutable"))
	}
	if len(errs) > 0 {
		return h.invalid(name, errs)
	}
	return nil
}

// checkIdentity refuses a body whose name or namespace differs from the URL.
func (h *resourceHandler) checkIdentity(obj runtime.Object, info requestInfo) error {
	a, err := meta.Accessor(obj)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if a.GetName() != info.Name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", a.GetName(), info.Name))
	}
	if h.r.Namespaced {
		if a.GetNamespace() == "" {
			a.SetNamespace(info.Namespace)
		} else if a.GetNamespace() != info.Namespace {
			return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
	} else {
		a.SetNamespace("")
	}
	return nil
}

// current returns the stored object in this resource's representation:
// from the watch cache when it already holds revision wantRV (0 = any
// cached revision), otherwise from storage. wantRV < 0 forces storage.
func (h *resourceHandler) current(ctx context.Context, info requestInfo, wantRV int64) (runtime.Object, error) {
	return h.read(ctx, info, wantRV, false)
}

// currentForUpdate is current for the update path. When nothing on that
// path can write to the old object (see oldStaysUnmodified), it returns the
// watch cache's object itself instead of a deep copy: a Lease renewal
// only compares with the stored object and copies a few of its values.
func (h *resourceHandler) currentForUpdate(ctx context.Context, info requestInfo, wantRV int64) (runtime.Object, error) {
	return h.read(ctx, info, wantRV, info.Subresource == "" && h.oldStaysUnmodified())
}

// read is current; shared returns the watch cache's object itself (only
// for a caller that never writes to it and whose resource converts
// nothing) instead of a converted deep copy.
func (h *resourceHandler) read(ctx context.Context, info requestInfo, wantRV int64, shared bool) (runtime.Object, error) {
	if wantRV >= 0 {
		if cached, err := h.st.GetCached(info.Namespace, info.Name); err == nil {
			if rv, _ := store.ObjectRV(cached); wantRV == 0 || rv == wantRV {
				if shared {
					return cached, nil
				}
				return h.fromStorage(cached.DeepCopyObject())
			}
		}
	}
	obj, err := h.st.Get(ctx, info.Namespace, info.Name)
	if err != nil {
		return nil, err
	}
	return h.fromStorage(obj)
}

// oldStaysUnmodified reports whether an update of the main resource leaves
// the old object as it is, so that it may be the watch cache's object:
// the resource converts nothing between storage and its representation
// and its strategy has no hook that may change objects other than the
// validators (which only read). updateObject only reads the old object
// (the pointers it copies into the new one, deletionTimestamp and
// deletionGracePeriodSeconds, are never written through) and admission
// plugins read OldObject only.
func (h *resourceHandler) oldStaysUnmodified() bool {
	st := h.r.Strategy
	return h.r.FromStorage == nil && h.r.ToStorage == nil &&
		st.Default == nil && st.PrepareForUpdate == nil && st.SpecChanged == nil
}

// updateObject applies the update path to obj (the new state) against old
// and writes it with old's resourceVersion as precondition. old is not
// written to; it may be the cache's object only when oldStaysUnmodified.
func (h *resourceHandler) updateObject(ctx context.Context, info requestInfo, obj, old runtime.Object, params writeParams) (runtime.Object, error) {
	a, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	oa, err := meta.Accessor(old)
	if err != nil {
		return nil, err
	}
	if err := h.immutableMeta(info.Name, a, oa); err != nil {
		return nil, err
	}
	a.SetUID(oa.GetUID())
	a.SetCreationTimestamp(oa.GetCreationTimestamp())
	a.SetDeletionTimestamp(oa.GetDeletionTimestamp())
	a.SetDeletionGracePeriodSeconds(oa.GetDeletionGracePeriodSeconds())
	a.SetGeneration(oa.GetGeneration())
	a.SetSelfLink("")
	a.SetManagedFields(nil)
	if a.GetNamespace() == "" {
		a.SetNamespace(oa.GetNamespace())
	}
	switch {
	case info.Subresource == "finalize":
		if h.r.Strategy.PrepareForFinalizeUpdate != nil {
			h.r.Strategy.PrepareForFinalizeUpdate(obj, old)
		}
	case info.Subresource != "":
		if h.r.Strategy.PrepareForStatusUpdate != nil {
			h.r.Strategy.PrepareForStatusUpdate(obj, old)
		}
	default:
		if h.r.Strategy.Default != nil {
			h.r.Strategy.Default(obj)
		}
		if h.r.Strategy.PrepareForUpdate != nil {
			h.r.Strategy.PrepareForUpdate(obj, old)
		}
		if h.r.Strategy.SpecChanged != nil && h.r.Strategy.SpecChanged(obj, old) {
			a.SetGeneration(oa.GetGeneration() + 1)
		}
	}
	if err := h.admit(ctx, admission.Update, info, obj, old); err != nil {
		return nil, err
	}
	var errs field.ErrorList
	switch {
	case info.Subresource == "finalize":
		if h.r.Strategy.ValidateFinalizeUpdate != nil {
			errs = h.r.Strategy.ValidateFinalizeUpdate(obj, old)
		}
	case info.Subresource != "" && h.r.Strategy.ValidateStatusUpdate != nil:
		errs = h.r.Strategy.ValidateStatusUpdate(obj, old)
	case info.Subresource == "" && h.r.Strategy.ValidateUpdate != nil:
		errs = h.r.Strategy.ValidateUpdate(obj, old)
	}
	if len(errs) > 0 {
		return nil, h.invalid(info.Name, errs)
	}
	oldRV, _ := store.ObjectRV(old)
	a.SetResourceVersion(oa.GetResourceVersion())
	if params.dryRun {
		return obj, nil
	}
	stored, err := h.toStorage(obj)
	if err != nil {
		return nil, err
	}
	// Finalizers gone from an object being deleted: the update completes the delete.
	if a.GetDeletionTimestamp() != nil && len(a.GetFinalizers()) == 0 && (a.GetDeletionGracePeriodSeconds() == nil || *a.GetDeletionGracePeriodSeconds() == 0) && !h.pendingNamespaceFinalize(obj) {
		deleted, err := h.st.Delete(ctx, a.GetNamespace(), a.GetName(), oldRV)
		if err != nil {
			return nil, err
		}
		return h.fromStorage(deleted)
	}
	out, err := h.st.Update(ctx, stored, oldRV)
	if err != nil {
		return nil, err
	}
	return h.fromStorage(out)
}
