package join

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// Ensure returns the node identity kept in cfg.DataDir/pki, joining the
// cluster first when there is none that fits:
//
//   - A stored certificate for cfg.NodeName, chained to the stored CA (or
//     to cfg.CAPEM when given) and with more than a fifth of its lifetime
//     left, is used as is; the server is not contacted.
//   - Otherwise, with a join token, the agent joins: it makes a P-256 key
//     (which never leaves it; a valid certificate that is due for renewal
//     is re-joined with its own key, which the server's takeover check
//     admits while the node is live), verifies the cluster CA (see the package
//     documentation), sends a CSR and stores ca.crt, node.crt and node.key
//     (mode 0600, directory 0700, each written atomically). A certificate
//     for another node name, another cluster, or an expired one, is
//     replaced this way: the operator changed --node-name or --server and
//     holds the token for it.
//   - Without a token, a valid certificate that is merely due for renewal
//     is used (RunRenewal renews it at once); anything else is an error.
//
// A refused join (wrong token: errors.Is(err, ErrTokenRejected); a bad
// node name) returns at once and stores nothing. Failures that may pass
// (server unreachable or starting) are retried with back-off while ctx
// lives.
func Ensure(ctx context.Context, cfg ClientConfig) (*Identity, error) {
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	if c.NodeName == "" {
		return nil, errors.New("join: node name is required")
	}
	if c.DataDir == "" {
		return nil, errors.New("join: data directory is required")
	}
	var pinned *x509.CertPool
	if len(c.CAPEM) > 0 {
		ca, err := parseCA(c.CAPEM)
		if err != nil {
			return nil, fmt.Errorf("join: given cluster CA: %w", err)
		}
		pinned = x509.NewCertPool()
		pinned.AddCert(ca)
	}
	st := store{dir: filepath.Join(c.DataDir, PKIDir)}
	creds, reason, err := st.load()
	if err != nil {
		return nil, err
	}
	// reuse is the key of a valid certificate that is due for renewal:
	// joining with it again keeps the node's identity.
	var reuse crypto.Signer
	if creds != nil {
		var f fitness
		f, reason = check(creds, c.NodeName, pinned, c.Clock.Now())
		if f == expiring {
			reuse, _ = creds.cert.PrivateKey.(crypto.Signer)
		}
		switch {
		case f == fit:
			c.Logger.Debug("using stored node identity", "node", c.NodeName, "expires", creds.cert.Leaf.NotAfter)
			return newIdentity(c, st, creds)
		case f == expiring && c.Token == "":
			c.Logger.Warn("node certificate is due for renewal and no join token is given; using it until it is renewed", "node", c.NodeName, "reason", reason)
			return newIdentity(c, st, creds)
		}
	}
	if c.Token == "" {
		return nil, fmt.Errorf("join: no usable node identity in %s (%s) and no join token to get one", st.dir, reason)
	}
	c.Logger.Info("joining cluster", "server", c.Server, "node", c.NodeName, "reason", reason)
	err = c.retry(ctx, "join", func() error {
		var err error
		creds, err = c.join(ctx, reuse)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := st.save(creds); err != nil {
		return nil, err
	}
	c.Logger.Info("joined cluster", "server", c.Server, "node", c.NodeName, "expires", creds.cert.Leaf.NotAfter)
	return newIdentity(c, st, creds)
}

// Identity is a node's credentials: the pinned cluster CA and the current
// client certificate, which RunRenewal replaces before it expires. Safe for
// concurrent use.
type Identity struct {
	c     *client
	store store
	caPEM []byte
	pool  *x509.CertPool

	renewMu sync.Mutex // serialises renewals
	creds   atomic.Pointer[credentials]
	// serving is the agent's serving certificate (see EnsureServing).
	serving servingState
	// transport carries requests for RESTConfig's clients. A renewal
	// replaces it, so that no request after the renewal can pick a pooled
	// connection authenticated with the old certificate.
	transport atomic.Pointer[http.Transport]
}

// idleConnTimeout closes the connections of a replaced transport once
// their last request (say, a long watch) has ended.
const idleConnTimeout = 90 * time.Second

func newIdentity(c *client, st store, creds *credentials) (*Identity, error) {
	ca, err := parseCA(creds.caPEM)
	if err != nil {
		return nil, fmt.Errorf("join: cluster CA: %w", err)
	}
	id := &Identity{c: c, store: st, caPEM: creds.caPEM, pool: x509.NewCertPool()}
	id.pool.AddCert(ca)
	id.creds.Store(creds)
	id.transport.Store(id.newTransport())
	return id, nil
}

// newTransport returns a transport with an empty connection pool that
// trusts the pinned CA and presents the current certificate.
func (id *Identity) newTransport() *http.Transport {
	tlsCfg := id.c.pinnedTLS(id.pool)
	tlsCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return id.creds.Load().cert, nil
	}
	t := id.c.transport(tlsCfg)
	if t.IdleConnTimeout <= 0 || t.IdleConnTimeout > idleConnTimeout {
		t.IdleConnTimeout = idleConnTimeout
	}
	return t
}

// NodeName returns the node this identity is for.
func (id *Identity) NodeName() string { return id.c.NodeName }

// CAPEM returns the pinned cluster CA certificate.
func (id *Identity) CAPEM() []byte { return slices.Clone(id.caPEM) }

// Certificate returns the current client certificate.
func (id *Identity) Certificate() *x509.Certificate { return id.creds.Load().cert.Leaf }

// Credentials returns the CA, the current client certificate and its key
// in PEM form (for example to write a kubeconfig with pki.WriteKubeconfig;
// such a copy does not follow renewals).
func (id *Identity) Credentials() (caPEM, certPEM, keyPEM []byte) {
	c := id.creds.Load()
	return slices.Clone(c.caPEM), slices.Clone(c.certPEM), slices.Clone(c.keyPEM)
}

// RESTConfig returns a client-go configuration for the server that trusts
// only the pinned CA and presents the identity's current certificate, read
// at each TLS handshake. After a renewal every new request goes over a new
// connection with the new certificate, without rebuilding any client;
// requests in flight (watches) finish on their old connection, which is
// then closed. All configurations share the identity's transport. Set QPS,
// Burst, UserAgent and the like on the copy; leave TLSClientConfig empty
// (client-go refuses TLS options next to a custom Transport).
func (id *Identity) RESTConfig() *rest.Config {
	return &rest.Config{Host: id.c.Server, Transport: identityTransport{id}}
}

// identityTransport sends each request with the identity's current
// transport.
type identityTransport struct{ id *Identity }

func (t identityTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return t.id.transport.Load().RoundTrip(r)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// current transport.
func (t identityTransport) CloseIdleConnections() { t.id.transport.Load().CloseIdleConnections() }

// replace stores creds, makes them current and retires the transport whose
// connections authenticated with the previous certificate: its idle
// connections close now, busy ones when their request ends.
func (id *Identity) replace(creds *credentials) error {
	if err := id.store.save(creds); err != nil {
		return err
	}
	id.creds.Store(creds)
	old := id.transport.Swap(id.newTransport())
	old.CloseIdleConnections()
	return nil
}
