package apiserver

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	listvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeplane/nodeplane/internal/apiserver/scheme"
	"github.com/nodeplane/nodeplane/internal/apiserver/store"
	"github.com/nodeplane/nodeplane/internal/storage"
)

// fromStorage converts a stored object into this resource's representation.
func (h *resourceHandler) fromStorage(obj runtime.Object) (runtime.Object, error) {
	if h.r.FromStorage == nil {
		return obj, nil
	}
	return h.r.FromStorage(obj)
}

// toStorage converts an object of this resource into the stored representation.
func (h *resourceHandler) toStorage(obj runtime.Object) (runtime.Object, error) {
	if h.r.ToStorage == nil {
		return obj, nil
	}
	return h.r.ToStorage(obj)
}

func (h *resourceHandler) get(w http.ResponseWriter, r *http.Request, info requestInfo) {
	gr := h.r.GroupResource()
	var obj runtime.Object
	var err error
	if _, err := store.ParseRV(r.URL.Query().Get("resourceVersion")); err != nil {
		writeError(w, r, apierrors.NewBadRequest(err.Error()), gr, info.Name)
		return
	}
	if r.URL.Query().Get("resourceVersion") == "0" {
		obj, err = h.st.GetCached(info.Namespace, info.Name)
		if errors.Is(err, store.ErrNotReady) {
			obj, err = h.st.Get(r.Context(), info.Namespace, info.Name)
		}
	} else {
		obj, err = h.st.Get(r.Context(), info.Namespace, info.Name)
	}
	if err == nil {
		obj, err = h.fromStorage(obj)
	}
	if err != nil {
		writeError(w, r, err, gr, info.Name)
		return
	}
	h.writeObject(w, r, http.StatusOK, obj)
}

// writeObject writes an object or list, as a Table or partial metadata when asked.
func (h *resourceHandler) writeObject(w http.ResponseWriter, r *http.Request, code int, obj runtime.Object) {
	f, ok := negotiate(r, true)
	if !ok {
		writeStatus(w, r, notAcceptable("only application/json, application/yaml and application/vnd.kubernetes.protobuf are supported"))
		return
	}
	if err := f.readTableOptions(r); err != nil {
		writeError(w, r, err, h.r.GroupResource(), "")
		return
	}
	out, err := h.transform(obj, f, true)
	if err != nil {
		writeError(w, r, err, h.r.GroupResource(), "")
		return
	}
	writeRaw(w, code, f.info, out)
}

// transform renders obj in the negotiated output kind.
func (h *resourceHandler) transform(obj runtime.Object, f responseFormat, headers bool) (runtime.Object, error) {
	switch f.kind {
	case outputTable:
		opts := f.table
		table, err := h.r.Printer.ToTable(obj, h.s.cfg.Clock.Now(), headers)
		if err != nil {
			return nil, err
		}
		table.APIVersion = "meta.k8s.io/" + f.metaVersion
		table.Kind = "Table"
		switch opts.IncludeObject {
		case metav1.IncludeNone:
			for i := range table.Rows {
				table.Rows[i].Object = runtime.RawExtension{}
			}
		case metav1.IncludeObject:
			if err := h.embedObjects(table, obj); err != nil {
				return nil, err
			}
		}
		return table, nil
	case outputMetadata:
		return toPartialMetadata(obj, f.metaVersion)
	}
	if obj.GetObjectKind().GroupVersionKind().Empty() {
		if meta.IsListType(obj) {
			obj.GetObjectKind().SetGroupVersionKind(h.r.ListGVK())
		} else {
			obj.GetObjectKind().SetGroupVersionKind(h.r.GVK())
		}
	}
	return obj, nil
}

// readTableOptions reads the request's table options when f is Table
// output.
func (f *responseFormat) readTableOptions(r *http.Request) error {
	if f.kind != outputTable {
		return nil
	}
	var err error
	f.table, err = tableOptions(r)
	return err
}

// tableOptions reads includeObject (None, Metadata or Object; empty means
// Metadata) and refuses other values with 400, as kube-apiserver does.
func tableOptions(r *http.Request) (metav1.TableOptions, error) {
	var opts metav1.TableOptions
	if err := scheme.ParameterCodec.DecodeParameters(r.URL.Query(), metav1.SchemeGroupVersion, &opts); err != nil {
		return opts, apierrors.NewBadRequest(err.Error())
	}
	if errs := metav1validation.ValidateTableOptions(&opts); len(errs) > 0 {
		return opts, apierrors.NewBadRequest(fmt.Sprintf("invalid table options: %v", errs.ToAggregate()))
	}
	return opts, nil
}

