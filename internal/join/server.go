package join

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/pki"
)

// Defaults of ServerConfig.
const (
	// DefaultCertTTL is the lifetime of a node client certificate. Agents
	// renew at 70–90% of it.
	DefaultCertTTL = 365 * 24 * time.Hour
	// DefaultNodeTokenTTL is the lifetime of a node bearer token. Its
	// holder asks for a new one before it expires (see TokenExpiry).
	DefaultNodeTokenTTL = 24 * time.Hour
)

// pemCSR is the PEM block type of a certificate signing request.
const pemCSR = "CERTIFICATE REQUEST"

// ServerConfig configures the join handlers.
type ServerConfig struct {
	// Cluster signs node certificates and holds the node token signing
	// key. Required.
	Cluster *pki.Cluster
	// Token is the join secret (the server's node-token file). Required.
	// It never expires.
	Token string
	// Tokens, when set, holds the other join tokens (<id>.<secret>, see
	// TokenStore): they are accepted until they expire or are deleted.
	Tokens TokenStore
	// Identities and Nodes, when both set, turn on the takeover check: a
	// join for a node that has a live identity with another key is refused
	// (see decideTakeover). Identities records each issued certificate;
	// Nodes reads Nodes and Leases through the API.
	Identities IdentityStore
	Nodes      NodeReader
	// CertTTL is the lifetime of an issued node certificate (capped at the
	// CA's expiry). Zero means DefaultCertTTL.
	CertTTL time.Duration
	// NodeTokenTTL is the lifetime of an issued node bearer token. Zero
	// means DefaultNodeTokenTTL.
	NodeTokenTTL time.Duration
	// Clock decides token expiry and checks renewing certificates. It
	// should be the Cluster's clock. Nil means the real clock.
	Clock clock.PassiveClock
	// Logger records joins and refusals. Nil means slog.Default().
	Logger *slog.Logger
}

// Server serves the join endpoints under PathPrefix (see the package
// documentation). Mount it on the API server's mux outside
// authentication; it authenticates each request itself.
type Server struct {
	cluster   *pki.Cluster
	roots     *x509.CertPool
	secretSum [sha256.Size]byte
	secret    string
	certTTL   time.Duration
	nodeTTL   time.Duration
	clock     clock.PassiveClock
	log       *slog.Logger
	tokens    *NodeTokens
	mux       *http.ServeMux

	tokenStore TokenStore
	identities IdentityStore
	nodes      NodeReader
}

// NewServer validates cfg and returns the handler. It creates the node token
// signing key in the cluster's directory on first use.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Cluster == nil {
		return nil, errors.New("join server: Cluster is required")
	}
	if cfg.Token == "" {
		return nil, errors.New("join server: Token (the join secret) is required")
	}
	if (cfg.Identities == nil) != (cfg.Nodes == nil) {
		return nil, errors.New("join server: Identities and Nodes go together")
	}
	if cfg.CertTTL < 0 || cfg.NodeTokenTTL < 0 {
		return nil, fmt.Errorf("join server: negative lifetime (CertTTL %s, NodeTokenTTL %s)", cfg.CertTTL, cfg.NodeTokenTTL)
	}
	if cfg.CertTTL == 0 {
		cfg.CertTTL = DefaultCertTTL
	}
	if cfg.NodeTokenTTL == 0 {
		cfg.NodeTokenTTL = DefaultNodeTokenTTL
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	key, err := cfg.Cluster.NodeTokenSigningKey()
	if err != nil {
		return nil, fmt.Errorf("join server: %w", err)
	}
	tokens, err := NewNodeTokens(key, cfg.Clock)
	if err != nil {
		return nil, fmt.Errorf("join server: %w", err)
	}
	s := &Server{
		cluster:   cfg.Cluster,
		roots:     cfg.Cluster.CertPool(),
		secretSum: sha256.Sum256([]byte(cfg.Token)),
		secret:    cfg.Token,
		certTTL:   cfg.CertTTL,
		nodeTTL:   cfg.NodeTokenTTL,
		clock:     cfg.Clock,
		log:       cfg.Logger,
		tokens:    tokens,
		mux:       http.NewServeMux(),

		tokenStore: cfg.Tokens,
		identities: cfg.Identities,
		nodes:      cfg.Nodes,
	}
	s.mux.HandleFunc(clusterInfoPath, s.method(http.MethodGet, s.clusterInfo))
	s.mux.HandleFunc(certificatePath, s.method(http.MethodPost, s.certificate))
	s.mux.HandleFunc(renewPath, s.method(http.MethodPost, s.renew))
	s.mux.HandleFunc(tokenPath, s.method(http.MethodPost, s.token))
	s.mux.HandleFunc(servingPath, s.method(http.MethodPost, s.servingCertificate))
	s.mux.HandleFunc(PathPrefix, func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, statusFor(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource", nil))
	})
	return s, nil
}

