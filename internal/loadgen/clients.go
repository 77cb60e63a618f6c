package loadgen

import (
	"fmt"
	"net"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ProtobufContentType is the wire format agents and controllers use.
const ProtobufContentType = "application/vnd.kubernetes.protobuf"

// NewClients returns n typed clients of base, each with its own transport —
// so its own TCP+TLS connection and HTTP/2 stream budget — as n separate
// agents would have. They speak protobuf and have no client-side rate
// limit: the load generator paces itself.
//
// client-go caches transports by TLS configuration, so n copies of one
// rest.Config would share one connection; a distinct Dial function per
// client makes each configuration uncacheable by identity.
func NewClients(base *rest.Config, n int) ([]kubernetes.Interface, error) {
	out := make([]kubernetes.Interface, 0, n)
	for i := range n {
		cfg := rest.CopyConfig(base)
		cfg.ContentType = ProtobufContentType
		cfg.AcceptContentTypes = ProtobufContentType + ",application/json"
		cfg.QPS = -1 // no client-side rate limiter
		cfg.Burst = 0
		cfg.UserAgent = fmt.Sprintf("nodeplane-load/%d", i)
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		cfg.Dial = d.DialContext
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("client %d: %w", i, err)
		}
		out = append(out, cs)
	}
	return out, nil
}
