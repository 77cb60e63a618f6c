package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	"github.com/nodeplane/nodeplane/internal/join"
)

// zoneViewTokens is a --token-auth-file: an administrator, a user in group
// ops (granted /ui/* in the test) and a user with no grant.
const zoneViewTokens = `zv-admin-token,zv-admin,uid-1,"system:masters"
zv-ops-token,zv-ops,uid-2,"ops"
zv-nobody-token,zv-nobody,uid-3
`

func writeZoneViewTokens(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(f, []byte(zoneViewTokens), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestZoneViewAccess: the zone view's data is authenticated and authorized
// like any non-resource path — anonymous 401, a user without the grant 403,
// a node identity 403 (even when RBAC would grant its group), a user
// granted nonResourceURLs "/ui/*" and administrators 200 — while the page
// itself (no cluster data) loads for anyone with a strict CSP.
func TestZoneViewAccess(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{args: append([]string{"--token-auth-file", writeZoneViewTokens(t)}, shortLifecycle...)})
	host := s.restConfig().Host
	tlsOnly := s.restConfig()
	tlsOnly.CertData, tlsOnly.KeyData, tlsOnly.CertFile, tlsOnly.KeyFile = nil, nil, "", ""
	anon, err := rest.HTTPClientFor(tlsOnly)
	if err != nil {
		t.Fatal(err)
	}
	node, err := join.Ensure(ctx, join.ClientConfig{Server: host, Token: readToken(t, s), DataDir: t.TempDir(), NodeName: "zv-node"})
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	nodeHC, err := rest.HTTPClientFor(node.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	get := func(hc *http.Client, path, token string) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, host+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := hc.Do(req.WithContext(rctx))
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		// An event stream never ends: the first bytes are enough.
		b := make([]byte, 4096)
		n, _ := io.ReadAtLeast(resp.Body, b, 1)
		return resp.StatusCode, string(b[:n]), resp.Header
	}

	// Nodes in the group "ops" too: RBAC must still not widen a node.
	cs := s.client()
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "zone-viewer"},
		Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/ui/*"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "nodes-zone-viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "zone-viewer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:nodes"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, path := range []string{"/ui/api/zones", "/ui/api/events"} {
		for _, c := range []struct {
			who   string
			hc    *http.Client
			token string
			want  int
		}{
			{"anonymous", anon, "", http.StatusUnauthorized},
			{"a wrong token", anon, "zv-wrong-token", http.StatusUnauthorized},
			{"a user without the grant", anon, "zv-nobody-token", http.StatusForbidden},
			{"a user in ops before ops is granted", anon, "zv-ops-token", http.StatusForbidden},
			{"a node identity (its group granted /ui/*)", nodeHC, "", http.StatusForbidden},
			{"the admin token", anon, "zv-admin-token", http.StatusOK},
			{"the admin client certificate", s.httpClient(), "", http.StatusOK},
		} {
			if code, body, _ := get(c.hc, path, c.token); code != c.want {
				t.Errorf("GET %s as %s: %d %.200s, want %d", path, c.who, code, body, c.want)
			}
		}
	}
	if code, _, _ := get(s.httpClient(), "/ui/api/zones?x", ""); code != http.StatusOK {
		t.Errorf("zones with a query: %d", code)
	}
	// A write is authorized as verb "post": even the page's readers may not.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, host+"/ui/api/zones", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer zv-nobody-token")
	if resp, err := anon.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST as a user without the grant: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "ops-zone-viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "zone-viewer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "ops"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "ops granted /ui/* reads the zones", func() error {
		if code, body, _ := get(anon, "/ui/api/zones", "zv-ops-token"); code != http.StatusOK {
			return fmt.Errorf("%d %.200s", code, body)
		}
		return nil
	})
	if code, body, _ := get(nodeHC, "/ui/api/zones", ""); code != http.StatusForbidden {
		t.Errorf("node identity after the grants: %d %.200s", code, body)
	}

	code, body, h := get(anon, "/ui/", "")
	if code != http.StatusOK || !strings.Contains(body, "nodeplane zones") || !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("the page for anyone: %d %v %.200s", code, h, body)
	}
}

// chromiumPath finds Debian's chromium; without it the browser test skips,
// except under CI=true (.ci/run installs it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH (.ci/run installs Debian's chromium)")
	}
	t.Skip("needs chromium (apt-get install chromium)")
	return ""
}

// TestZoneViewInTheBrowser opens /ui/ in headless Chromium against a real
// server (monitor period 2 s, grace 8 s) with 30 simulated nodes in zones
// a, b and c, signs in with the administrator's token, makes zone b go
// dark (its nodes stop heartbeating) and reads the page: zone b must show
// FullDisruption with 10 unhealthy nodes within two monitor periods of the
// controller marking its last node Unknown in the API, and its nodes must
// head the heartbeat-age table. NODEPLANE_ZONE_VIEW_SCREENSHOT=path saves
// a screenshot of the page after the outage.
func TestZoneViewInTheBrowser(t *testing.T) {
	const monitorPeriod = 2 * time.Second
	chromium := chromiumPath(t)
	args := append(append([]string{}, shortLifecycle...), "--node-monitor-period="+monitorPeriod.String(),
		"--node-eviction-rate=1", "--leader-elect=false", "--token-auth-file", writeZoneViewTokens(t))
	s := startServer(t, serverOptions{args: args})
	control := startSim(t, s, "--nodes", "30", "--zones", "a,b,c", "--node-lease-duration", "4s",
		"--node-status-update-frequency", "1s")

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		// The cluster CA is not in the browser's store; the test checks
		// the server's identity no further than the page itself does.
		chromedp.Flag("ignore-certificate-errors", true), chromedp.WindowSize(1400, 1000), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	bctx, cancelTimeout := context.WithTimeout(bctx, 3*time.Minute)
	defer cancelTimeout()

	// The page asks for a credential, and takes the admin token.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(s.restConfig().Host+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#login-form")),
		chromedp.SendKeys(chromedp.CSS("#token"), "zv-admin-token"),
		// A click, not form.submit(): the page signs in from the submit event.
		chromedp.Click(chromedp.CSS(`#login-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#zones")),
	); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	// zone returns "state unhealthy" of the row whose zone ends in name.
	zone := func(name string) string {
		js := fmt.Sprintf(`(() => { const r = [...document.querySelectorAll("#zones tbody tr")].find(r => r.dataset.zone.endsWith(%q));
			return r ? r.querySelector(".state").textContent + " " + r.querySelector(".unhealthy").textContent : "missing"; })()`, name)
		out, err := chromedp.Run(bctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("read the page: %v", err)
		}
		return out
	}
	eventually(t, 60*time.Second, "the page shows 3 Normal zones of 10", func() error {
		for _, z := range []string{"a", "b", "c"} {
			if got := zone(z); got != "Normal 0" {
				return fmt.Errorf("zone %s: %q", z, got)
			}
		}
		return nil
	})

	post(t, control+"/pause?zone=b")
	cs := s.client()
	unknownAt := make(chan time.Time, 1)
	go func() {
		defer close(unknownAt)
		for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			list, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: labels.Set{corev1.LabelTopologyZone: "b"}.String()})
			if err != nil || len(list.Items) != 10 {
				continue
			}
			all := true
			for i := range list.Items {
				all = all && condition(&list.Items[i], corev1.NodeReady).Status == corev1.ConditionUnknown
			}
			if all {
				unknownAt <- time.Now()
				return
			}
		}
	}()
	var shownAt time.Time
	eventually(t, 90*time.Second, "the page shows zone b FullDisruption with 10 unhealthy", func() error {
		if got := zone("b"); got != "FullDisruption 10" {
			return fmt.Errorf("zone b: %q", got)
		}
		shownAt = time.Now()
		return nil
	})
	apiAt, ok := <-unknownAt
	if !ok {
		t.Fatal("the API never showed every zone-b node Ready=Unknown")
	}
	lag := shownAt.Sub(apiAt)
	t.Logf("page showed zone b down %v after the API had every node Unknown (negative: before)", lag.Round(10*time.Millisecond))
	if lag > 2*monitorPeriod {
		t.Errorf("the page showed the outage %v after the API: more than two monitor periods (%v)", lag, 2*monitorPeriod)
	}
	for _, z := range []string{"a", "c"} {
		if got := zone(z); got != "Normal 0" {
			t.Errorf("zone %s during zone b's outage: %q", z, got)
		}
	}
	worst, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#worst tbody tr")].map(r => r.children[1].textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(worst) < 10 {
		t.Fatalf("heartbeat table has %d rows: %v", len(worst), worst)
	}
	for i, z := range worst[:10] {
		if !strings.HasSuffix(z, "b") {
			t.Errorf("heartbeat table row %d is in zone %q, want the dark zone b first: %v", i, z, worst)
		}
	}
	// Taints follow at 1/s; the chart and the table show them.
	eventually(t, 30*time.Second, "the page counts zone b's taints", func() error {
		tainted, err := chromedp.Run(bctx, chromedp.Evaluate[string](`[...document.querySelectorAll("#zones tbody tr")].find(r => r.dataset.zone.endsWith("b")).querySelector(".tainted").textContent`))
		if err != nil {
			return err
		}
		if tainted == "0" {
			return fmt.Errorf("tainted %s", tainted)
		}
		return nil
	})
	if path := os.Getenv("NODEPLANE_ZONE_VIEW_SCREENSHOT"); path != "" {
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
