package e2e

import (
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// nodeClient is a client with the agent's own identity: the certificate
// and key it got by joining.
func nodeClient(t *testing.T, s *serverProc, a *agentProc) kubernetes.Interface {
	t.Helper()
	pkiDir := filepath.Join(a.dataDir, "pki")
	cfg := &rest.Config{
		Host: s.restConfig().Host,
		TLSClientConfig: rest.TLSClientConfig{
			CAFile:   filepath.Join(pkiDir, "ca.crt"),
			CertFile: filepath.Join(pkiDir, "node.crt"),
			KeyFile:  filepath.Join(pkiDir, "node.key"),
		},
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func apierrorsIsForbidden(err error) bool { return apierrors.IsForbidden(err) }