// embedObjects replaces each row's metadata with the whole object it
// prints (includeObject=Object), with its apiVersion and kind set, which is
// what kubectl --sort-by and custom columns over a Table read.
func (h *resourceHandler) embedObjects(table *metav1.Table, obj runtime.Object) error {
	items := []runtime.Object{obj}
	isList := meta.IsListType(obj)
	if isList {
		var err error
		if items, err = meta.ExtractList(obj); err != nil {
			return err
		}
	}
	if len(items) != len(table.Rows) {
		return fmt.Errorf("table of %s: %d rows for %d objects", h.r.GroupResource(), len(table.Rows), len(items))
	}
	for i, item := range items {
		if item.GetObjectKind().GroupVersionKind() != h.r.GVK() {
			// A list's items are its own copies (see buildList); a single
			// object may be the watch cache's: set the kind on a copy.
			if !isList {
				item = item.DeepCopyObject()
			}
			item.GetObjectKind().SetGroupVersionKind(h.r.GVK())
		}
		table.Rows[i].Object = runtime.RawExtension{Object: item}
	}
	return nil
}

func toPartialMetadata(obj runtime.Object, ver string) (runtime.Object, error) {
	gv := "meta.k8s.io/" + ver
	if meta.IsListType(obj) {
		items, err := meta.ExtractList(obj)
		if err != nil {
			return nil, err
		}
		list := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: gv, Kind: "PartialObjectMetadataList"}}
		if lm, err := meta.ListAccessor(obj); err == nil {
			list.ResourceVersion, list.Continue, list.RemainingItemCount = lm.GetResourceVersion(), lm.GetContinue(), lm.GetRemainingItemCount()
		}
		for _, item := range items {
			om, err := objectMeta(item)
			if err != nil {
				return nil, err
			}
			p := metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: gv, Kind: "PartialObjectMetadata"}}
			om.DeepCopyInto(&p.ObjectMeta)
			list.Items = append(list.Items, p)
		}
		return list, nil
	}
	om, err := objectMeta(obj)
	if err != nil {
		return nil, err
	}
	p := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: gv, Kind: "PartialObjectMetadata"}}
	om.DeepCopyInto(&p.ObjectMeta)
	return p, nil
}

// objectMeta returns the ObjectMeta embedded in obj. (meta.Accessor
// returns obj itself for a typed object, not its ObjectMeta.)
func objectMeta(obj runtime.Object) (*metav1.ObjectMeta, error) {
	if a, ok := obj.(metav1.ObjectMetaAccessor); ok {
		if om, ok := a.GetObjectMeta().(*metav1.ObjectMeta); ok {
			return om, nil
		}
	}
	return nil, fmt.Errorf("%T has no ObjectMeta", obj)
}

// listParams are the parsed list and watch query parameters.
type listParams struct {
	opts metav1.ListOptions
	pred store.Predicate
	rv   int64
}

// parseListParams decodes and checks the query of a list, watch or
// deletecollection. Like kube-apiserver: a value that does not parse is
// 400 BadRequest; a combination the list options forbid (an unknown
// resourceVersionMatch, a match without a resourceVersion, Exact at "0",
// a match with continue, sendInitialEvents on a list, a watch match
// without sendInitialEvents) is 422 Invalid ListOptions; a negative limit
// means no limit.
func (h *resourceHandler) parseListParams(r *http.Request, info requestInfo) (listParams, error) {
	var p listParams
	if err := scheme.ParameterCodec.DecodeParameters(r.URL.Query(), metav1.SchemeGroupVersion, &p.opts); err != nil {
		return p, apierrors.NewBadRequest(err.Error())
	}
	if errs := validateListOptions(p.opts, info.Verb == "watch"); len(errs) > 0 {
		return p, apierrors.NewInvalid(listOptionsKind, "", errs)
	}
	if p.opts.Limit < 0 {
		p.opts.Limit = 0
	}
	p.pred.Namespace = info.Namespace
	var err error
	if p.pred.Label, err = labels.Parse(p.opts.LabelSelector); err != nil {
		return p, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
	}
	if p.pred.Field, err = fields.ParseSelector(p.opts.FieldSelector); err != nil {
		return p, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector: %v", err))
	}
	for _, req := range p.pred.Field.Requirements() {
		if !h.fieldNames.Has(req.Field) {
			return p, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
		}
	}
	if p.rv, err = store.ParseRV(p.opts.ResourceVersion); err != nil {
		return p, apierrors.NewBadRequest(err.Error())
	}
	return p, nil
}

// listOptionsKind names ListOptions in 422 answers.
var listOptionsKind = schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}

