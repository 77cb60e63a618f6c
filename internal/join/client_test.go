package join_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/nodeplane/nodeplane/internal/join"
)

// whoamiWith asks /whoami through client-go's HTTP client for cfg.
func whoamiWith(t *testing.T, hc *http.Client, url string) whoamiAnswer {
	t.Helper()
	resp, err := hc.Get(url + "/whoami")
	if err != nil {
		t.Fatalf("GET /whoami: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /whoami: status %d", resp.StatusCode)
	}
	var a whoamiAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	return a
}

func restHTTPClient(t *testing.T, cfg *rest.Config) *http.Client {
	t.Helper()
	if len(cfg.TLSClientConfig.CAData) > 0 || len(cfg.TLSClientConfig.CertData) > 0 {
		t.Error("RESTConfig sets TLSClientConfig next to its Transport")
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatalf("rest.HTTPClientFor: %v", err)
	}
	return hc
}

// entries lists the files under dir, or nil if it does not exist.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir {
			names = append(names, path)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestEnsureJoinsAndTheIdentityAuthenticatesAsTheNode(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	cfg := f.clientConfig(t, "worker-1")
	id, err := join.Ensure(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if got := f.count("v1/certificate"); got != 1 {
		t.Errorf("certificate requests = %d, want 1", got)
	}
	if cn := id.Certificate().Subject.CommonName; cn != "system:node:worker-1" {
		t.Errorf("certificate CN = %q, want system:node:worker-1", cn)
	}

	a := whoamiWith(t, restHTTPClient(t, id.RESTConfig()), f.url)
	if a.User.Name != "system:node:worker-1" || !slices.Equal(a.User.Groups, []string{"system:nodes", "system:authenticated"}) {
		t.Errorf("authenticated as %+v, want system:node:worker-1 in [system:nodes system:authenticated]", a.User)
	}

	dir := filepath.Join(cfg.DataDir, join.PKIDir)
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o700 {
		t.Errorf("identity directory mode = %o, want 700", info.Mode().Perm())
	}
	for _, name := range []string{join.CACertFile, join.NodeCertFile, join.NodeKeyFile} {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s mode = %o, want 600", name, info.Mode().Perm())
		}
	}
	if got := entries(t, dir); len(got) != 3 {
		t.Errorf("identity directory holds %v, want exactly the three identity files", got)
	}
	ca, _, _ := id.Credentials()
	if string(ca) != string(f.cluster.CAPEM()) {
		t.Error("the identity does not pin the cluster CA")
	}
}

func TestEnsureWithAWrongTokenStoresNothing(t *testing.T) {
	tests := []struct {
		name string
		// pinCA gives the agent the CA, so that the wrong token reaches
		// the server instead of failing the cluster-info check.
		pinCA            bool
		wantMsg          string
		wantCertRequests int
	}{
		{
			name:             "without the CA the cluster info does not verify and the token is never sent",
			wantCertRequests: 0,
		},
		{
			name:             "with the CA pinned the server refuses the token",
			pinCA:            true,
			wantMsg:          "join refused by %s: join token rejected",
			wantCertRequests: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			cfg := f.clientConfig(t, "worker-1")
			cfg.Token = "not-the-secret"
			if tt.pinCA {
				cfg.CAPEM = f.cluster.CAPEM()
			}
			id, err := join.Ensure(context.Background(), cfg)
			if err == nil {
				t.Fatalf("Ensure succeeded with a wrong token: %v", id.Certificate().Subject)
			}
			t.Logf("error: %v", err)
			if !errors.Is(err, join.ErrTokenRejected) {
				t.Errorf("error %v does not match ErrTokenRejected", err)
			}
			if tt.wantMsg != "" {
				if want := fmt.Sprintf(tt.wantMsg, f.url); err.Error() != want {
					t.Errorf("error = %q, want %q", err, want)
				}
			}
			if got := f.count("v1/certificate"); got != tt.wantCertRequests {
				t.Errorf("certificate requests = %d, want %d", got, tt.wantCertRequests)
			}
			if got := entries(t, cfg.DataDir); len(got) != 0 {
				t.Errorf("data directory holds %v after a refused join, want nothing", got)
			}
		})
	}
}

func TestEnsureRefusesABadNodeName(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	cfg := f.clientConfig(t, "Bad_Name")
	_, err := join.Ensure(context.Background(), cfg)
	if err == nil {
		t.Fatal("Ensure succeeded with an invalid node name")
	}
	if want := "join refused by " + f.url; !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "nodeName") {
		t.Errorf("error = %q, want it to start with %q and name nodeName", err, want)
	}
	if got := entries(t, cfg.DataDir); len(got) != 0 {
		t.Errorf("data directory holds %v after a refused join", got)
	}
}

