package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestImpersonation checks kubectl --as / --as-group against the server:
// the admin may act as anyone, and what is then allowed is the
// impersonated user's (can-i answers for dave, not for the admin); alice
// may not impersonate until a role grants her "impersonate" on that user,
// and never becomes someone she was not granted; nothing she tried as
// another user was carried out.
func TestImpersonation(t *testing.T) {
	s := startServer(t, serverOptions{apiOnly: true})
	out, err := exec.Command(binary, "kubeconfig", "--data-dir", s.dataDir, "--user", "alice", "--group", "ops", "--ttl", "1h").Output()
	if err != nil {
		t.Fatalf("nodeplane kubeconfig: %v", err)
	}
	aliceCfg := filepath.Join(t.TempDir(), "alice.kubeconfig")
	if err := os.WriteFile(aliceCfg, out, 0o600); err != nil {
		t.Fatal(err)
	}
	admin := kubectlPath(t)
	s.mustKubectl(t, admin, "create", "clusterrolebinding", "viewers-view", "--clusterrole=view", "--group=viewers")

	// The admin acting as dave (no bindings) is refused what dave is refused.
	if out, _, _ := s.kubectl(t, admin, "auth", "can-i", "list", "nodes", "--as=dave"); strings.TrimSpace(out) != "no" {
		t.Errorf("can-i list nodes --as=dave: %q, want no", out)
	}
	_, errOut, err := s.kubectl(t, admin, "get", "nodes", "--as=dave")
	if err == nil || !strings.Contains(errOut, `User "dave" cannot list resource "nodes"`) {
		t.Errorf("get nodes --as=dave: %v %s, want dave's 403", err, errOut)
	}
	// ... and allowed what dave's impersonated group is allowed.
	if out, _, _ := s.kubectl(t, admin, "auth", "can-i", "list", "nodes", "--as=dave", "--as-group=viewers"); strings.TrimSpace(out) != "yes" {
		t.Errorf("can-i list nodes --as=dave --as-group=viewers: %q, want yes", out)
	}
	who, _, err := s.kubectl(t, admin, "auth", "whoami", "--as=dave", "--as-group=viewers")
	if err != nil || !strings.Contains(who, "dave") || !strings.Contains(who, "viewers") {
		t.Errorf("whoami --as=dave: %v\n%s", err, who)
	}

	// alice may not impersonate anyone yet.
	_, errOut, err = userKubectl(t, admin, aliceCfg, "create", "namespace", "made-as-admin", "--as=admin", "--as-group=system:masters")
	if err == nil || !strings.Contains(errOut, `User "alice" cannot impersonate resource "users"`) {
		t.Errorf("alice --as=admin: %v %s, want 403 on impersonate users", err, errOut)
	}
	if _, _, err := s.kubectl(t, admin, "get", "namespace", "made-as-admin"); err == nil {
		t.Error("the namespace alice asked for as admin exists")
	}

	// Granted impersonation of user dave only: dave works, dave plus the
	// group system:masters does not.
	s.mustKubectl(t, admin, "create", "clusterrole", "impersonate-dave", "--verb=impersonate", "--resource=users", "--resource-name=dave")
	s.mustKubectl(t, admin, "create", "clusterrolebinding", "ops-impersonate-dave", "--clusterrole=impersonate-dave", "--group=ops")
	eventually(t, 10*time.Second, "alice acts as dave", func() error {
		out, errOut, err := userKubectl(t, admin, aliceCfg, "auth", "whoami", "--as=dave")
		if err != nil || !strings.Contains(out, "dave") {
			return errFrom(out + errOut)
		}
		return nil
	})
	_, errOut, err = userKubectl(t, admin, aliceCfg, "create", "namespace", "made-as-master", "--as=dave", "--as-group=system:masters")
	if err == nil || !strings.Contains(errOut, `User "alice" cannot impersonate resource "groups"`) {
		t.Errorf("alice --as=dave --as-group=system:masters: %v %s, want 403 on impersonate groups", err, errOut)
	}
	if _, _, err := s.kubectl(t, admin, "get", "namespace", "made-as-master"); err == nil {
		t.Error("the namespace alice asked for as dave in system:masters exists")
	}
	// (create, not get: kubectl's discovery reports a refused discovery
	// request as "unknown", with upstream's server as with ours.)
	_, errOut, err = userKubectl(t, admin, aliceCfg, "create", "namespace", "made-as-erin", "--as=erin")
	if err == nil || !strings.Contains(errOut, `User "alice" cannot impersonate resource "users"`) {
		t.Errorf("alice --as=erin: %v %s, want 403", err, errOut)
	}
}
