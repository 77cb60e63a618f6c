package pki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"path/filepath"
	"time"
)

// caCommonName is the subject of the cluster CA.
const caCommonName = "nodeplane-ca"

// loadOrCreateCA returns the cluster CA kept in dir, creating it on first
// start. It never replaces an existing CA key: every certificate in the
// cluster chains to it, so a missing, unreadable or corrupt ca.key next to
// an existing ca.crt (or vice versa) is an error for the operator to fix.
//
// The one repair it makes is for a crash during the very first start:
// ca.key is written before ca.crt, so ca.key without ca.crt means the
// certificate was never written, and it is re-created from the same key
// (same subject, same subject key identifier), which keeps any certificate
// signed by that key valid.
//
// reason says why a CA certificate was written, "" if the CA was loaded.
func loadOrCreateCA(dir string, now time.Time) (ca *keyPair, reason string, err error) {
	certPath := filepath.Join(dir, CACertFile)
	keyPath := filepath.Join(dir, CAKeyFile)

	keyPEM, haveKey, err := readFileIfExists(keyPath)
	if err != nil {
		return nil, "", fmt.Errorf("cluster CA key: %w (refusing to create a new CA: that would invalidate every issued certificate)", err)
	}
	certPEM, haveCert, err := readFileIfExists(certPath)
	if err != nil {
		return nil, "", fmt.Errorf("cluster CA certificate: %w", err)
	}

	switch {
	case !haveKey && !haveCert:
		if ca, err = createCA(certPath, keyPath, now); err != nil {
			return nil, "", err
		}
		return ca, "absent", nil
	case !haveKey:
		return nil, "", fmt.Errorf("cluster CA certificate %s exists but its key %s does not; restore the key (or remove both to create a new CA, which invalidates every issued certificate)", certPath, keyPath)
	case !haveCert:
		key, err := parseKey(keyPEM)
		if err != nil {
			return nil, "", fmt.Errorf("cluster CA key %s is corrupt: %w (refusing to create a new CA: that would invalidate every issued certificate)", keyPath, err)
		}
		ca, err = sign(caTemplate(now), nil, key, nil)
		if err != nil {
			return nil, "", fmt.Errorf("re-create cluster CA certificate from %s: %w", keyPath, err)
		}
		ca.keyPEM = keyPEM
		if err := writeFileAtomic(certPath, ca.certPEM, certMode); err != nil {
			return nil, "", fmt.Errorf("write cluster CA certificate: %w", err)
		}
		return ca, "absent, re-created from the existing " + CAKeyFile, nil
	}

	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, "", fmt.Errorf("cluster CA key %s is corrupt: %w (refusing to create a new CA: that would invalidate every issued certificate)", keyPath, err)
	}
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, "", fmt.Errorf("cluster CA certificate %s is corrupt: %w", certPath, err)
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, "", fmt.Errorf("cluster CA key %s does not match certificate %s", keyPath, certPath)
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, "", fmt.Errorf("cluster CA certificate %s is not a CA certificate", certPath)
	}
	if now.After(cert.NotAfter) {
		return nil, "", fmt.Errorf("cluster CA certificate %s expired at %s; it must be rotated by hand", certPath, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if err := restrictKeyMode(keyPath); err != nil {
		return nil, "", err
	}
	return &keyPair{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, "", nil
}

func createCA(certPath, keyPath string, now time.Time) (*keyPair, error) {
	ca, err := sign(caTemplate(now), nil, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("create cluster CA: %w", err)
	}
	// Key first: see loadOrCreateCA for how a crash between the two writes
	// is recovered.
	if err := createFileAtomic(keyPath, ca.keyPEM, keyMode); err != nil {
		return nil, fmt.Errorf("write cluster CA key: %w", err)
	}
	if err := writeFileAtomic(certPath, ca.certPEM, certMode); err != nil {
		return nil, fmt.Errorf("write cluster CA certificate: %w", err)
	}
	return ca, nil
}

func caTemplate(now time.Time) *x509.Certificate {
	return &x509.Certificate{
		Subject:               pkix.Name{CommonName: caCommonName},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
}
