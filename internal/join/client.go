package join

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	randv2 "math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
)

// ErrTokenRejected: the join token is not the server's. The server said so
// (401), or the cluster info it sent does not verify with the token, in
// which case the token was never sent.
var ErrTokenRejected = errors.New("join token rejected")

// Retry timing of requests that failed for a reason that may pass (the
// server is unreachable, overloaded or starting).
const (
	// retryInitial is the first wait; it doubles after each failure.
	retryInitial = time.Second
	// retryMax caps the wait.
	retryMax = 5 * time.Minute
	// requestTimeout bounds one request unless HTTPClient.Timeout is set.
	requestTimeout = 30 * time.Second
)

// ClientConfig is what an agent (or the simulator) needs to join.
type ClientConfig struct {
	// Server is the API server's URL, https://host:port. Required.
	Server string
	// Token is the join secret. Needed to join; Ensure may do without it
	// when DataDir already holds a usable identity, and renewal uses it
	// only to re-join after the certificate has expired.
	Token string
	// CAPEM, when set, is a cluster CA the caller already trusts (for
	// example `nodeplane up`, which runs the server in the same process).
	// It is pinned and the cluster-info step is skipped.
	CAPEM []byte
	// DataDir is the agent's data directory; the identity lives in
	// DataDir/pki (ca.crt, node.crt, node.key). Required by Ensure.
	DataDir string
	// NodeName is the node to join as. Required by Ensure and
	// RequestToken; TokenClient takes it per call.
	NodeName string
	// Clock decides certificate validity, renewal time and retry waits.
	// Nil means the real clock.
	Clock clock.Clock
	// Rand jitters the renewal time. Nil means a randomly seeded source.
	// Used by RunRenewal's goroutine only.
	Rand *randv2.Rand
	// HTTPClient, when set, is the base for the HTTP clients used here:
	// its Timeout bounds each request and its Transport, which must then be
	// an *http.Transport, is cloned (proxy, dialer, limits) with the TLS
	// settings replaced. Nil means http.DefaultTransport and a 30 s
	// timeout.
	HTTPClient *http.Client
	// Logger records joins, renewals and retries. Nil means slog.Default().
	Logger *slog.Logger
}

// client carries a defaulted ClientConfig and does the requests.
type client struct {
	ClientConfig
	base    *http.Transport
	timeout time.Duration
}

// newClient validates cfg's server and HTTP client and fills in defaults.
// The callers check the fields they need.
func newClient(cfg ClientConfig) (*client, error) {
	u, err := url.Parse(cfg.Server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("join: server %q is not an https:// URL", cfg.Server)
	}
	cfg.Server = strings.TrimSuffix(cfg.Server, "/")
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Rand == nil {
		cfg.Rand = randv2.New(randv2.NewPCG(randv2.Uint64(), randv2.Uint64()))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &client{ClientConfig: cfg, timeout: requestTimeout}
	if hc := cfg.HTTPClient; hc != nil {
		if hc.Timeout > 0 {
			c.timeout = hc.Timeout
		}
		if hc.Transport != nil {
			t, ok := hc.Transport.(*http.Transport)
			if !ok {
				return nil, fmt.Errorf("join: HTTPClient.Transport is a %T, want an *http.Transport", hc.Transport)
			}
			c.base = t
		}
	}
	if c.base == nil {
		c.base = http.DefaultTransport.(*http.Transport)
	}
	return c, nil
}

// transport returns a clone of the base transport with tlsCfg, which no
// dialer of the base may bypass.
func (c *client) transport(tlsCfg *tls.Config) *http.Transport {
	t := c.base.Clone()
	t.TLSClientConfig = tlsCfg
	t.DialTLSContext = nil
	t.DialTLS = nil //nolint:staticcheck // cleared so that it cannot bypass tlsCfg
	t.ForceAttemptHTTP2 = true
	return t
}

// pinnedTLS trusts only the CAs of pool, judging validity by the clock.
func (c *client) pinnedTLS(pool *x509.CertPool) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, Time: c.Clock.Now}
}

// httpClient wraps t with the request timeout.
func (c *client) httpClient(t http.RoundTripper) *http.Client {
	return &http.Client{Transport: t, Timeout: c.timeout}
}

