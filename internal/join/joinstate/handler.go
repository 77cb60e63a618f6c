package joinstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/join"
)

// Path is where the server serves the token endpoint, behind
// authentication:
//
//	GET    Path        TokenList (never a secret)
//	POST   Path        CreateRequest → Token with its secret, 201
//	DELETE Path/<id>   Status Success, or 404
const Path = "/nodeplane/v1/jointokens"

// NodeTokenID names the server's node-token file in a TokenList. It is not
// stored here and cannot be deleted through the endpoint.
const NodeTokenID = "node-token"

// maxDescription bounds a token's description, in bytes.
const maxDescription = 256

// CreateRequest is the body of a POST.
type CreateRequest struct {
	// TTL is how long the token is accepted, as a Go duration ("24h",
	// "90m"); "0" means forever.
	TTL string `json:"ttl"`
	// Description is a note for `nodeplane token list`.
	Description string `json:"description,omitempty"`
}

// Token describes a join token.
type Token struct {
	ID string `json:"id"`
	// Token is the whole token, <id>.<secret>: only in the answer to the
	// POST that made it.
	Token       string     `json:"token,omitempty"`
	Expires     *time.Time `json:"expires,omitempty"`
	Expired     bool       `json:"expired"`
	Description string     `json:"description,omitempty"`
	Created     *time.Time `json:"created,omitempty"`
}

// TokenList answers a GET.
type TokenList struct {
	Items []Token `json:"items"`
}

// HandlerConfig configures the endpoint.
type HandlerConfig struct {
	// Store keeps the tokens. Required.
	Store *Store
	// Clock tells expired tokens. Nil means the real clock.
	Clock clock.PassiveClock
	// Logger records creations and deletions. Nil means slog.Default().
	Logger *slog.Logger
}

// Handler serves Path. Mount it behind the API server's authentication:
// only members of system:masters may use it (the endpoint mints the
// credentials that let a machine join the cluster).
type Handler struct {
	store *Store
	clock clock.PassiveClock
	log   *slog.Logger
}

// NewHandler returns the endpoint.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("join token endpoint: Store is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Handler{store: cfg.Store, clock: cfg.Clock, log: cfg.Logger}, nil
}

var tokensResource = schema.GroupResource{Group: "nodeplane.io", Resource: "jointokens"}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u, ok := authn.UserFrom(r.Context())
	if !ok || !u.InGroup(authn.GroupMasters) {
		name := ""
		if ok {
			name = u.Name
		}
		writeStatus(w, &apierrors.NewForbidden(tokensResource, "", fmt.Errorf("user %q is not an administrator (group %s)", name, authn.GroupMasters)).ErrStatus)
		return
	}
	id, hasID := strings.CutPrefix(r.URL.Path, Path+"/")
	switch {
	case r.URL.Path == Path && r.Method == http.MethodGet:
		h.list(w, r)
	case r.URL.Path == Path && r.Method == http.MethodPost:
		h.create(w, r, u)
	case hasID && id != "" && !strings.Contains(id, "/") && r.Method == http.MethodDelete:
		h.delete(w, r, u, id)
	case r.URL.Path == Path || (hasID && id != "" && !strings.Contains(id, "/")):
		writeStatus(w, &apierrors.NewMethodNotSupported(tokensResource, r.Method).ErrStatus)
	default:
		writeStatus(w, &apierrors.NewNotFound(tokensResource, id).ErrStatus)
	}
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	recs, err := h.store.Tokens(r.Context())
	if err != nil {
		writeStatus(w, &apierrors.NewServiceUnavailable(err.Error()).ErrStatus)
		return
	}
	now := h.clock.Now()
	out := TokenList{Items: []Token{{ID: NodeTokenID, Description: "the server's node-token file: never expires; rotate it by replacing the file and restarting the server"}}}
	for _, rec := range recs {
		out.Items = append(out.Items, describe(rec, now))
	}
	writeJSON(w, http.StatusOK, out)
}

func describe(rec join.TokenRecord, now time.Time) Token {
	created := rec.Created
	return Token{ID: rec.ID, Expires: rec.Expires, Expired: rec.Expired(now), Description: rec.Description, Created: &created}
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request, u *authn.User) {
	var req CreateRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeStatus(w, &apierrors.NewBadRequest("decode request body: "+err.Error()).ErrStatus)
		return
	}
	ttl, err := time.ParseDuration(req.TTL)
	if err != nil || ttl < 0 {
		detail := "want a duration such as 24h, or 0 for a token that never expires"
		writeStatus(w, invalid("ttl", req.TTL, detail))
		return
	}
	if len(req.Description) > maxDescription {
		writeStatus(w, invalid("description", req.Description[:32]+"…", fmt.Sprintf("must be at most %d bytes", maxDescription)))
		return
	}
	token, rec, err := h.store.CreateToken(r.Context(), ttl, req.Description)
	if err != nil {
		writeStatus(w, &apierrors.NewServiceUnavailable(err.Error()).ErrStatus)
		return
	}
	h.log.Info("join token created", "id", rec.ID, "expires", rec.Expires, "user", u.Name)
	out := describe(rec, h.clock.Now())
	out.Token = token
	writeJSON(w, http.StatusCreated, out)
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request, u *authn.User, id string) {
	if id == NodeTokenID {
		writeStatus(w, &apierrors.NewBadRequest("the node-token is the server's file <data-dir>/node-token, not a stored token: to rotate it, replace the file (or remove it to have a new one generated) and restart the server").ErrStatus)
		return
	}
	if !join.ValidTokenID(id) {
		writeStatus(w, invalid("id", id, fmt.Sprintf("a join token id is %d characters from [a-z0-9]", join.TokenIDLen)))
		return
	}
	err := h.store.DeleteToken(r.Context(), id)
	if errors.Is(err, join.ErrTokenNotFound) {
		writeStatus(w, &apierrors.NewNotFound(tokensResource, id).ErrStatus)
		return
	}
	if err != nil {
		writeStatus(w, &apierrors.NewServiceUnavailable(err.Error()).ErrStatus)
		return
	}
	h.log.Info("join token deleted", "id", id, "user", u.Name)
	writeJSON(w, http.StatusOK, metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Code:     http.StatusOK,
		Details:  &metav1.StatusDetails{Name: id, Group: tokensResource.Group, Kind: tokensResource.Resource},
	})
}

// invalid is a 422 naming field.
func invalid(name, value, detail string) *metav1.Status {
	st := apierrors.NewInvalid(schema.GroupKind{Group: tokensResource.Group, Kind: "JoinToken"}, "",
		field.ErrorList{field.Invalid(field.NewPath(name), value, detail)}).ErrStatus
	return &st
}

func writeStatus(w http.ResponseWriter, st *metav1.Status) {
	st.Kind, st.APIVersion = "Status", "v1"
	writeJSON(w, int(st.Code), st)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		st := apierrors.NewInternalError(err).ErrStatus
		st.Kind, st.APIVersion = "Status", "v1"
		data, _ = json.Marshal(st)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(data, '\n'))
}
