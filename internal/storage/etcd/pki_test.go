package etcd

import (
	"testing"

	"github.com/nodeplane/nodeplane/internal/pki/pkitest"
)

// testPKI names the PEM files of a throwaway CA, a serving certificate for
// 127.0.0.1 and a client certificate, all signed by the CA.
type testPKI struct {
	ca                    string
	serverCert, serverKey string
	clientCert, clientKey string
}

func writeTestPKI(t *testing.T) testPKI {
	t.Helper()
	f := pkitest.Write(t, t.TempDir())
	return testPKI{ca: f.CA, serverCert: f.ServerCert, serverKey: f.ServerKey, clientCert: f.ClientCert, clientKey: f.ClientKey}
}