// verifiedCA returns the cluster CA: the given one, or the one cluster-info
// sends once its MAC verifies with the join secret.
func (c *client) verifiedCA(ctx context.Context) ([]byte, *x509.CertPool, error) {
	caPEM := c.CAPEM
	if len(caPEM) == 0 {
		var err error
		if caPEM, err = c.fetchClusterInfo(ctx); err != nil {
			return nil, nil, err
		}
	}
	ca, err := parseCA(caPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("join %s: cluster CA: %w", c.Server, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return caPEM, pool, nil
}

// fetchClusterInfo gets the CA over an unverified connection and verifies
// it with the join secret, which it does not send. The connection is not
// kept: nothing else may travel over it.
func (c *client) fetchClusterInfo(ctx context.Context) ([]byte, error) {
	t := c.transport(&tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true}) //nolint:gosec // the answer is verified by its MAC
	t.DisableKeepAlives = true
	defer t.CloseIdleConnections()
	var info clusterInfo
	u := c.Server + clusterInfoPath + "?" + clusterInfoQuery(c.NodeName, c.Token).Encode()
	if err := c.do(ctx, c.httpClient(t), http.MethodGet, u, nil, &info); err != nil {
		if se := (*apierrors.StatusError)(nil); errors.As(err, &se) && se.ErrStatus.Code == http.StatusUnauthorized {
			return nil, c.refusal(err)
		}
		return nil, fmt.Errorf("join %s: get cluster info: %w", c.Server, err)
	}
	if !hmac.Equal(info.CAMAC, clusterInfoMAC(c.Token, []byte(info.CA))) {
		return nil, fmt.Errorf("join %s: %w: the cluster CA it sent does not verify with this token (a wrong token, or not the server the token belongs to); the token was not sent", c.Server, ErrTokenRejected)
	}
	return []byte(info.CA), nil
}

// requestCertificate joins: it sends the join secret and a CSR for key to
// the server trusted through pool and returns the verified certificate.
func (c *client) requestCertificate(ctx context.Context, caPEM []byte, pool *x509.CertPool, key crypto.Signer) ([]byte, error) {
	csr, err := newCSR(c.NodeName, key)
	if err != nil {
		return nil, err
	}
	t := c.transport(c.pinnedTLS(pool))
	defer t.CloseIdleConnections()
	var resp certificateResponse
	req := certificateRequest{Token: c.Token, NodeName: c.NodeName, CSR: string(csr)}
	if err := c.do(ctx, c.httpClient(t), http.MethodPost, c.Server+certificatePath, req, &resp); err != nil {
		return nil, c.refusal(err)
	}
	certPEM := []byte(resp.Certificate)
	if err := c.checkIssued(certPEM, []byte(resp.CA), caPEM, pool, key.Public()); err != nil {
		return nil, err
	}
	return certPEM, nil
}

// checkIssued makes sure the server issued what was asked for: a client
// certificate for our key and node name, chained to the pinned CA.
func (c *client) checkIssued(certPEM, gotCA, caPEM []byte, pool *x509.CertPool, pub crypto.PublicKey) error {
	cert, err := parseCertPEM(certPEM)
	if err != nil {
		return fmt.Errorf("join %s: issued certificate: %w", c.Server, err)
	}
	if !bytes.Equal(bytes.TrimSpace(gotCA), bytes.TrimSpace(caPEM)) {
		return fmt.Errorf("join %s: the server answered with another cluster CA than the verified one", c.Server)
	}
	if eq, ok := pub.(interface{ Equal(crypto.PublicKey) bool }); !ok || !eq.Equal(cert.PublicKey) {
		return fmt.Errorf("join %s: issued certificate is not for our key", c.Server)
	}
	if cert.Subject.CommonName != NodeUser(c.NodeName) {
		return fmt.Errorf("join %s: issued certificate is for %q, want %q", c.Server, cert.Subject.CommonName, NodeUser(c.NodeName))
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: c.Clock.Now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return fmt.Errorf("join %s: issued certificate: %w", c.Server, err)
	}
	return nil
}

// refusal words a failed joining request: a refusal by the server names the
// server and, for a wrong secret, matches ErrTokenRejected.
func (c *client) refusal(err error) error {
	var se *apierrors.StatusError
	if !errors.As(err, &se) || isTransient(err) {
		return fmt.Errorf("join %s: %w", c.Server, err)
	}
	if se.ErrStatus.Code == http.StatusUnauthorized {
		if isTokenExpiredStatus(se.ErrStatus) {
			return fmt.Errorf("join refused by %s: %w (%w)", c.Server, ErrTokenExpired, ErrTokenRejected)
		}
		if se.ErrStatus.Message != msgTokenRejected {
			return fmt.Errorf("join refused by %s: %w: %s", c.Server, ErrTokenRejected, se.ErrStatus.Message)
		}
		return fmt.Errorf("join refused by %s: %w", c.Server, ErrTokenRejected)
	}
	return fmt.Errorf("join refused by %s: %w", c.Server, err)
}

// join gets a new identity with the join secret, for key when given (the
// key of the node's current certificate: the server's takeover check lets
// a node re-join with its own key while it is live), else for a new key.
func (c *client) join(ctx context.Context, key crypto.Signer) (*credentials, error) {
	if c.Token == "" {
		return nil, errors.New("join: no join token")
	}
	caPEM, pool, err := c.verifiedCA(ctx)
	if err != nil {
		return nil, err
	}
	if key != nil {
		return c.joinWithKey(ctx, caPEM, pool, key)
	}
	return c.joinWithCA(ctx, caPEM, pool)
}

// joinWithCA is join with the CA already verified.
func (c *client) joinWithCA(ctx context.Context, caPEM []byte, pool *x509.CertPool) (*credentials, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	return c.joinWithKey(ctx, caPEM, pool, key)
}

// joinWithKey is joinWithCA for a given key.
func (c *client) joinWithKey(ctx context.Context, caPEM []byte, pool *x509.CertPool, key crypto.Signer) (*credentials, error) {
	certPEM, err := c.requestCertificate(ctx, caPEM, pool, key)
	if err != nil {
		return nil, err
	}
	return newCredentials(caPEM, certPEM, key)
}

// transientError marks a failure worth retrying.
type transientError struct{ err error }

func (e transientError) Error() string { return e.err.Error() }
func (e transientError) Unwrap() error { return e.err }

func isTransient(err error) bool {
	var t transientError
	return errors.As(err, &t)
}

// retry runs f until it succeeds, fails for good, or ctx ends, waiting
// with exponential back-off between transient failures.
func (c *client) retry(ctx context.Context, what string, f func() error) error {
	wait := retryInitial
	for {
		err := f()
		if err == nil || !isTransient(err) {
			return err
		}
		c.Logger.Warn("join server not reachable; retrying", "what", what, "server", c.Server, "retryIn", wait, "err", err)
		if werr := sleep(ctx, c.Clock, wait); werr != nil {
			return fmt.Errorf("%s: %w (last error: %w)", what, werr, err)
		}
		wait = min(2*wait, retryMax)
	}
}

// sleep waits d on clk, or returns ctx's error.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) error {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// do sends body (JSON, unless nil) and decodes a 2xx answer into out. A
// non-2xx answer is an *apierrors.StatusError; network failures, 429 and
// 5xx are transient, TLS verification failures are not.
func (c *client) do(ctx context.Context, hc *http.Client, method, u string, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		if isVerificationError(err) || ctx.Err() != nil {
			return err
		}
		return transientError{err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes+1))
	if err != nil {
		return transientError{fmt.Errorf("read response: %w", err)}
	}
	if len(data) > maxBodyBytes {
		return fmt.Errorf("response larger than %d bytes", maxBodyBytes)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		serr := &apierrors.StatusError{ErrStatus: statusFromResponse(resp.StatusCode, data)}
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			return transientError{serr}
		}
		return serr
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	return nil
}

