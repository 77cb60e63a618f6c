package e2e

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// Issue 18, overload: client-go's HTTP/2 transport opens another
// connection when every connection it has runs as many requests as the
// server allows. A server slowed down by overload makes requests pile up
// on their connections, so a low limit turned overload into new
// connections and TLS handshakes, which took the CPU that was left
// (docs/performance.md, "Past capacity"). The server announces 1,000
// streams per connection (--http2-max-streams-per-connection), with either
// HTTP/2 server.
//
// Observed: 400 watches opened one after the other through one client-go
// clientset, all held open, and the connections its transport dialed. With
// the limit at 250 the same client needs two: the count can fail.
func TestManyRequestsShareOneConnection(t *testing.T) {
	const watches = 400
	tests := []struct {
		name      string
		args      []string
		wantDials int32
	}{
		{name: "with the default limit 400 watches of one client share one connection", wantDials: 1},
		{name: "with Go's HTTP/2 server and the default limit they share one too", args: []string{"--http2-server=go"}, wantDials: 1},
		{name: "with the limit at 250 the client needs a second connection", args: []string{"--http2-max-streams-per-connection=250"}, wantDials: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startServer(t, serverOptions{apiOnly: true, args: tt.args})
			cfg := s.restConfig()
			cfg.QPS, cfg.Burst = 1e6, 1e6
			var dials atomic.Int32
			var d net.Dialer
			cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				return d.DialContext(ctx, network, addr)
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			open := make([]watch.Interface, 0, watches)
			defer func() {
				for _, w := range open {
					w.Stop()
				}
			}()
			for i := range watches {
				w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatalf("watch %d: %v", i, err)
				}
				open = append(open, w)
			}
			// Every watch is still open: none ended (an ended watch would
			// free its stream and hide a missing connection).
			for i, w := range open {
				select {
				case ev, ok := <-w.ResultChan():
					t.Fatalf("watch %d ended or got an event before any write: %v %v", i, ev, ok)
				default:
				}
			}
			if got := dials.Load(); got != tt.wantDials {
				t.Fatalf("%d open watches took %d connections, want %d", watches, got, tt.wantDials)
			}
		})
	}
}
