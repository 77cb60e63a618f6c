package authn

import (
	"errors"
	"net/http"
	"slices"
)

// ClientCert authenticates a request by its TLS client certificate: the
// subject's CN is the user name and its O entries are the groups, as in
// Kubernetes. It trusts only certificates the TLS layer verified (it reads
// VerifiedChains, so a server that merely requested a certificate without
// verifying it authenticates nobody this way).
type ClientCert struct{}

// Authenticate implements Authenticator.
func (ClientCert) Authenticate(r *http.Request) (*User, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, false, nil
	}
	if len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil, false, errors.New("client certificate was not verified by the TLS layer")
	}
	cert := r.TLS.VerifiedChains[0][0]
	if cert.Subject.CommonName == "" {
		return nil, false, errors.New("client certificate has an empty common name")
	}
	return &User{
		Name:   cert.Subject.CommonName,
		Groups: withAuthenticatedGroup(slices.Clone(cert.Subject.Organization)),
	}, true, nil
}
