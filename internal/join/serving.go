package join

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/pki"
)

// The agent's serving certificate: the one its log endpoint presents to
// the API server, issued by the cluster CA for CN=system:node:<name>,
// O=system:nodes with server authentication only (pki.SignNodeServingCert
// decides its SANs). The API server accepts an agent only with the serving
// certificate of the node it meant to reach (pki.VerifyNodeServingCert).
//
// POST servingPath with {csr}, authenticated by the node's client
// certificate like renew, returns {certificate, ca}. The agent asks right
// after joining, whenever it starts without a fitting one (agents that
// joined before serving certificates existed get theirs this way, without
// re-joining), and at 70–90% of its lifetime, next to the client
// certificate's renewal.

// servingPath is the serving certificate endpoint.
const servingPath = PathPrefix + "v1/serving"

// Files of the serving certificate, in <DataDir>/PKIDir, mode 0600.
const (
	ServingCertFile = "serving.crt"
	ServingKeyFile  = "serving.key"
	// pendingServingKeyFile holds a renewed key until its certificate is
	// in place: see savePair.
	pendingServingKeyFile = "serving.key.next"
)

// servingFiles hold the agent's serving certificate.
var servingFiles = keyFiles{cert: ServingCertFile, key: ServingKeyFile, pendingKey: pendingServingKeyFile}

// servingState is an Identity's serving certificate.
type servingState struct {
	mu    sync.Mutex // serialises requests for a new one
	hosts []string   // what the agent asks for; set by EnsureServing
	creds atomic.Pointer[credentials]
}

// servingCertificate issues the agent's serving certificate to a node that
// proves its identity with its client certificate. The SANs asked for in
// the CSR are only a request: pki.SignNodeServingCert decides.
func (s *Server) servingCertificate(w http.ResponseWriter, r *http.Request) {
	nodeName, csr, ok := s.nodeCSR(w, r, "serving certificate refused")
	if !ok {
		return
	}
	hosts := append([]string(nil), csr.DNSNames...)
	for _, ip := range csr.IPAddresses {
		hosts = append(hosts, ip.String())
	}
	certPEM, refused, err := s.cluster.SignNodeServingCert(csr.PublicKey, nodeName, hosts, s.certTTL)
	if errors.Is(err, pki.ErrUnsupportedKey) {
		writeStatus(w, badField("csr", err))
		return
	}
	if err != nil {
		writeStatus(w, &apierrors.NewInternalError(err).ErrStatus)
		return
	}
	cert, err := parseCertPEM(certPEM)
	if err != nil {
		writeStatus(w, &apierrors.NewInternalError(err).ErrStatus)
		return
	}
	s.log.Info("node serving certificate issued", "node", nodeName, "dnsNames", cert.DNSNames, "ips", cert.IPAddresses,
		"refusedNames", refused, "expires", cert.NotAfter)
	writeJSON(w, http.StatusOK, certificateResponse{Certificate: string(certPEM), CA: string(s.cluster.CAPEM())})
}

// EnsureServing makes sure the identity has a serving certificate for its
// agent's log endpoint: the one in the identity directory when it is this
// node's, chained to the pinned CA and has more than a fifth of its
// lifetime left, else a new one from the server, authenticated by the
// node's client certificate (no join token needed). hosts are the IP
// addresses and DNS names to ask for (the server decides; see
// pki.SignNodeServingCert). A valid one that is merely due is used and
// renewed by RunRenewal. Failures that may pass are retried with back-off
// while ctx lives.
//
// Call it before RunRenewal, which then renews the serving certificate
// too.
func (id *Identity) EnsureServing(ctx context.Context, hosts []string) error {
	c, st := id.c, &id.serving
	st.mu.Lock()
	st.hosts = append([]string(nil), hosts...)
	st.mu.Unlock()
	creds, reason, err := id.store.loadPair(servingFiles, id.caPEM)
	if err != nil {
		return err
	}
	if creds != nil {
		var f fitness
		f, reason = checkServing(creds, c.NodeName, id.pool, c.Clock.Now())
		if f != unfit {
			st.creds.Store(creds)
			c.Logger.Debug("using stored serving certificate", "node", c.NodeName, "expires", creds.cert.Leaf.NotAfter)
			return nil
		}
	}
	c.Logger.Info("requesting a serving certificate for the log endpoint", "node", c.NodeName, "reason", reason)
	return c.retry(ctx, "serving certificate", func() error { return id.RenewServing(ctx) })
}