// NodeTokens returns the authenticator for the node bearer tokens this
// server issues. Add it to the API server's authn.Union.
func (s *Server) NodeTokens() *NodeTokens { return s.tokens }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) method(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method {
			w.Header().Set("Allow", method)
			st := apierrors.NewMethodNotSupported(joinResource, r.Method).ErrStatus
			writeStatus(w, &st)
			return
		}
		h(w, r)
	}
}

// joinResource names what a method-not-allowed Status is about.
var joinResource = schema.GroupResource{Group: "nodeplane.io", Resource: "join"}

// clusterInfo serves the CA with its MAC for the token named by the
// tokenID parameter (the node-token when there is none). Anyone may ask:
// the CA is public, and the MAC reveals nothing usable about a random
// secret.
func (s *Server) clusterInfo(w http.ResponseWriter, r *http.Request) {
	caPEM := s.cluster.CAPEM()
	q := r.URL.Query()
	s.log.Debug("cluster info requested", "node", q.Get("nodeName"), "tokenID", q.Get("tokenID"), "remote", r.RemoteAddr)
	mac, st := s.clusterInfoMACFor(r.Context(), q.Get("tokenID"), caPEM)
	if st != nil {
		writeStatus(w, st)
		return
	}
	writeJSON(w, http.StatusOK, clusterInfo{CA: string(caPEM), CAMAC: mac})
}

// certificate exchanges the join secret and a CSR for a node certificate.
func (s *Server) certificate(w http.ResponseWriter, r *http.Request) {
	var req certificateRequest
	if st := decodeBody(w, r, &req); st != nil {
		writeStatus(w, st)
		return
	}
	if st := s.checkJoin(r, req.Token, req.NodeName); st != nil {
		writeStatus(w, st)
		return
	}
	csr, err := parseCSR(req.CSR)
	if err != nil {
		writeStatus(w, badField("csr", err))
		return
	}
	version, st := s.admitCertificate(r.Context(), req.NodeName, csr.PublicKey)
	if st != nil {
		s.log.Info("join refused", "node", req.NodeName, "remote", r.RemoteAddr, "reason", st.Message)
		writeStatus(w, st)
		return
	}
	resp, notAfter, st := s.sign(req.NodeName, csr)
	if st != nil {
		writeStatus(w, st)
		return
	}
	if st := s.recordIdentity(r.Context(), req.NodeName, csr.PublicKey, notAfter, version); st != nil {
		writeStatus(w, st)
		return
	}
	s.log.Info("node joined", "node", req.NodeName, "expires", notAfter, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, resp)
}

// nodeCSR reads the CSR of a request made by a node with its client
// certificate. When it returns !ok it has answered the request (and logged
// a refused identity with refusal).
func (s *Server) nodeCSR(w http.ResponseWriter, r *http.Request, refusal string) (nodeName string, csr *x509.CertificateRequest, ok bool) {
	nodeName, st := s.nodeFromClientCert(r)
	if st != nil {
		s.log.Info(refusal, "remote", r.RemoteAddr, "reason", st.Message)
		writeStatus(w, st)
		return "", nil, false
	}
	var req renewRequest
	if st := decodeBody(w, r, &req); st != nil {
		writeStatus(w, st)
		return "", nil, false
	}
	csr, err := parseCSR(req.CSR)
	if err != nil {
		writeStatus(w, badField("csr", err))
		return "", nil, false
	}
	return nodeName, csr, true
}

// renew issues a fresh certificate to a node that proves its identity
// with its current certificate.
func (s *Server) renew(w http.ResponseWriter, r *http.Request) {
	nodeName, csr, ok := s.nodeCSR(w, r, "certificate renewal refused")
	if !ok {
		return
	}
	version, st := s.renewVersion(r.Context(), nodeName)
	if st != nil {
		writeStatus(w, st)
		return
	}
	resp, notAfter, st := s.sign(nodeName, csr)
	if st != nil {
		writeStatus(w, st)
		return
	}
	if st := s.recordIdentity(r.Context(), nodeName, csr.PublicKey, notAfter, version); st != nil {
		writeStatus(w, st)
		return
	}
	s.log.Info("node certificate renewed", "node", nodeName, "expires", notAfter)
	writeJSON(w, http.StatusOK, resp)
}

