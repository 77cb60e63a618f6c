package pki

import (
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/utils/clock"
)

// Issuer signs client certificates with an existing cluster CA. Unlike
// EnsureCluster it only reads ca.crt and ca.key and writes nothing, so a
// tool may use it next to a running server (`nodeplane kubeconfig`).
type Issuer struct {
	ca    *keyPair
	clock clock.PassiveClock
}

// LoadIssuer reads the cluster CA from dir (the server's PKI directory).
// A missing or corrupt CA is an error; it never creates one.
func LoadIssuer(dir string, clk clock.PassiveClock) (*Issuer, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	certPEM, okCert, err := readFileIfExists(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, fmt.Errorf("cluster CA certificate: %w", err)
	}
	keyPEM, okKey, err := readFileIfExists(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("cluster CA key: %w", err)
	}
	if !okCert || !okKey {
		return nil, fmt.Errorf("no cluster CA in %s (want %s and %s; is this a server's data directory?)", dir, CACertFile, CAKeyFile)
	}
	ca, err := parseKeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("cluster CA in %s: %w", dir, err)
	}
	return &Issuer{ca: ca, clock: clk}, nil
}

// CAPEM returns the CA certificate in PEM form.
func (i *Issuer) CAPEM() []byte { return append([]byte(nil), i.ca.certPEM...) }

// IssueClientCert issues a client certificate with a new key for user cn
// in groups orgs, valid for ttl (never past the CA's expiry). It returns
// the certificate, its key and its expiry.
func (i *Issuer) IssueClientCert(cn string, orgs []string, ttl time.Duration) (certPEM, keyPEM []byte, notAfter time.Time, err error) {
	c := &Cluster{ca: i.ca, clock: i.clock}
	template, err := c.clientTemplate(cn, orgs, ttl)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	kp, err := sign(template, i.ca.cert, nil, i.ca.key)
	if err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("issue client certificate: %w", err)
	}
	return kp.certPEM, kp.keyPEM, template.NotAfter, nil
}