func TestEnsureReusesAStoredIdentity(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	cfg := f.clientConfig(t, "worker-1")
	first, err := join.Ensure(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Step(24 * time.Hour)

	tests := []struct {
		name  string
		token string
	}{
		{name: "with the token the stored identity is used without asking the server", token: secret},
		{name: "without the token the stored identity is used", token: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			again := cfg
			again.Token = tt.token
			id, err := join.Ensure(context.Background(), again)
			if err != nil {
				t.Fatalf("second Ensure: %v", err)
			}
			if got := f.count("v1/certificate") + f.count("v1/cluster-info"); got != 2 {
				t.Errorf("join requests = %d, want only the first join's 2", got)
			}
			if id.Certificate().SerialNumber.Cmp(first.Certificate().SerialNumber) != 0 {
				t.Error("second Ensure returned another certificate")
			}
		})
	}
}

func TestEnsureReplacesAnIdentityThatDoesNotFit(t *testing.T) {
	const ttl = 100 * time.Hour // plus one hour of backdating
	tests := []struct {
		name     string
		nodeName string        // for the second Ensure
		after    time.Duration // between the two Ensure calls
		token    string        // for the second Ensure
		pinOther bool          // pin another cluster's CA
		wantJoin bool
		wantErr  bool
	}{
		{name: "a certificate for another node name is replaced by a join", nodeName: "worker-2", token: secret, wantJoin: true},
		{name: "a certificate for another node name without a token is an error", nodeName: "worker-2", wantErr: true},
		{name: "a certificate with less than a fifth of its lifetime left is replaced", nodeName: "worker-1", after: 85 * time.Hour, token: secret, wantJoin: true},
		{name: "a certificate with more than a fifth left is kept", nodeName: "worker-1", after: 75 * time.Hour, token: secret},
		{name: "a certificate due for renewal is kept when there is no token", nodeName: "worker-1", after: 85 * time.Hour},
		{name: "an expired certificate without a token is an error", nodeName: "worker-1", after: 101 * time.Hour, wantErr: true},
		{name: "an expired certificate is replaced with the token", nodeName: "worker-1", after: 101 * time.Hour, token: secret, wantJoin: true},
		{name: "a certificate from another cluster than the pinned CA is an error without a token", nodeName: "worker-1", pinOther: true, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{certTTL: ttl})
			cfg := f.clientConfig(t, "worker-1")
			first, err := join.Ensure(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			f.clock.Step(tt.after)
			again := cfg
			again.NodeName, again.Token = tt.nodeName, tt.token
			if tt.pinOther {
				again.CAPEM = newFixture(t, fixtureOptions{}).cluster.CAPEM()
			}
			id, err := join.Ensure(context.Background(), again)
			if tt.wantErr {
				if err == nil {
					t.Fatal("Ensure succeeded, want an error")
				}
				t.Logf("error: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			joined := f.count("v1/certificate") == 2
			if joined != tt.wantJoin {
				t.Errorf("joined again = %v, want %v", joined, tt.wantJoin)
			}
			sameCert := id.Certificate().SerialNumber.Cmp(first.Certificate().SerialNumber) == 0
			if sameCert == tt.wantJoin {
				t.Errorf("kept the stored certificate = %v, want %v", sameCert, !tt.wantJoin)
			}
			if cn := id.Certificate().Subject.CommonName; cn != "system:node:"+tt.nodeName {
				t.Errorf("certificate CN = %q, want system:node:%s", cn, tt.nodeName)
			}
		})
	}
}

func TestEnsureValidatesItsConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  join.ClientConfig
	}{
		{name: "the server must be an https URL", cfg: join.ClientConfig{Server: "http://127.0.0.1:6443", Token: secret, NodeName: "n", DataDir: "/tmp/x"}},
		{name: "a node name is required", cfg: join.ClientConfig{Server: "https://127.0.0.1:6443", Token: secret, DataDir: "/tmp/x"}},
		{name: "a data directory is required", cfg: join.ClientConfig{Server: "https://127.0.0.1:6443", Token: secret, NodeName: "n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := join.Ensure(context.Background(), tt.cfg); err == nil {
				t.Error("Ensure succeeded, want an error")
			}
		})
	}
}

func TestEnsureRetriesWhileTheServerIsUnavailable(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	cfg := f.clientConfig(t, "worker-1")
	f.failNext("v1/cluster-info", 1)
	f.failNext("v1/certificate", 1)
	errc := make(chan error, 1)
	go func() {
		_, err := join.Ensure(context.Background(), cfg)
		errc <- err
	}()
	// Each failure waits on the fake clock: 1 s, then 2 s.
	for _, wait := range []time.Duration{time.Second, 2 * time.Second} {
		eventually(t, "Ensure to wait before retrying", f.clock.HasWaiters)
		f.clock.Step(wait - time.Millisecond)
		if !f.clock.HasWaiters() {
			t.Fatalf("Ensure retried before %s", wait)
		}
		f.clock.Step(time.Millisecond)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if got, want := []int{f.count("v1/cluster-info"), f.count("v1/certificate")}, []int{3, 2}; !slices.Equal(got, want) {
		t.Errorf("cluster-info and certificate requests = %v, want %v", got, want)
	}
}
