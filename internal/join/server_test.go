package join_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/join"
)

// csrFor returns a PEM CSR for key asking for subject cn/orgs.
func csrFor(t *testing.T, key crypto.Signer, cn string, orgs ...string) string {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func parseCert(t *testing.T, certPEM string) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode([]byte(certPEM))
	if block == nil {
		t.Fatalf("no PEM block in %q", certPEM)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestCertificateEndpoint(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	client := f.httpClient(t)
	url := f.url + join.PathPrefix + "v1/certificate"
	key := newKey(t)
	// A CSR asking for the admin's identity: the server must ignore it.
	greedyCSR := csrFor(t, key, "nodeplane-admin", "system:masters")

	badSignature := func() string {
		block, _ := pem.Decode([]byte(csrFor(t, key, "x")))
		der := bytes.Clone(block.Bytes)
		der[len(der)-3] ^= 0xff // inside the signature
		return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
	}()

	tests := []struct {
		name       string
		body       any
		wantCode   int
		wantReason metav1.StatusReason
		wantMsg    string // substring of the Status message
		wantField  string // the field the Status names, if any
	}{
		{
			name:     "the join secret and a CSR yield a node certificate",
			body:     map[string]string{"token": secret, "nodeName": "node-1.example", "csr": greedyCSR},
			wantCode: http.StatusOK,
		},
		{
			name:       "a wrong join secret is refused with 401",
			body:       map[string]string{"token": "wrong-secret-value", "nodeName": "node-1", "csr": greedyCSR},
			wantCode:   http.StatusUnauthorized,
			wantReason: metav1.StatusReasonUnauthorized,
			wantMsg:    "join token rejected",
		},
		{
			name:       "a missing join secret is refused with 401",
			body:       map[string]string{"nodeName": "node-1", "csr": greedyCSR},
			wantCode:   http.StatusUnauthorized,
			wantReason: metav1.StatusReasonUnauthorized,
			wantMsg:    "join token rejected",
		},
		{
			name:       "the secret is checked before the node name",
			body:       map[string]string{"token": "wrong", "nodeName": "Not_A_Name", "csr": greedyCSR},
			wantCode:   http.StatusUnauthorized,
			wantReason: metav1.StatusReasonUnauthorized,
		},
		{
			name:       "a node name that is not a DNS subdomain is invalid",
			body:       map[string]string{"token": secret, "nodeName": "Node_1", "csr": greedyCSR},
			wantCode:   http.StatusUnprocessableEntity,
			wantReason: metav1.StatusReasonInvalid,
			wantMsg:    "nodeName",
			wantField:  "nodeName",
		},
		{
			name:       "an empty node name is invalid",
			body:       map[string]string{"token": secret, "nodeName": "", "csr": greedyCSR},
			wantCode:   http.StatusUnprocessableEntity,
			wantReason: metav1.StatusReasonInvalid,
			wantField:  "nodeName",
		},
		{
			name:       "a garbage CSR is a bad request naming csr",
			body:       map[string]string{"token": secret, "nodeName": "node-1", "csr": "-----BEGIN CERTIFICATE REQUEST-----\nZ2FyYmFnZQ==\n-----END CERTIFICATE REQUEST-----\n"},
			wantCode:   http.StatusBadRequest,
			wantReason: metav1.StatusReasonBadRequest,
			wantMsg:    "csr:",
			wantField:  "csr",
		},
		{
			name:       "a CSR that is not PEM is a bad request naming csr",
			body:       map[string]string{"token": secret, "nodeName": "node-1", "csr": "hello"},
			wantCode:   http.StatusBadRequest,
			wantReason: metav1.StatusReasonBadRequest,
			wantField:  "csr",
		},
		{
			name:       "a CSR whose signature does not verify is a bad request",
			body:       map[string]string{"token": secret, "nodeName": "node-1", "csr": badSignature},
			wantCode:   http.StatusBadRequest,
			wantReason: metav1.StatusReasonBadRequest,
			wantMsg:    "signature",
			wantField:  "csr",
		},
		{
			name:       "a body that is not JSON is a bad request",
			body:       []byte("{not json"),
			wantCode:   http.StatusBadRequest,
			wantReason: metav1.StatusReasonBadRequest,
		},
		{
			name:       "a body over 64 KiB is refused",
			body:       map[string]string{"token": secret, "nodeName": "node-1", "csr": strings.Repeat("A", 65<<10)},
			wantCode:   http.StatusRequestEntityTooLarge,
			wantReason: metav1.StatusReasonRequestEntityTooLarge,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := post(t, client, url, tt.body)
			if code != tt.wantCode {
				t.Fatalf("status %d (%s), want %d", code, body, tt.wantCode)
			}
			if bytes.Contains(body, []byte(secret)) || bytes.Contains(body, []byte("wrong-secret-value")) {
				t.Errorf("answer echoes a secret: %s", body)
			}
			if tt.wantCode != http.StatusOK {
				st := decodeStatus(t, body)
				if st.Code != int32(tt.wantCode) || st.Reason != tt.wantReason || !strings.Contains(st.Message, tt.wantMsg) {
					t.Errorf("Status = %d %s %q, want %d %s containing %q", st.Code, st.Reason, st.Message, tt.wantCode, tt.wantReason, tt.wantMsg)
				}
				if tt.wantField != "" && (st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Field != tt.wantField) {
					t.Errorf("Status details = %+v, want a cause naming %s", st.Details, tt.wantField)
				}
				return
			}
			var resp struct{ Certificate, CA string }
			if err := json.Unmarshal(body, &resp); err != nil {
				t.Fatal(err)
			}
			if resp.CA != string(f.cluster.CAPEM()) {
				t.Error("answer does not carry the cluster CA")
			}
			cert := parseCert(t, resp.Certificate)
			if cert.Subject.CommonName != "system:node:node-1.example" || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) {
				t.Errorf("subject = %s, want CN=system:node:node-1.example, O=system:nodes (whatever the CSR asks)", cert.Subject)
			}
			if !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) || cert.IsCA {
				t.Errorf("ext key usage = %v, IsCA = %v; want client auth only", cert.ExtKeyUsage, cert.IsCA)
			}
			if !key.PublicKey.Equal(cert.PublicKey) {
				t.Error("certificate is not for the CSR's key")
			}
			if want := start.Add(join.DefaultCertTTL); !cert.NotAfter.Equal(want) {
				t.Errorf("NotAfter = %s, want %s (one year)", cert.NotAfter, want)
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: f.cluster.CertPool(), CurrentTime: start, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("does not verify against the cluster CA: %v", err)
			}
		})
	}

	logs := f.logs.String()
	if strings.Contains(logs, secret) || strings.Contains(logs, "wrong-secret-value") {
		t.Errorf("logs contain a secret:\n%s", logs)
	}
	if !strings.Contains(logs, "node joined") || !strings.Contains(logs, "node=node-1.example") {
		t.Errorf("logs do not record the join:\n%s", logs)
	}
}

