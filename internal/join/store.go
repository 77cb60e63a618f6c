package join

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/nodeplane/nodeplane/internal/pki"
)

// Files of the agent's identity, in <DataDir>/PKIDir. All have mode 0600,
// the directory 0700.
const (
	PKIDir       = "pki"
	CACertFile   = "ca.crt"
	NodeCertFile = "node.crt"
	NodeKeyFile  = "node.key"
	// pendingKeyFile holds a renewed key until its certificate is in
	// place: see save.
	pendingKeyFile = "node.key.next"
)

// fileMode is the mode of every identity file.
const fileMode fs.FileMode = 0o600

// renewalLeft: a stored certificate with less than this fraction of its
// lifetime left is replaced by a new join when a token is at hand.
const renewalLeft = 0.2

// credentials are a node's CA, certificate and key.
type credentials struct {
	caPEM, certPEM, keyPEM []byte
	cert                   *tls.Certificate // Leaf set
}

// newCredentials pairs a certificate with the key it was issued for.
func newCredentials(caPEM, certPEM []byte, key crypto.Signer) (*credentials, error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode node key: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return parseCredentials(caPEM, certPEM, keyPEM)
}

func parseCredentials(caPEM, certPEM, keyPEM []byte) (*credentials, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &credentials{caPEM: caPEM, certPEM: certPEM, keyPEM: keyPEM, cert: &pair}, nil
}

// store is the identity directory.
type store struct{ dir string }

func (s store) path(name string) string { return filepath.Join(s.dir, name) }

// load reads the stored identity. A missing or unparsable one is
// reported in reason with nil credentials; only a failure to read (for
// example permissions) is an error.
func (s store) load() (creds *credentials, reason string, err error) {
	caPEM, err := os.ReadFile(s.path(CACertFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "absent", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("node identity: %w", err)
	}
	return s.loadPair(nodeFiles, caPEM)
}

// save writes creds so that a crash at any point leaves a usable identity
// (the old one or the new one): the CA first, then the key pair (see
// savePair). Each file is replaced atomically.
func (s store) save(creds *credentials) error {
	if err := pki.EnsurePrivateDir(s.dir); err != nil {
		return fmt.Errorf("store node identity: %w", err)
	}
	if old, err := os.ReadFile(s.path(CACertFile)); err != nil || !bytes.Equal(old, creds.caPEM) {
		if err := pki.WriteFileAtomic(s.path(CACertFile), creds.caPEM, fileMode); err != nil {
			return fmt.Errorf("store node identity: %w", err)
		}
	}
	return s.savePair(nodeFiles, creds)
}

// keyFiles names a stored certificate, its key, and the key's name while a
// renewal is writing it.
type keyFiles struct{ cert, key, pendingKey string }

// nodeFiles hold the node's client certificate.
var nodeFiles = keyFiles{cert: NodeCertFile, key: NodeKeyFile, pendingKey: pendingKeyFile}

// loadPair reads the certificate and key of f, pairing them with caPEM. A
// missing or unparsable pair is reported in reason with nil credentials;
// only a failure to read is an error.
func (s store) loadPair(f keyFiles, caPEM []byte) (creds *credentials, reason string, err error) {
	var data [2][]byte
	for i, name := range []string{f.cert, f.key} {
		b, err := os.ReadFile(s.path(name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "absent", nil
		}
		if err != nil {
			return nil, "", fmt.Errorf("node identity: %w", err)
		}
		data[i] = b
	}
	certPEM, keyPEM := data[0], data[1]
	creds, err = parseCredentials(caPEM, certPEM, keyPEM)
	if err != nil {
		// A renewal may have stopped between writing the certificate and
		// moving its key into place: finish it.
		if pending, perr := os.ReadFile(s.path(f.pendingKey)); perr == nil {
			if c, cerr := parseCredentials(caPEM, certPEM, pending); cerr == nil {
				if err := os.Rename(s.path(f.pendingKey), s.path(f.key)); err != nil {
					return nil, "", fmt.Errorf("node identity: finish interrupted renewal: %w", err)
				}
				return c, "", nil
			}
		}
		return nil, "unusable: " + err.Error(), nil
	}
	return creds, "", nil
}

// savePair writes the certificate and key of creds as f so that a crash at
// any point leaves a usable pair (the old one or the new one): the key
// under a temporary name, the certificate, and finally the key under its
// name (loadPair completes the last step if it was missed). Each file is
// replaced atomically.
func (s store) savePair(f keyFiles, creds *credentials) error {
	if err := pki.EnsurePrivateDir(s.dir); err != nil {
		return fmt.Errorf("store node identity: %w", err)
	}
	if err := pki.WriteFileAtomic(s.path(f.pendingKey), creds.keyPEM, fileMode); err != nil {
		return fmt.Errorf("store node identity: %w", err)
	}
	if err := pki.WriteFileAtomic(s.path(f.cert), creds.certPEM, fileMode); err != nil {
		return fmt.Errorf("store node identity: %w", err)
	}
	if err := os.Rename(s.path(f.pendingKey), s.path(f.key)); err != nil {
		return fmt.Errorf("store node identity: %w", err)
	}
	return nil
}

// fitness says whether stored credentials can serve nodeName at now.
type fitness int

const (
	// fit: valid with more than renewalLeft of the lifetime left.
	fit fitness = iota
	// expiring: valid, but renewal is due.
	expiring
	// unfit: another node's, another cluster's, or not valid now.
	unfit
)

// check judges creds for nodeName at now, trusting pool (the given CA), or
// the stored CA when pool is nil. reason explains anything but fit.
func check(creds *credentials, nodeName string, pool *x509.CertPool, now time.Time) (fitness, string) {
	leaf := creds.cert.Leaf
	if pool == nil {
		ca, err := parseCA(creds.caPEM)
		if err != nil {
			return unfit, "stored CA: " + err.Error()
		}
		pool = x509.NewCertPool()
		pool.AddCert(ca)
	}
	if got := nodeNameOf(leaf.Subject.CommonName, leaf.Subject.Organization); got != nodeName {
		return unfit, fmt.Sprintf("certificate is for %q, not node %q", leaf.Subject.String(), nodeName)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return unfit, "certificate: " + err.Error()
	}
	lifetime := leaf.NotAfter.Sub(leaf.NotBefore)
	if left := leaf.NotAfter.Sub(now); float64(left) < renewalLeft*float64(lifetime) {
		return expiring, "certificate expires at " + leaf.NotAfter.UTC().Format(time.RFC3339)
	}
	return fit, ""
}