// statusFromResponse returns the Status of an error answer, or one made up
// from the code when the body is not a Status.
func statusFromResponse(code int, body []byte) metav1.Status {
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err == nil && st.Kind == "Status" && st.Message != "" {
		return st
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		msg = http.StatusText(code)
	}
	reason := metav1.StatusReasonUnknown
	switch code {
	case http.StatusBadRequest:
		reason = metav1.StatusReasonBadRequest
	case http.StatusUnauthorized:
		reason = metav1.StatusReasonUnauthorized
	case http.StatusForbidden:
		reason = metav1.StatusReasonForbidden
	case http.StatusNotFound:
		reason = metav1.StatusReasonNotFound
	case http.StatusTooManyRequests:
		reason = metav1.StatusReasonTooManyRequests
	case http.StatusServiceUnavailable:
		reason = metav1.StatusReasonServiceUnavailable
	}
	return metav1.Status{Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg}
}

// isVerificationError tells a server we must not trust from one we could
// not reach.
func isVerificationError(err error) bool {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	return errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid) || errors.As(err, &verify)
}

// newKey makes the node's private key. It never leaves the agent.
func newKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate node key: %w", err)
	}
	return key, nil
}

// newCSR returns a PEM certificate signing request for key. The subject is
// informative only: the server decides it.
func newCSR(nodeName string, key crypto.Signer) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: NodeUser(nodeName), Organization: []string{authn.GroupNodes}},
	}, key)
	if err != nil {
		return nil, fmt.Errorf("create certificate request: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemCSR, Bytes: der}), nil
}

// parseCA parses a PEM CA certificate and checks that it is one.
func parseCA(caPEM []byte) (*x509.Certificate, error) {
	ca, err := parseCertPEM(caPEM)
	if err != nil {
		return nil, err
	}
	if !ca.IsCA {
		return nil, errors.New("not a CA certificate")
	}
	return ca, nil
}
