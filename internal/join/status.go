package join

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// joinRequestKind names what a 422 is about.
const joinRequestKind = "JoinRequest"

// Messages clients see.
const (
	msgTokenRejected = "join token rejected"
	msgNeedNodeCert  = "a node client certificate is required"
)

// tokenRejected is the 401 for a wrong or missing join secret. It never
// contains the secret.
func tokenRejected() *metav1.Status {
	return statusFor(http.StatusUnauthorized, metav1.StatusReasonUnauthorized, msgTokenRejected, nil)
}

// invalidField is a 422 naming field.
func invalidField(name, field, value, detail string) *metav1.Status {
	return statusFor(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
		fmt.Sprintf("%s %q is invalid: %s: Invalid value: %q: %s", joinRequestKind, name, field, value, detail),
		&metav1.StatusDetails{
			Name: name,
			Kind: joinRequestKind,
			Causes: []metav1.StatusCause{{
				Type:    metav1.CauseTypeFieldValueInvalid,
				Field:   field,
				Message: fmt.Sprintf("Invalid value: %q: %s", value, detail),
			}},
		})
}

// badField is a 400 naming field.
func badField(field string, err error) *metav1.Status {
	msg := fmt.Sprintf("%s: %v", field, err)
	return statusFor(http.StatusBadRequest, metav1.StatusReasonBadRequest, msg,
		&metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: field, Message: err.Error()}}})
}

func statusFor(code int, reason metav1.StatusReason, msg string, details *metav1.StatusDetails) *metav1.Status {
	return &metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    int32(code),
		Reason:  reason,
		Message: msg,
		Details: details,
	}
}

// writeStatus writes st as JSON with its code.
func writeStatus(w http.ResponseWriter, st *metav1.Status) {
	st.Kind, st.APIVersion = "Status", "v1"
	writeJSON(w, int(st.Code), st)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		st := apierrors.NewInternalError(err).ErrStatus
		st.Kind, st.APIVersion = "Status", "v1"
		code = http.StatusInternalServerError
		data, _ = json.Marshal(st)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(data, '\n'))
}

// decodeBody reads a JSON body of at most maxBodyBytes into v.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) *metav1.Status {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err := dec.Decode(v); err != nil {
		if maxErr := (*http.MaxBytesError)(nil); errors.As(err, &maxErr) {
			st := apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d bytes", maxBodyBytes)).ErrStatus
			return &st
		}
		return statusFor(http.StatusBadRequest, metav1.StatusReasonBadRequest, "decode request body: "+err.Error(), nil)
	}
	return nil
}
