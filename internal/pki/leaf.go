package pki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Subjects of the certificates EnsureCluster issues.
const (
	servingCommonName = "nodeplane-apiserver"
	// AdminUser is the user name of the admin client certificate.
	AdminUser = "nodeplane-admin"
	// AdminGroup is the group of the admin client certificate; authorization
	// treats it as the superuser group, as Kubernetes does.
	AdminGroup = "system:masters"
)

// leaf describes one certificate EnsureCluster keeps in the data directory.
type leaf struct {
	what     string // for messages: "serving certificate"
	certFile string
	keyFile  string
	// template returns the certificate to issue at now.
	template func(now time.Time) *x509.Certificate
	// mismatch says why a loaded certificate no longer fits (a missing SAN,
	// a wrong subject), or "" if it does.
	mismatch func(cert *x509.Certificate) string
}

func servingLeaf(want sans) leaf {
	return leaf{
		what:     "serving certificate",
		certFile: ServingCertFile,
		keyFile:  ServingKeyFile,
		template: func(now time.Time) *x509.Certificate {
			return &x509.Certificate{
				Subject:     pkix.Name{CommonName: servingCommonName},
				NotBefore:   now.Add(-backdate),
				NotAfter:    now.Add(leafValidity),
				KeyUsage:    x509.KeyUsageDigitalSignature,
				ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
				DNSNames:    slices.Clone(want.dnsNames),
				IPAddresses: slices.Clone(want.ips),
			}
		},
		mismatch: func(cert *x509.Certificate) string {
			if missing := want.missingFrom(cert.DNSNames, cert.IPAddresses); len(missing) > 0 {
				return "missing SANs " + strings.Join(missing, ", ")
			}
			if !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
				return "not a server certificate"
			}
			return ""
		},
	}
}

func adminLeaf() leaf {
	return leaf{
		what:     "admin certificate",
		certFile: AdminCertFile,
		keyFile:  AdminKeyFile,
		template: func(now time.Time) *x509.Certificate {
			return clientTemplate(AdminUser, []string{AdminGroup}, now, now.Add(leafValidity))
		},
		mismatch: func(cert *x509.Certificate) string {
			if cert.Subject.CommonName != AdminUser || !slices.Equal(cert.Subject.Organization, []string{AdminGroup}) {
				return fmt.Sprintf("subject is %q, want CN=%s,O=%s", cert.Subject.String(), AdminUser, AdminGroup)
			}
			if !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
				return "not a client certificate"
			}
			return ""
		},
	}
}

func clientTemplate(cn string, orgs []string, now, notAfter time.Time) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: slices.Clone(orgs)},
		NotBefore:   now.Add(-backdate),
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

// renewalReason says why cert must be re-issued at now, or returns "" if it
// can be kept: it must be signed by ca, be valid now, not expire within
// renewBefore, and fit l.
func (l leaf) renewalReason(cert, ca *x509.Certificate, now time.Time) string {
	if err := cert.CheckSignatureFrom(ca); err != nil {
		return "not signed by the cluster CA"
	}
	if now.Before(cert.NotBefore) {
		return "not valid until " + cert.NotBefore.UTC().Format(time.RFC3339)
	}
	if cert.NotAfter.Sub(now) < renewBefore {
		return "expires at " + cert.NotAfter.UTC().Format(time.RFC3339)
	}
	return l.mismatch(cert)
}

// ensure loads l from dir and returns it if it can be kept at now;
// otherwise it issues a new one from ca, writes it (key first, each file
// atomically) and returns it. reason says why it was (re-)issued, "" if it
// was kept. A key or certificate file that cannot be parsed is replaced;
// one that cannot be read is an error.
func (l leaf) ensure(dir string, ca *keyPair, now time.Time) (kp *keyPair, reason string, err error) {
	certPath := filepath.Join(dir, l.certFile)
	keyPath := filepath.Join(dir, l.keyFile)
	reason, kp, err = l.load(certPath, keyPath, ca, now)
	if err != nil {
		return nil, "", err
	}
	if reason == "" {
		if err := restrictKeyMode(keyPath); err != nil {
			return nil, "", err
		}
		return kp, "", nil
	}
	kp, err = sign(l.template(now), ca.cert, nil, ca.key)
	if err != nil {
		return nil, "", fmt.Errorf("issue %s: %w", l.what, err)
	}
	if err := writeFileAtomic(keyPath, kp.keyPEM, keyMode); err != nil {
		return nil, "", fmt.Errorf("write %s key: %w", l.what, err)
	}
	if err := writeFileAtomic(certPath, kp.certPEM, certMode); err != nil {
		return nil, "", fmt.Errorf("write %s: %w", l.what, err)
	}
	return kp, reason, nil
}

func (l leaf) load(certPath, keyPath string, ca *keyPair, now time.Time) (reason string, kp *keyPair, err error) {
	certPEM, haveCert, err := readFileIfExists(certPath)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", l.what, err)
	}
	keyPEM, haveKey, err := readFileIfExists(keyPath)
	if err != nil {
		return "", nil, fmt.Errorf("%s key: %w", l.what, err)
	}
	if !haveCert || !haveKey {
		return "absent", nil, nil
	}
	kp, err = parseKeyPair(certPEM, keyPEM)
	if err != nil {
		return "unusable: " + err.Error(), nil, nil
	}
	return l.renewalReason(kp.cert, ca.cert, now), kp, nil
}
