package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// Lifetimes of what EnsureCluster issues.
const (
	// caValidity is the lifetime of the cluster CA. Nothing re-issues it.
	caValidity = 10 * 365 * 24 * time.Hour
	// leafValidity is the lifetime of the serving and admin certificates.
	leafValidity = 365 * 24 * time.Hour
	// renewBefore: a serving or admin certificate that expires within this
	// window is re-issued. Must be well below leafValidity.
	renewBefore = 30 * 24 * time.Hour
	// backdate is subtracted from "now" for NotBefore so that a peer whose
	// clock is slightly behind ours still accepts a fresh certificate.
	backdate = time.Hour
)

// PEM block types.
const (
	pemCertificate = "CERTIFICATE"
	pemECKey       = "EC PRIVATE KEY"
	pemPKCS8Key    = "PRIVATE KEY"
	pemPKCS1Key    = "RSA PRIVATE KEY"
)

// keyPair is a parsed certificate with its private key and PEM forms.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

func newKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate P-256 key: %w", err)
	}
	return key, nil
}

func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return serial.Add(serial, big.NewInt(1)), nil // never zero
}

// sign creates a certificate from template for a fresh P-256 key, signed by
// parent/parentKey, or self-signed when parent is nil (then key must be
// given). A nil key means "generate one".
func sign(template, parent *x509.Certificate, key, parentKey crypto.Signer) (*keyPair, error) {
	if key == nil {
		k, err := newKey()
		if err != nil {
			return nil, err
		}
		key = k
	}
	if parent == nil {
		parent, parentKey = template, key
	}
	cert, certPEM, err := signPublicKey(template, parent, key.Public(), parentKey)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// signPublicKey creates a certificate from template for pub, signed by
// parent/parentKey, and returns it parsed and in PEM form. It sets the
// template's serial number.
func signPublicKey(template, parent *x509.Certificate, pub crypto.PublicKey, parentKey crypto.Signer) (*x509.Certificate, []byte, error) {
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	template.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, template, parent, pub, parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate %q: %w", template.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parse new certificate %q: %w", template.Subject.CommonName, err)
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der}), nil
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	if k, ok := key.(*ecdsa.PrivateKey); ok {
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, fmt.Errorf("marshal EC private key: %w", err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: pemECKey, Bytes: der}), nil
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPKCS8Key, Bytes: der}), nil
}

// parseKey decodes the first private key block of keyPEM. It accepts SEC1
// EC, PKCS#8 and PKCS#1 RSA keys so that an operator-supplied CA works too.
func parseKey(keyPEM []byte) (crypto.Signer, error) {
	rest := keyPEM
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PEM private key block found")
		}
		switch block.Type {
		case pemECKey:
			return x509.ParseECPrivateKey(block.Bytes)
		case pemPKCS1Key:
			return x509.ParsePKCS1PrivateKey(block.Bytes)
		case pemPKCS8Key:
			key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, err
			}
			switch k := key.(type) {
			case *ecdsa.PrivateKey, *rsa.PrivateKey, ed25519.PrivateKey:
				return k.(crypto.Signer), nil
			default:
				return nil, fmt.Errorf("unsupported private key type %T", key)
			}
		}
	}
}

// parseCert decodes the first certificate block of certPEM.
func parseCert(certPEM []byte) (*x509.Certificate, error) {
	rest := certPEM
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PEM certificate block found")
		}
		if block.Type == pemCertificate {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}

// parseKeyPair parses and cross-checks a certificate and its private key.
func parseKeyPair(certPEM, keyPEM []byte) (*keyPair, error) {
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, errors.New("private key does not match the certificate")
	}
	return &keyPair{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ea, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ea.Equal(b)
}