// token exchanges the join secret for a node bearer token.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	var req tokenRequest
	if st := decodeBody(w, r, &req); st != nil {
		writeStatus(w, st)
		return
	}
	if st := s.checkJoin(r, req.Token, req.NodeName); st != nil {
		writeStatus(w, st)
		return
	}
	if st := s.admitNodeToken(r.Context(), req.NodeName); st != nil {
		s.log.Info("node token refused", "node", req.NodeName, "remote", r.RemoteAddr, "reason", st.Message)
		writeStatus(w, st)
		return
	}
	expires := s.clock.Now().Add(s.nodeTTL)
	token, err := s.tokens.issue(req.NodeName, expires)
	if err != nil {
		writeStatus(w, &apierrors.NewInternalError(err).ErrStatus)
		return
	}
	// Debug, not info: a simulation asks for thousands at once.
	s.log.Debug("node token issued", "node", req.NodeName, "expires", expires)
	writeJSON(w, http.StatusOK, tokenResponse{Token: token, CA: string(s.cluster.CAPEM())})
}

// checkJoin checks the join token (see checkSecret), then the node name.
func (s *Server) checkJoin(r *http.Request, secret, nodeName string) *metav1.Status {
	if st, reason := s.checkSecret(r.Context(), secret); st != nil {
		s.log.Info("join refused", "node", nodeName, "remote", r.RemoteAddr, "reason", reason)
		return st
	}
	if msgs := validation.IsDNS1123Subdomain(nodeName); len(msgs) > 0 {
		s.log.Info("join refused", "node", nodeName, "remote", r.RemoteAddr, "reason", "invalid node name")
		return invalidField(nodeName, "nodeName", nodeName, strings.Join(msgs, "; "))
	}
	return nil
}

// nodeFromClientCert returns the node name of the request's client
// certificate, verified again here against the cluster CA at our clock's
// time, whatever the TLS configuration in front of us did.
func (s *Server) nodeFromClientCert(r *http.Request) (string, *metav1.Status) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 || len(r.TLS.VerifiedChains) == 0 {
		return "", statusFor(http.StatusUnauthorized, metav1.StatusReasonUnauthorized, msgNeedNodeCert, nil)
	}
	leaf := r.TLS.PeerCertificates[0]
	intermediates := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:         s.roots,
		Intermediates: intermediates,
		CurrentTime:   s.clock.Now(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return "", statusFor(http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "client certificate is not valid: "+err.Error(), nil)
	}
	user := leaf.Subject.CommonName
	nodeName := nodeNameOf(user, leaf.Subject.Organization)
	if nodeName == "" || len(validation.IsDNS1123Subdomain(nodeName)) > 0 {
		return "", statusFor(http.StatusForbidden, metav1.StatusReasonForbidden,
			fmt.Sprintf("user %q is not a node: only a node (%s<name> in group %s) may renew its certificate", user, NodeUserPrefix, authn.GroupNodes), nil)
	}
	return nodeName, nil
}

// sign issues the node certificate for csr's public key.
func (s *Server) sign(nodeName string, csr *x509.CertificateRequest) (certificateResponse, time.Time, *metav1.Status) {
	certPEM, err := s.cluster.SignClientCert(csr.PublicKey, NodeUser(nodeName), []string{authn.GroupNodes}, s.certTTL)
	if errors.Is(err, pki.ErrUnsupportedKey) {
		return certificateResponse{}, time.Time{}, badField("csr", err)
	}
	if err != nil {
		return certificateResponse{}, time.Time{}, &apierrors.NewInternalError(err).ErrStatus
	}
	cert, err := parseCertPEM(certPEM)
	if err != nil {
		return certificateResponse{}, time.Time{}, &apierrors.NewInternalError(err).ErrStatus
	}
	return certificateResponse{Certificate: string(certPEM), CA: string(s.cluster.CAPEM())}, cert.NotAfter, nil
}

// parseCSR decodes a PEM certificate signing request and checks that it
// is signed by the key it carries (proof that the requester holds it).
func parseCSR(csrPEM string) (*x509.CertificateRequest, error) {
	if csrPEM == "" {
		return nil, errors.New("required")
	}
	block, _ := pem.Decode([]byte(csrPEM))
	if block == nil || block.Type != pemCSR {
		return nil, fmt.Errorf("want a PEM %q block", pemCSR)
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request signature: %w", err)
	}
	return csr, nil
}

// parseCertPEM decodes the first PEM certificate of data.
func parseCertPEM(data []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("no PEM certificate found")
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}
