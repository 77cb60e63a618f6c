package authn

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// BenchmarkClientCertAuthenticate: one request's client certificate
// authentication on an open connection (the same certificate every time),
// building the User each time (the zero ClientCert) or sharing the
// certificate's User (NewClientCert).
//
//	go test ./internal/apiserver/authn/ -run '^$' -bench ClientCert -benchmem
func BenchmarkClientCertAuthenticate(b *testing.B) {
	clk := clocktesting.NewFakePassiveClock(certEpoch.Add(time.Hour))
	for _, bc := range []struct {
		name string
		cc   ClientCert
	}{{"per request", ClientCert{Clock: clk}}, {"per certificate", NewClientCert(clk)}} {
		b.Run(bc.name, func(b *testing.B) {
			r := requestWith(nodeCert("a"))
			for b.Loop() {
				if _, ok, err := bc.cc.Authenticate(r); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