// ServingCertificate returns the current serving certificate, for
// tls.Config.GetCertificate: a renewal takes effect at the next handshake.
func (id *Identity) ServingCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	creds := id.serving.creds.Load()
	if creds == nil {
		return nil, errors.New("no serving certificate yet")
	}
	return creds.cert, nil
}

// servingLeaf returns the current serving certificate, nil without one.
func (id *Identity) servingLeaf() *x509.Certificate {
	if creds := id.serving.creds.Load(); creds != nil {
		return creds.cert.Leaf
	}
	return nil
}

// RenewServing gets a new serving certificate now for a new key, stores it
// and makes it current. The client certificate must be valid.
func (id *Identity) RenewServing(ctx context.Context) error {
	c, st := id.c, &id.serving
	st.mu.Lock()
	defer st.mu.Unlock()
	key, err := newKey()
	if err != nil {
		return err
	}
	csr, err := newServingCSR(c.NodeName, st.hosts, key)
	if err != nil {
		return err
	}
	var resp certificateResponse
	if err := c.do(ctx, c.httpClient(identityTransport{id}), http.MethodPost, c.Server+servingPath, renewRequest{CSR: string(csr)}, &resp); err != nil {
		var se *apierrors.StatusError
		if errors.As(err, &se) && se.ErrStatus.Code == http.StatusNotFound {
			return fmt.Errorf("get serving certificate at %s: the server does not issue serving certificates (is it older than this agent?): %w", c.Server, err)
		}
		return fmt.Errorf("get serving certificate at %s: %w", c.Server, err)
	}
	certPEM := []byte(resp.Certificate)
	if err := id.checkServingIssued(certPEM, []byte(resp.CA), key.Public()); err != nil {
		return err
	}
	creds, err := newCredentials(id.caPEM, certPEM, key)
	if err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	if err := id.store.savePair(servingFiles, creds); err != nil {
		return err
	}
	st.creds.Store(creds)
	c.Logger.Info("serving certificate issued", "node", c.NodeName, "dnsNames", creds.cert.Leaf.DNSNames,
		"ips", creds.cert.Leaf.IPAddresses, "expires", creds.cert.Leaf.NotAfter)
	return nil
}

// checkServingIssued makes sure the server issued what was asked for: this node's
// serving certificate for our key, chained to the pinned CA.
func (id *Identity) checkServingIssued(certPEM, gotCA []byte, pub crypto.PublicKey) error {
	server := id.c.Server
	cert, err := parseCertPEM(certPEM)
	if err != nil {
		return fmt.Errorf("serving certificate from %s: %w", server, err)
	}
	if !bytes.Equal(bytes.TrimSpace(gotCA), bytes.TrimSpace(id.caPEM)) {
		return fmt.Errorf("serving certificate from %s: the server answered with another cluster CA than the pinned one", server)
	}
	if eq, ok := pub.(interface{ Equal(crypto.PublicKey) bool }); !ok || !eq.Equal(cert.PublicKey) {
		return fmt.Errorf("serving certificate from %s is not for our key", server)
	}
	if err := pki.VerifyNodeServingCert([]*x509.Certificate{cert}, id.pool, id.c.NodeName, id.c.Clock.Now()); err != nil {
		return fmt.Errorf("serving certificate from %s: %w", server, err)
	}
	return nil
}

// checkServing judges a stored serving certificate for nodeName at now.
func checkServing(creds *credentials, nodeName string, pool *x509.CertPool, now time.Time) (fitness, string) {
	leaf := creds.cert.Leaf
	if err := pki.VerifyNodeServingCert([]*x509.Certificate{leaf}, pool, nodeName, now); err != nil {
		return unfit, err.Error()
	}
	lifetime := leaf.NotAfter.Sub(leaf.NotBefore)
	if left := leaf.NotAfter.Sub(now); float64(left) < renewalLeft*float64(lifetime) {
		return expiring, "serving certificate expires at " + leaf.NotAfter.UTC().Format(time.RFC3339)
	}
	return fit, ""
}

// newServingCSR returns a PEM certificate signing request for key asking
// for hosts as SANs. The server decides subject and SANs.
func newServingCSR(nodeName string, hosts []string, key crypto.Signer) ([]byte, error) {
	tmpl := &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: NodeUser(nodeName), Organization: []string{authn.GroupNodes}},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, fmt.Errorf("create serving certificate request: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemCSR, Bytes: der}), nil
}
