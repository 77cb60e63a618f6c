package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodeplane/nodeplane/internal/apiserver/scheme"
	"github.com/nodeplane/nodeplane/internal/apiserver/store"
	"github.com/nodeplane/nodeplane/internal/storage"
)

// statusGVK: Status is an unversioned kind; kube-apiserver always sends it
// as apiVersion v1, whatever the group of the request.
var statusGVK = metav1.Unversioned.WithKind("Status")

// toStatus turns any error into the metav1.Status the client receives.
// gr and name give context to storage errors.
func toStatus(err error, gr schema.GroupResource, name string) *metav1.Status {
	var apiStatus apierrors.APIStatus
	if errors.As(err, &apiStatus) {
		st := apiStatus.Status()
		return &st
	}
	var tooLarge errBodyTooLarge
	switch {
	case errors.As(err, &tooLarge):
		st := apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", maxBodyBytes)).ErrStatus
		return &st
	case errors.Is(err, storage.ErrNotFound):
		return statusOf(apierrors.NewNotFound(gr, name))
	case errors.Is(err, storage.ErrAlreadyExists):
		return statusOf(apierrors.NewAlreadyExists(gr, name))
	case errors.Is(err, storage.ErrConflict):
		return statusOf(apierrors.NewConflict(gr, name, errors.New(conflictMessage)))
	case errors.Is(err, storage.ErrCompacted), errors.Is(err, store.ErrExpired):
		return statusOf(apierrors.NewResourceExpired(err.Error()))
	case errors.Is(err, store.ErrTooLargeRV):
		st := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %v", err), 1).ErrStatus
		st.Details.Causes = append(st.Details.Causes, metav1.StatusCause{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"})
		return &st
	case errors.Is(err, storage.ErrTooManyRequests):
		return statusOf(apierrors.NewTooManyRequests("storage is overloaded, please try again later", 1))
	case errors.Is(err, store.ErrNotReady):
		return statusOf(apierrors.NewServiceUnavailable("the watch cache is loading; retry shortly"))
	case errors.Is(err, storage.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return statusOf(apierrors.NewTimeoutError(fmt.Sprintf("storage did not answer in time: %v", err), 1))
	case errors.Is(err, storage.ErrFutureRevision):
		return statusOf(apierrors.NewTimeoutError("Too large resource version", 1))
	case errors.Is(err, context.Canceled):
		return statusOf(apierrors.NewTimeoutError("request canceled", 1))
	}
	return statusOf(apierrors.NewInternalError(err))
}

const conflictMessage = "the object has been modified; please apply your changes to the latest version and try again"

func statusOf(err *apierrors.StatusError) *metav1.Status {
	st := err.ErrStatus
	return &st
}

// writeStatus writes a Status (as JSON unless the client prefers protobuf).
func writeStatus(w http.ResponseWriter, r *http.Request, st *metav1.Status) {
	st.APIVersion, st.Kind = statusGVK.GroupVersion().String(), statusGVK.Kind
	if st.Status == "" {
		st.Status = metav1.StatusFailure
	}
	code := int(st.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout || code == http.StatusInternalServerError {
		if st.Details != nil && st.Details.RetryAfterSeconds > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(st.Details.RetryAfterSeconds)))
		}
	}
	f, ok := negotiate(r, false)
	if !ok {
		f = responseFormat{info: serializerFor(mediaJSON)}
	}
	writeRaw(w, code, f.info, st)
}

// writeError writes err as a Status.
func writeError(w http.ResponseWriter, r *http.Request, err error, gr schema.GroupResource, name string) {
	writeStatus(w, r, toStatus(err, gr, name))
}

// writeRaw encodes obj with the serializer and writes it with code. The
// body is encoded into a pooled buffer, which Write copies.
func writeRaw(w http.ResponseWriter, code int, info runtime.SerializerInfo, obj runtime.Object) {
	err := scheme.EncodeTemporary(info.Serializer, obj, func(data []byte) {
		w.Header().Set("Content-Type", info.MediaType)
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(code)
		_, _ = w.Write(data)
	})
	if err != nil {
		http.Error(w, fmt.Sprintf("encode response: %v", err), http.StatusInternalServerError)
	}
}

// successStatus is the Status some verbs return on success (binding, eviction).
func successStatus(code int) *metav1.Status {
	return &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusSuccess, Code: int32(code)}
}

// notAcceptable is the 406 Status for an Accept header nothing satisfies.
func notAcceptable(msg string) *metav1.Status {
	return &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotAcceptable, Reason: metav1.StatusReasonNotAcceptable, Message: msg}
}
