package authn

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"weak"

	"k8s.io/utils/clock"
)

// ClientCert authenticates a request by its TLS client certificate: the
// subject's CN is the user name and its O entries are the groups, as in
// Kubernetes. It trusts only certificates the TLS layer verified (it reads
// VerifiedChains, so a server that merely requested a certificate without
// verifying it authenticates nobody this way).
//
// The TLS layer verifies the chain, including its validity period, once
// per connection, at the handshake. An HTTP/2 connection lives for days,
// so every request checks again that each certificate of the verified
// chain is valid at Clock's now, as kube-apiserver does. There is no
// revocation list (neither kube-apiserver nor nodeplane reads CRLs or
// OCSP): a certificate stays usable until it expires or the cluster CA
// changes; removing a node's RBAC or Node object is how access is taken
// away before then.
//
// The zero value builds a new User on every request. NewClientCert also
// keeps the User of each verified leaf certificate for as long as the
// certificate is in memory (that is, as long as a connection that
// presented it is open), so a connection's requests share one User. A
// shared User must not be modified.
type ClientCert struct {
	// Clock is the time validity is checked against; nil is the real
	// clock.
	Clock clock.PassiveClock

	users *certUsers
}

// NewClientCert returns a ClientCert that keeps the User of each
// certificate in memory (see ClientCert); clk may be nil for the real
// clock.
func NewClientCert(clk clock.PassiveClock) ClientCert {
	return ClientCert{Clock: clk, users: &certUsers{}}
}

// Authenticate implements Authenticator.
func (c ClientCert) Authenticate(r *http.Request) (*User, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, false, nil
	}
	if len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil, false, errors.New("client certificate was not verified by the TLS layer")
	}
	chain := r.TLS.VerifiedChains[0]
	if err := c.checkValidity(chain); err != nil {
		return nil, false, err
	}
	cert := chain[0]
	if cert.Subject.CommonName == "" {
		return nil, false, errors.New("client certificate has an empty common name")
	}
	if c.users != nil {
		return c.users.user(cert), true, nil
	}
	return certUser(cert), true, nil
}

// checkValidity refuses a chain with a certificate that is not valid now.
func (c ClientCert) checkValidity(chain []*x509.Certificate) error {
	var clk clock.PassiveClock = clock.RealClock{}
	if c.Clock != nil {
		clk = c.Clock
	}
	now := clk.Now()
	for _, cert := range chain {
		if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
			return fmt.Errorf("client certificate %q is not valid at %s (valid from %s to %s)",
				cert.Subject.CommonName, now.UTC().Format("2006-01-02T15:04:05Z"),
				cert.NotBefore.UTC().Format("2006-01-02T15:04:05Z"), cert.NotAfter.UTC().Format("2006-01-02T15:04:05Z"))
		}
	}
	return nil
}

func certUser(cert *x509.Certificate) *User {
	return &User{Name: cert.Subject.CommonName, Groups: withAuthenticatedGroup(cert.Subject.Organization)}
}

// certUsers maps a certificate in memory to its User. An entry goes when
// the garbage collector frees its certificate, so the map holds only
// certificates of open connections (and of requests still running).
type certUsers struct {
	m sync.Map // weak.Pointer[x509.Certificate] → *User
}

func (c *certUsers) user(cert *x509.Certificate) *User {
	key := weak.Make(cert)
	if u, ok := c.m.Load(key); ok {
		return u.(*User)
	}
	u, loaded := c.m.LoadOrStore(key, certUser(cert))
	if !loaded {
		runtime.AddCleanup(cert, func(key weak.Pointer[x509.Certificate]) { c.m.Delete(key) }, key)
	}
	return u.(*User)
}

// size is the number of certificates with a User kept.
func (c *certUsers) size() int {
	n := 0
	c.m.Range(func(_, _ any) bool { n++; return true })
	return n
}
