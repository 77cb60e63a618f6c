package join

import (
	"crypto/hmac"
	"crypto/sha256"
	"strings"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
)

// PathPrefix is where the server mounts the join handlers. Requests under
// it are not authenticated by the API server's middleware.
const PathPrefix = "/nodeplane/join/"

// Endpoints.
const (
	clusterInfoPath = PathPrefix + "v1/cluster-info"
	certificatePath = PathPrefix + "v1/certificate"
	renewPath       = PathPrefix + "v1/renew"
	tokenPath       = PathPrefix + "v1/token"
)

// maxBodyBytes bounds request bodies on the server and response bodies on
// the agent (a CSR or a certificate is about 1 KiB).
const maxBodyBytes = 64 << 10

// NodeUserPrefix prefixes a node's user name: system:node:<node name>.
const NodeUserPrefix = "system:node:"

// NodeUser returns the user name of node nodeName.
func NodeUser(nodeName string) string { return NodeUserPrefix + nodeName }

// nodeNameOf returns the node name of a node identity (user name prefixed
// with NodeUserPrefix and member of system:nodes), or "" if it is none.
func nodeNameOf(user string, groups []string) string {
	name, ok := strings.CutPrefix(user, NodeUserPrefix)
	if !ok {
		return ""
	}
	for _, g := range groups {
		if g == authn.GroupNodes {
			return name
		}
	}
	return ""
}

// clusterInfo is the answer of GET cluster-info.
type clusterInfo struct {
	// CA is the cluster CA certificate, PEM.
	CA string `json:"ca"`
	// CAMAC is clusterInfoMAC(secret, CA), base64 (standard encoding).
	CAMAC []byte `json:"caMAC"`
}

// certificateRequest is the body of POST certificate.
type certificateRequest struct {
	Token    string `json:"token"`
	NodeName string `json:"nodeName"`
	// CSR is a PEM "CERTIFICATE REQUEST".
	CSR string `json:"csr"`
}

// renewRequest is the body of POST renew.
type renewRequest struct {
	CSR string `json:"csr"`
}

// certificateResponse answers certificate and renew.
type certificateResponse struct {
	// Certificate is the node's client certificate, PEM.
	Certificate string `json:"certificate"`
	// CA is the cluster CA certificate, PEM.
	CA string `json:"ca"`
}

// tokenRequest is the body of POST token.
type tokenRequest struct {
	Token    string `json:"token"`
	NodeName string `json:"nodeName"`
}

// tokenResponse answers token.
type tokenResponse struct {
	// Token is the node bearer token.
	Token string `json:"token"`
	// CA is the cluster CA certificate, PEM.
	CA string `json:"ca"`
}

// clusterInfoMACPrefix separates the cluster-info MAC from any other use of
// the join secret.
const clusterInfoMACPrefix = "nodeplane-cluster-info-v1\n"

// clusterInfoMAC authenticates caPEM with the join secret.
func clusterInfoMAC(secret string, caPEM []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(clusterInfoMACPrefix))
	m.Write(caPEM)
	return m.Sum(nil)
}