func TestJoinEndpointsRefuseWrongMethods(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	client := f.httpClient(t)
	tests := []struct {
		name, method, path string
		wantCode           int
	}{
		{name: "GET on certificate is not allowed", method: http.MethodGet, path: "v1/certificate", wantCode: http.StatusMethodNotAllowed},
		{name: "POST on cluster-info is not allowed", method: http.MethodPost, path: "v1/cluster-info", wantCode: http.StatusMethodNotAllowed},
		{name: "an unknown path is not found", method: http.MethodGet, path: "v2/anything", wantCode: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, f.url+join.PathPrefix+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var st metav1.Status
			if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
				t.Fatalf("not a Status: %v", err)
			}
			if resp.StatusCode != tt.wantCode || st.Code != int32(tt.wantCode) {
				t.Errorf("status %d (Status code %d), want %d", resp.StatusCode, st.Code, tt.wantCode)
			}
		})
	}
}

func TestClusterInfoCarriesTheCAAuthenticatedWithTheSecret(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	// The agent does not know the CA yet: no verification at all.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get(f.url + join.PathPrefix + "v1/cluster-info?nodeName=n1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info struct {
		CA    string `json:"ca"`
		CAMAC []byte `json:"caMAC"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	if info.CA != string(f.cluster.CAPEM()) {
		t.Errorf("ca = %q, want the cluster CA", info.CA)
	}
	mac := func(key string) []byte {
		m := hmac.New(sha256.New, []byte(key))
		m.Write([]byte("nodeplane-cluster-info-v1\n"))
		m.Write([]byte(info.CA))
		return m.Sum(nil)
	}
	if !hmac.Equal(info.CAMAC, mac(secret)) {
		t.Error("caMAC is not HMAC-SHA256(secret, prefix || CA)")
	}
	if hmac.Equal(info.CAMAC, mac("another secret")) {
		t.Error("caMAC verifies with another secret")
	}
}

func TestRenewEndpointWantsANodeCertificate(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	url := f.url + join.PathPrefix + "v1/renew"
	adminCert, adminKey := f.cluster.AdminCredentials()
	admin, err := tls.X509KeyPair(adminCert, adminKey)
	if err != nil {
		t.Fatal(err)
	}
	nodeCert, nodeKey, err := f.cluster.IssueClientCert("system:node:n1", []string{"system:nodes"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	node, err := tls.X509KeyPair(nodeCert, nodeKey)
	if err != nil {
		t.Fatal(err)
	}
	notInGroup, notInGroupKey, err := f.cluster.IssueClientCert("system:node:n1", []string{"developers"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	impostor, err := tls.X509KeyPair(notInGroup, notInGroupKey)
	if err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	tests := []struct {
		name     string
		certs    []tls.Certificate
		csr      string
		wantCode int
	}{
		{name: "a node renews its certificate", certs: []tls.Certificate{node}, csr: csrFor(t, key, "ignored"), wantCode: http.StatusOK},
		{name: "no client certificate is unauthorized", csr: csrFor(t, key, "ignored"), wantCode: http.StatusUnauthorized},
		{name: "the admin is not a node", certs: []tls.Certificate{admin}, csr: csrFor(t, key, "ignored"), wantCode: http.StatusForbidden},
		{name: "a node name outside system:nodes is not a node", certs: []tls.Certificate{impostor}, csr: csrFor(t, key, "ignored"), wantCode: http.StatusForbidden},
		{name: "a node with a garbage CSR is a bad request", certs: []tls.Certificate{node}, csr: "garbage", wantCode: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := post(t, f.httpClient(t, tt.certs...), url, map[string]string{"csr": tt.csr})
			if code != tt.wantCode {
				t.Fatalf("status %d (%s), want %d", code, body, tt.wantCode)
			}
			if code != http.StatusOK {
				decodeStatus(t, body)
				return
			}
			var resp struct{ Certificate string }
			if err := json.Unmarshal(body, &resp); err != nil {
				t.Fatal(err)
			}
			cert := parseCert(t, resp.Certificate)
			if cert.Subject.CommonName != "system:node:n1" || !key.PublicKey.Equal(cert.PublicKey) {
				t.Errorf("renewed certificate is for %s and another key, want system:node:n1 and the CSR's key", cert.Subject)
			}
		})
	}
}

func TestNewServerValidatesItsConfig(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	tests := []struct {
		name string
		cfg  join.ServerConfig
	}{
		{name: "a cluster is required", cfg: join.ServerConfig{Token: secret}},
		{name: "a join secret is required", cfg: join.ServerConfig{Cluster: f.cluster}},
		{name: "a negative certificate lifetime is refused", cfg: join.ServerConfig{Cluster: f.cluster, Token: secret, CertTTL: -time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := join.NewServer(tt.cfg); err == nil {
				t.Error("NewServer succeeded, want an error")
			}
		})
	}
}
