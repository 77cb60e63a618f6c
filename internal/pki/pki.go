// Package pki owns nodeplane's cluster public-key infrastructure: the
// cluster CA, the API server's serving certificate, the admin client
// certificate, client certificates for agents (issued with a new key, or
// signed for a requester's public key), kubeconfig files that embed them,
// bearer-token files and the key node bearer tokens are signed with. All of
// it lives as files in the server's data directory. It also lends agents
// its crash-safe file writer for their own credentials.
//
// It uses only the standard library's crypto. It does not authenticate
// requests (that is apiserver/authn, which trusts what the TLS layer
// configured here has verified) and it never touches the API or storage.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Files EnsureCluster keeps in Config.Dir. Keys have mode 0600,
// certificates 0644, the directory 0700.
const (
	CACertFile      = "ca.crt"
	CAKeyFile       = "ca.key"
	ServingCertFile = "serving.crt"
	ServingKeyFile  = "serving.key"
	AdminCertFile   = "admin.crt"
	AdminKeyFile    = "admin.key"
)

// Config says where the cluster PKI lives and what the serving certificate
// must cover.
type Config struct {
	// Dir is the data directory holding the PEM files. Required. Created
	// with mode 0700 (an existing one loses group and other permissions).
	Dir string
	// Hosts are extra DNS names or IP addresses (--tls-san) the serving
	// certificate must carry besides the built-in ones (localhost,
	// 127.0.0.1, ::1, the hostname, every non-loopback, non-link-local
	// interface address, kubernetes, kubernetes.default,
	// kubernetes.default.svc).
	Hosts []string
	// Clock decides validity periods and when certificates need renewal.
	// Nil means the real clock.
	Clock clock.PassiveClock
}

// Cluster is the loaded cluster PKI. Its methods are safe for concurrent use.
type Cluster struct {
	dir   string
	hosts []string
	clock clock.PassiveClock
	ca    *keyPair
	pool  *x509.CertPool

	serving atomic.Pointer[tls.Certificate]

	mu     sync.Mutex // serialises Refresh; guards the fields below
	admin  *keyPair
	issued []Issued
}

// Issued records a certificate that EnsureCluster or Refresh created or
// replaced, for the caller to log.
type Issued struct {
	// File is the certificate's file name in Config.Dir, e.g. "serving.crt".
	File string
	// Reason says why, e.g. "absent", "missing SANs 10.0.0.5",
	// "expires at 2027-01-01T00:00:00Z".
	Reason string
}

// EnsureCluster loads the cluster PKI from cfg.Dir, creating what is missing
// and re-issuing the serving certificate (a requested SAN is missing, or it
// expires within 30 days) and the admin certificate (it expires within 30
// days) as needed. Run it on every server start.
//
// It never replaces the CA: an unreadable or corrupt ca.key, or a ca.crt
// without its key, is an error.
func EnsureCluster(cfg Config) (*Cluster, error) {
	if cfg.Dir == "" {
		return nil, errors.New("pki: Config.Dir is required")
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	// Validate the hosts before touching the disk.
	if _, err := servingSANs(cfg.Hosts); err != nil {
		return nil, err
	}
	if err := EnsurePrivateDir(cfg.Dir); err != nil {
		return nil, err
	}
	ca, caReason, err := loadOrCreateCA(cfg.Dir, clk.Now())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	c := &Cluster{
		dir:   cfg.Dir,
		hosts: slices.Clone(cfg.Hosts),
		clock: clk,
		ca:    ca,
		pool:  pool,
	}
	if err := c.Refresh(); err != nil {
		return nil, err
	}
	if caReason != "" {
		c.issued = append([]Issued{{File: CACertFile, Reason: caReason}}, c.issued...)
	}
	return c, nil
}

// Refresh re-reads the serving and admin certificates from the data
// directory, re-issues any that no longer fit (same rules as EnsureCluster,
// with the host's current hostname and addresses) and makes the serving one
// live for new TLS handshakes. A long-running server calls it periodically
// (daily is plenty) so that certificates renew without a restart. An
// operator may also replace serving.crt/serving.key with a pair signed by
// the cluster CA and call Refresh; a pair from any other CA is replaced.
func (c *Cluster) Refresh() error {
	want, err := servingSANs(c.hosts)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	var issued []Issued

	serving, reason, err := servingLeaf(want).ensure(c.dir, c.ca, now)
	if err != nil {
		return err
	}
	if reason != "" {
		issued = append(issued, Issued{File: ServingCertFile, Reason: reason})
	}
	admin, reason, err := adminLeaf().ensure(c.dir, c.ca, now)
	if err != nil {
		return err
	}
	if reason != "" {
		issued = append(issued, Issued{File: AdminCertFile, Reason: reason})
	}

	c.serving.Store(&tls.Certificate{
		Certificate: [][]byte{serving.cert.Raw},
		PrivateKey:  serving.key,
		Leaf:        serving.cert,
	})
	c.admin = admin
	c.issued = issued
	return nil
}

// Issued lists what the most recent EnsureCluster or Refresh created or
// replaced; empty when everything on disk was kept.
func (c *Cluster) Issued() []Issued {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.issued)
}

