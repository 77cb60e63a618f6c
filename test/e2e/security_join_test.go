package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// joinTokenListing is the part of `nodeplane token list -o json` the test
// reads.
type joinTokenListing struct {
	Items []struct {
		ID          string     `json:"id"`
		Token       string     `json:"token"`
		Expires     *time.Time `json:"expires"`
		Expired     bool       `json:"expired"`
		Description string     `json:"description"`
	} `json:"items"`
}

// tokenCmd runs `nodeplane token ARGS` against s as its administrator.
func tokenCmd(t *testing.T, s *serverProc, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"token", "--kubeconfig", s.kubeconfig()}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func mustTokenCmd(t *testing.T, s *serverProc, args ...string) string {
	t.Helper()
	out, errOut, err := tokenCmd(t, s, args...)
	if err != nil {
		t.Fatalf("nodeplane token %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

var joinTokenRE = regexp.MustCompile(`^([a-z0-9]{6})\.[a-z0-9]{16}$`)

// createJoinToken runs `token create` and returns the token and its id,
// with the token written to a file for --token-file.
func createJoinToken(t *testing.T, s *serverProc, args ...string) (token, id, file string) {
	t.Helper()
	token = strings.TrimSpace(mustTokenCmd(t, s, append([]string{"create"}, args...)...))
	m := joinTokenRE.FindStringSubmatch(token)
	if m == nil {
		t.Fatalf("token create printed %q, want <6 of [a-z0-9]>.<16 of [a-z0-9]>", token)
	}
	file = filepath.Join(t.TempDir(), "join-token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return token, m[1], file
}

func listJoinTokens(t *testing.T, s *serverProc) joinTokenListing {
	t.Helper()
	var l joinTokenListing
	if err := json.Unmarshal([]byte(mustTokenCmd(t, s, "list", "-o", "json")), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// expectRefusedJoin starts an agent that must fail to join: it exits with
// an error whose output contains want, registers no Node and stores no
// identity.
func expectRefusedJoin(t *testing.T, s *serverProc, o agentOptions, want string) *agentProc {
	t.Helper()
	a := startAgent(t, s, o)
	err, exited := a.exited(60 * time.Second)
	if !exited || err == nil {
		t.Fatalf("agent %s joined despite the refusal (exited %v, err %v):\n%s", o.name, exited, err, a.logs())
	}
	if !strings.Contains(a.logs(), want) {
		t.Errorf("agent output does not say %q:\n%s", want, a.logs())
	}
	if _, err := os.Stat(filepath.Join(a.dataDir, "pki", "node.crt")); err == nil {
		t.Errorf("a refused agent stored a node certificate")
	}
	return a
}

// TestSecurityJoin: join tokens expire and can be deleted, and a join
// secret cannot take over a node that has a live identity (issue 10,
// "beyond upstream: joining").
func TestSecurityJoin(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{})
	cs := s.client()
	nodeExists := func(name string) func() error {
		return func() error {
			_, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			return err
		}
	}

	t.Run("a created token joins an agent, is listed without its secret, and is refused once deleted", func(t *testing.T) {
		token, id, file := createJoinToken(t, s, "--ttl", "1h", "--description", "e2e rack 1")
		startAgent(t, s, agentOptions{name: "tok-1", config: agentTestConfig, tokenFile: file})
		eventually(t, 60*time.Second, "node tok-1 joined with a created token", nodeExists("tok-1"))

		table := mustTokenCmd(t, s, "list")
		secret := strings.TrimPrefix(token, id+".")
		if strings.Contains(table, secret) {
			t.Errorf("token list shows the secret:\n%s", table)
		}
		if !strings.Contains(table, id) || !strings.Contains(table, "e2e rack 1") {
			t.Errorf("token list does not show token %s with its description:\n%s", id, table)
		}
		var found bool
		for _, it := range listJoinTokens(t, s).Items {
			if it.Token != "" {
				t.Errorf("token list -o json carries a token for %s", it.ID)
			}
			if it.ID == id {
				found = true
				if it.Expires == nil || it.Expired || it.Expires.Before(time.Now().Add(50*time.Minute)) {
					t.Errorf("token %s: expires %v, expired %v; want about an hour from now", id, it.Expires, it.Expired)
				}
			}
		}
		if !found {
			t.Fatalf("token %s not in the JSON list", id)
		}

		out := mustTokenCmd(t, s, "delete", id)
		if !strings.Contains(out, id) {
			t.Errorf("token delete said %q", out)
		}
		for _, it := range listJoinTokens(t, s).Items {
			if it.ID == id {
				t.Errorf("token %s still listed after delete", id)
			}
		}
		expectRefusedJoin(t, s, agentOptions{name: "tok-2", config: agentTestConfig, tokenFile: file}, "join token rejected")
		if err := nodeExists("tok-2")(); !apierrors.IsNotFound(err) {
			t.Errorf("node tok-2 registered with a deleted token (get: %v)", err)
		}
		if _, errOut, err := tokenCmd(t, s, "delete", id); err == nil || !strings.Contains(errOut, "not found") {
			t.Errorf("deleting a deleted token: err %v, stderr %q; want not found", err, errOut)
		}
	})

	t.Run("an expired token is refused with a clear message", func(t *testing.T) {
		_, id, file := createJoinToken(t, s, "--ttl", "2s")
		eventually(t, 30*time.Second, "token list shows the token expired", func() error {
			for _, it := range listJoinTokens(t, s).Items {
				if it.ID == id {
					if it.Expired {
						return nil
					}
					return fmt.Errorf("token %s not expired yet (expires %v)", id, it.Expires)
				}
			}
			return fmt.Errorf("token %s not listed", id)
		})
		if table := mustTokenCmd(t, s, "list"); !strings.Contains(table, "expired") {
			t.Errorf("token list does not say the token expired:\n%s", table)
		}
		expectRefusedJoin(t, s, agentOptions{name: "late", config: agentTestConfig, tokenFile: file}, "join token expired")
		if err := nodeExists("late")(); !apierrors.IsNotFound(err) {
			t.Errorf("node late registered with an expired token (get: %v)", err)
		}
	})

	t.Run("the node-token written at first start still joins and cannot be deleted through the API", func(t *testing.T) {
		startAgent(t, s, agentOptions{name: "legacy", config: agentTestConfig})
		eventually(t, 60*time.Second, "node legacy joined with the node-token", nodeExists("legacy"))
		if _, errOut, err := tokenCmd(t, s, "delete", "node-token"); err == nil || !strings.Contains(errOut, "restart the server") {
			t.Errorf("deleting the node-token: err %v, stderr %q; want a refusal that says how to rotate it", err, errOut)
		}
	})

	t.Run("a join secret cannot take over a live node until the admin deletes the Node", func(t *testing.T) {
		a := startAgent(t, s, agentOptions{name: "n1", config: agentTestConfig})
		var before *corev1.Node
		eventually(t, 60*time.Second, "node n1 joined", func() (err error) {
			before, err = cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			return err
		})
		leaseRenewedAfter := func(after time.Time) func() error {
			return func() error {
				l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "n1", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if l.Spec.RenewTime == nil || !l.Spec.RenewTime.After(after) {
					return fmt.Errorf("lease renewed at %v, want after %v", l.Spec.RenewTime, after)
				}
				if h := l.Spec.HolderIdentity; h == nil || *h != "n1" {
					return fmt.Errorf("lease holder %v, want n1", h)
				}
				return nil
			}
		}
		eventually(t, 30*time.Second, "agent A renews n1's lease", leaseRenewedAfter(time.Now()))
		certA, err := os.ReadFile(filepath.Join(a.dataDir, "pki", "node.crt"))
		if err != nil {
			t.Fatal(err)
		}

		// A valid join secret (a freshly created token) and a fresh data dir:
		// a new key for a node that is alive.
		_, _, file := createJoinToken(t, s, "--description", "leaked")
		bDir := filepath.Join(t.TempDir(), "agent-intruder")
		b := expectRefusedJoin(t, s, agentOptions{name: "n1", dataDir: bDir, config: agentTestConfig, tokenFile: file},
			`node "n1" is already joined with a live identity; delete the Node to re-join it`)

		after, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if after.UID != before.UID {
			t.Errorf("node n1 was replaced (uid %s → %s)", before.UID, after.UID)
		}
		eventually(t, 30*time.Second, "agent A still renews n1's lease after the refusal", leaseRenewedAfter(time.Now()))
		if got, _ := os.ReadFile(filepath.Join(a.dataDir, "pki", "node.crt")); !bytes.Equal(got, certA) {
			t.Errorf("agent A's certificate changed")
		}

		// The admin hands the name over: stop A, delete the Node.
		a.stop()
		s.mustKubectl(t, kubectlPath(t), "delete", "node", "n1")
		b.start()
		eventually(t, 60*time.Second, "the second agent joins as n1 once the Node is deleted", func() error {
			n, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if n.UID == before.UID {
				return fmt.Errorf("still the old node n1")
			}
			return nil
		})
		certB, err := os.ReadFile(filepath.Join(bDir, "pki", "node.crt"))
		if err != nil {
			t.Fatalf("the second agent stored no certificate: %v\n%s", err, b.logs())
		}
		if bytes.Equal(certA, certB) {
			t.Errorf("the second agent has A's certificate")
		}
	})
}