// validateListOptions checks the resourceVersion, resourceVersionMatch,
// continue and sendInitialEvents combination with apimachinery's own
// rules, so the answers read as kube-apiserver's. The WatchList feature
// (sendInitialEvents) is always on here.
func validateListOptions(opts metav1.ListOptions, watch bool) field.ErrorList {
	return listvalidation.ValidateListOptions(&metainternalversion.ListOptions{
		Watch:                watch,
		ResourceVersion:      opts.ResourceVersion,
		ResourceVersionMatch: opts.ResourceVersionMatch,
		Continue:             opts.Continue,
		SendInitialEvents:    opts.SendInitialEvents,
	}, true)
}

// continueToken is the opaque list continuation handed to clients.
type continueToken struct {
	APIVersion string `json:"v"`
	RV         int64  `json:"rv"`
	Start      string `json:"start"`
}

func (h *resourceHandler) encodeContinue(rv int64, nextKey string) string {
	rel := strings.TrimPrefix(nextKey, h.r.Prefix()+"/")
	data, _ := json.Marshal(continueToken{APIVersion: "meta.k8s.io/v1", RV: rv, Start: rel})
	return base64.RawURLEncoding.EncodeToString(data)
}

func (h *resourceHandler) decodeContinue(token string) (continueToken, error) {
	var t continueToken
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err == nil {
		err = json.Unmarshal(data, &t)
	}
	if err != nil || t.APIVersion != "meta.k8s.io/v1" || t.RV <= 0 || strings.Contains(t.Start, "..") {
		return t, apierrors.NewBadRequest("continue key is not valid")
	}
	t.Start = h.r.Prefix() + "/" + t.Start
	return t, nil
}

func (h *resourceHandler) list(w http.ResponseWriter, r *http.Request, info requestInfo) {
	gr := h.r.GroupResource()
	p, err := h.parseListParams(r, info)
	if err != nil {
		writeError(w, r, err, gr, "")
		return
	}
	if p.opts.Continue != "" && p.opts.ResourceVersion != "" && p.opts.ResourceVersion != "0" {
		writeStatus(w, r, statusOf(apierrors.NewBadRequest("specifying resource version is not allowed when using continue")))
		return
	}
	var page store.ListPage
	switch {
	case p.opts.Continue != "":
		tok, terr := h.decodeContinue(p.opts.Continue)
		if terr != nil {
			writeError(w, r, terr, gr, "")
			return
		}
		page, err = h.st.ListFromStorage(r.Context(), p.pred, tok.RV, tok.Start, p.opts.Limit)
		if errors.Is(err, storage.ErrCompacted) {
			err = apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
		}
		if store.IsBadContinue(err) {
			err = apierrors.NewBadRequest("continue key is not valid")
		}
	case p.opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact:
		page, err = h.st.ListFromStorage(r.Context(), p.pred, p.rv, "", p.opts.Limit)
	case p.opts.ResourceVersion == "":
		page, err = h.st.ListFromStorage(r.Context(), p.pred, 0, "", p.opts.Limit)
	default:
		// resourceVersion "0" or NotOlderThan N: served from the watch cache.
		page, err = h.st.ListFromCache(r.Context(), p.pred, p.rv)
	}
	if err != nil {
		writeError(w, r, err, gr, "")
		return
	}
	list, err := h.buildList(page)
	if err != nil {
		writeError(w, r, err, gr, "")
		return
	}
	h.writeObject(w, r, http.StatusOK, list)
}

// buildList assembles the typed list for a page.
func (h *resourceHandler) buildList(page store.ListPage) (runtime.Object, error) {
	list := h.r.NewList()
	items := make([]runtime.Object, 0, len(page.Items))
	for _, it := range page.Items {
		out, err := h.fromStorage(it)
		if err != nil {
			return nil, err
		}
		items = append(items, out)
	}
	if err := meta.SetList(list, items); err != nil {
		return nil, err
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, err
	}
	lm.SetResourceVersion(strconv.FormatInt(page.RV, 10))
	if page.NextKey != "" {
		lm.SetContinue(h.encodeContinue(page.RV, page.NextKey))
		if page.Remaining >= 0 {
			n := page.Remaining
			lm.SetRemainingItemCount(&n)
		}
	}
	list.GetObjectKind().SetGroupVersionKind(h.r.ListGVK())
	return list, nil
}

// invalidWatch reports an invalid combination of watch parameters as 422.
func invalidWatch(path, msg string) error {
	return apierrors.NewInvalid(metav1.SchemeGroupVersion.WithKind("ListOptions").GroupKind(), "", field.ErrorList{field.Forbidden(field.NewPath(path), msg)})
}
