package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// userKubectl runs kubectl with the kubeconfig at path.
func userKubectl(t *testing.T, bin, kubeconfig string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// TestKubeconfigAndRBAC hands out access as a team would: `nodeplane
// kubeconfig` makes alice (group ops) a kubeconfig; she is refused
// everything but the self reviews until the admin binds roles to ops, and
// `kubectl auth can-i` agrees with what the server then does, before and
// after; `kubectl auth whoami` shows her name and groups.
func TestKubeconfigAndRBAC(t *testing.T) {
	s := startServer(t, serverOptions{apiOnly: true})
	out, err := exec.Command(binary, "kubeconfig", "--data-dir", s.dataDir, "--user", "alice", "--group", "ops", "--ttl", "1h").Output()
	if err != nil {
		t.Fatalf("nodeplane kubeconfig: %v", err)
	}
	aliceCfg := filepath.Join(t.TempDir(), "alice.kubeconfig")
	if err := os.WriteFile(aliceCfg, out, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.Command(binary, "kubeconfig", "--data-dir", s.dataDir, "--user", "system:node:x").Output(); err == nil {
		t.Error("nodeplane kubeconfig issued a node identity")
	}
	admin := kubectlPath(t)
	nodeYAML := writeFile(t, "node.yaml", "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n")
	s.mustKubectl(t, admin, "create", "-f", nodeYAML)

	for version, k := range kubectlVersions(t) {
		t.Run("kubectl "+version, func(t *testing.T) {
			t.Cleanup(func() {
				_, _, _ = s.kubectl(t, admin, "delete", "clusterrolebinding", "ops-view", "ops-cordon", "--ignore-not-found")
				_, _, _ = s.kubectl(t, admin, "delete", "clusterrole", "node-cordoner", "--ignore-not-found")
				_, _, _ = s.kubectl(t, admin, "uncordon", "n1")
			})
			// 1.27 has it too, as an experimental command asking v1alpha1/v1beta1.
			out, errOut, err := userKubectl(t, k, aliceCfg, "auth", "whoami")
			if err != nil || !strings.Contains(out, "alice") || !strings.Contains(out, "ops") {
				t.Errorf("whoami: %v\n%s%s", err, out, errOut)
			}
			if out, _, _ := userKubectl(t, k, aliceCfg, "auth", "can-i", "list", "nodes"); strings.TrimSpace(out) != "no" {
				t.Errorf("can-i list nodes before any binding: %q, want no", out)
			}
			_, errOut, err = userKubectl(t, k, aliceCfg, "get", "nodes")
			if err == nil || !strings.Contains(errOut, `User "alice" cannot list resource "nodes"`) {
				t.Errorf("get nodes before any binding: %v %s", err, errOut)
			}

			s.mustKubectl(t, admin, "create", "clusterrolebinding", "ops-view", "--clusterrole=view", "--group=ops")
			eventually(t, 10*time.Second, "alice lists nodes", func() error {
				_, errOut, err := userKubectl(t, k, aliceCfg, "get", "nodes")
				if err != nil {
					return errFrom(errOut)
				}
				return nil
			})
			if out, _, _ := userKubectl(t, k, aliceCfg, "auth", "can-i", "list", "nodes"); strings.TrimSpace(out) != "yes" {
				t.Errorf("can-i list nodes with view: %q, want yes", out)
			}
			if out, _, _ := userKubectl(t, k, aliceCfg, "auth", "can-i", "patch", "nodes"); strings.TrimSpace(out) != "no" {
				t.Errorf("can-i patch nodes with view: %q, want no", out)
			}
			// kubectl cordon reports the refusal on stderr (its exit code is 0).
			_, errOut, _ = userKubectl(t, k, aliceCfg, "cordon", "n1")
			if !strings.Contains(errOut, `nodes "n1" is forbidden: User "alice" cannot patch resource "nodes"`) {
				t.Errorf("cordon with view: %s, want forbidden", errOut)
			}
			if unschedulable(t, s) {
				t.Error("n1 is cordoned after a refused cordon")
			}

			s.mustKubectl(t, admin, "create", "clusterrole", "node-cordoner", "--verb=get,list,patch", "--resource=nodes")
			s.mustKubectl(t, admin, "create", "clusterrolebinding", "ops-cordon", "--clusterrole=node-cordoner", "--group=ops")
			eventually(t, 10*time.Second, "alice cordons n1", func() error {
				_, errOut, _ := userKubectl(t, k, aliceCfg, "cordon", "n1")
				if !unschedulable(t, s) {
					return errFrom("n1 not cordoned: " + errOut)
				}
				return nil
			})
			if out, _, _ := userKubectl(t, k, aliceCfg, "auth", "can-i", "patch", "nodes"); strings.TrimSpace(out) != "yes" {
				t.Errorf("can-i patch nodes with node-cordoner: %q, want yes", out)
			}
			if out, _, _ := userKubectl(t, k, aliceCfg, "auth", "can-i", "delete", "nodes"); strings.TrimSpace(out) != "no" {
				t.Errorf("can-i delete nodes: %q, want no", out)
			}
			out, errOut, err = userKubectl(t, k, aliceCfg, "auth", "can-i", "--list")
			if err != nil || !regexpLine(out, `^nodes\s+\[\]\s+\[\]\s+\[[^\]]*\bpatch\b[^\]]*\]$`) || !strings.Contains(out, "selfsubjectaccessreviews.authorization.k8s.io") {
				t.Errorf("can-i --list: %v\n%s%s", err, out, errOut)
			}
			// Escalation: alice cannot bind herself to cluster-admin.
			_, errOut, err = userKubectl(t, k, aliceCfg, "create", "clusterrolebinding", "alice-admin", "--clusterrole=cluster-admin", "--user=alice")
			if err == nil || !strings.Contains(errOut, "forbidden") {
				t.Errorf("alice binding cluster-admin: %v %s, want forbidden", err, errOut)
			}
			out = s.mustKubectl(t, admin, "get", "clusterrolebindings", "ops-cordon", "-o", "wide")
			assertColumns(t, out, "NAME ROLE AGE USERS GROUPS SERVICEACCOUNTS")
			if !regexpLine(out, `^ops-cordon\s+ClusterRole/node-cordoner\s+\S+\s+ops$`) {
				t.Errorf("get clusterrolebindings -o wide:\n%s", out)
			}
		})
	}
}

// unschedulable reads n1's spec.unschedulable as the admin.
func unschedulable(t *testing.T, s *serverProc) bool {
	t.Helper()
	n, err := s.client().CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Spec.Unschedulable
}

type kubectlError string

func (e kubectlError) Error() string { return string(e) }

func errFrom(stderr string) error { return kubectlError(strings.TrimSpace(stderr)) }