// CertPool returns a pool holding only the cluster CA, for verifying client
// certificates or the server from a client.
func (c *Cluster) CertPool() *x509.CertPool { return c.pool.Clone() }

// CAPEM returns the cluster CA certificate in PEM form.
func (c *Cluster) CAPEM() []byte { return slices.Clone(c.ca.certPEM) }

// AdminCredentials returns the admin client certificate (CN nodeplane-admin,
// O system:masters) and its key in PEM form, for writing the admin
// kubeconfig.
func (c *Cluster) AdminCredentials() (certPEM, keyPEM []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.admin.certPEM), slices.Clone(c.admin.keyPEM)
}

// ServingTLSConfig returns a TLS configuration for the API server: TLS 1.2
// or later, the current serving certificate (replaced by Refresh without a
// restart), and client certificates verified against the cluster CA when a
// client presents one (VerifyClientCertIfGiven, so bearer-token clients
// still connect). Use it with http.Server.ServeTLS(l, "", ""); leave
// Certificates empty, or crypto/tls would serve it instead of the reloadable
// one to clients that send no SNI (connections by IP address).
func (c *Cluster) ServingTLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientAuth: tls.VerifyClientCertIfGiven,
		ClientCAs:  c.pool,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.serving.Load(), nil
		},
	}
}

// IssueClientCert issues a client certificate signed by the cluster CA with
// subject CN=cn, O=orgs (the user name and groups the API server's
// authenticator will see), valid for ttl but never past the CA's own
// expiry, and returns it with a new P-256 key in PEM form. Agents get
// CN=system:node:<name>, O=system:nodes.
func (c *Cluster) IssueClientCert(cn string, orgs []string, ttl time.Duration) (certPEM, keyPEM []byte, err error) {
	template, err := c.clientTemplate(cn, orgs, ttl)
	if err != nil {
		return nil, nil, err
	}
	kp, err := sign(template, c.ca.cert, nil, c.ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("issue client certificate: %w", err)
	}
	return kp.certPEM, kp.keyPEM, nil
}

// SignClientCert is IssueClientCert for a key the requester keeps: it
// issues a client certificate for pub (from a certificate signing request;
// the private key never reaches the server) with subject CN=cn, O=orgs,
// valid for ttl but never past the CA's own expiry, and returns it in PEM
// form. pub must be an ECDSA key on P-256, P-384 or P-521, an Ed25519 key or
// an RSA key of at least 2048 bits; any other is an error matching
// ErrUnsupportedKey.
func (c *Cluster) SignClientCert(pub crypto.PublicKey, cn string, orgs []string, ttl time.Duration) (certPEM []byte, err error) {
	if err := checkPublicKey(pub); err != nil {
		return nil, fmt.Errorf("sign client certificate %q: %w", cn, err)
	}
	template, err := c.clientTemplate(cn, orgs, ttl)
	if err != nil {
		return nil, err
	}
	_, certPEM, err = signPublicKey(template, c.ca.cert, pub, c.ca.key)
	if err != nil {
		return nil, fmt.Errorf("sign client certificate: %w", err)
	}
	return certPEM, nil
}

// clientTemplate checks the arguments of IssueClientCert and SignClientCert
// and returns the certificate to sign now.
func (c *Cluster) clientTemplate(cn string, orgs []string, ttl time.Duration) (*x509.Certificate, error) {
	if cn == "" {
		return nil, errors.New("issue client certificate: empty common name")
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("issue client certificate %q: ttl %s is not positive", cn, ttl)
	}
	now := c.clock.Now()
	notAfter := now.Add(ttl)
	if notAfter.After(c.ca.cert.NotAfter) {
		notAfter = c.ca.cert.NotAfter
	}
	return clientTemplate(cn, orgs, now, notAfter), nil
}

// ErrUnsupportedKey: SignClientCert refuses the public key's type or size.
var ErrUnsupportedKey = errors.New("unsupported public key")

// minRSABits is the smallest RSA key SignClientCert accepts.
const minRSABits = 2048

// checkPublicKey accepts the key types and sizes SignClientCert signs.
func checkPublicKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
			return nil
		}
		return fmt.Errorf("%w: ECDSA curve %s", ErrUnsupportedKey, k.Curve.Params().Name)
	case ed25519.PublicKey:
		return nil
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return fmt.Errorf("%w: RSA key of %d bits (want at least %d)", ErrUnsupportedKey, k.N.BitLen(), minRSABits)
		}
		return nil
	default:
		return fmt.Errorf("%w: type %T", ErrUnsupportedKey, pub)
	}
}
