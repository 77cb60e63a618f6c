package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ExternalConfig says how to reach an etcd cluster run outside nodeplane
// (the server's --etcd-servers and --etcd-*file flags).
type ExternalConfig struct {
	// Endpoints are the members' client URLs (--etcd-servers), e.g.
	// "https://10.0.0.1:2379". Required.
	Endpoints []string
	// CAFile (--etcd-cafile) verifies the members' serving certificates;
	// empty means the system roots.
	CAFile string
	// CertFile and KeyFile (--etcd-certfile, --etcd-keyfile) are the client
	// certificate presented to etcd. Both or neither.
	CertFile, KeyFile string
	// DialTimeout bounds Dial's first request to the cluster. Default 5s.
	DialTimeout time.Duration
	// Logger receives the etcd client's log entries at warn and above, with
	// component=etcd-client. Default slog.Default().
	Logger *slog.Logger
}

// Dial connects to an external etcd cluster and checks that it answers a
// linearizable read within DialTimeout. TLS is used when any file is given
// or an endpoint is https.
func Dial(ctx context.Context, cfg ExternalConfig) (*clientv3.Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("--etcd-servers: no endpoints")
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	tlsConfig, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		TLS:         tlsConfig,
		DialTimeout: cfg.DialTimeout,
		// Like kube-apiserver: find a dead connection within ~40s even when
		// no request is in flight.
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: 10 * time.Second,
		PermitWithoutStream:  true,
		Logger:               newZapLogger(cfg.Logger.With("component", "etcd-client"), slog.LevelWarn, nil),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	probeCtx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := client.Get(probeCtx, revisionProbeKey, clientv3.WithCountOnly()); err != nil {
		_ = client.Close() // the probe error says what matters
		err = annotate("reach etcd at "+strings.Join(cfg.Endpoints, ","), err)
		if tlsConfig != nil {
			// gRPC reports a refused handshake only as a timeout; say why.
			if herr := handshakeError(cfg.Endpoints, tlsConfig, cfg.DialTimeout); herr != nil {
				err = fmt.Errorf("%w (%v)", err, herr)
			}
		}
		return nil, err
	}
	return client, nil
}

// handshakeError dials the endpoints with TLS and returns the first
// handshake failure (wrong CA, a client certificate the server refuses),
// or nil when a handshake succeeds or no endpoint answers at all.
func handshakeError(endpoints []string, tc *tls.Config, timeout time.Duration) error {
	for _, ep := range endpoints {
		host := strings.TrimPrefix(strings.TrimPrefix(ep, "https://"), "http://")
		host, _, _ = strings.Cut(host, "/")
		cfg := tc.Clone()
		// TLS 1.2 makes a refused client certificate fail the handshake
		// itself rather than the first read.
		cfg.MaxVersion = tls.VersionTLS12
		if h, _, err := net.SplitHostPort(host); err == nil {
			cfg.ServerName = h
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", host, cfg)
		if err == nil {
			conn.Close()
			return nil
		}
		var netErr net.Error
		if errors.As(err, &netErr) || strings.Contains(err.Error(), "connection refused") {
			continue
		}
		return fmt.Errorf("TLS handshake with %s: %w", host, err)
	}
	return nil
}

// tlsConfig builds the client TLS configuration, or nil for plain http.
// Errors name the flag whose file is at fault.
func (c ExternalConfig) tlsConfig() (*tls.Config, error) {
	https := false
	for _, ep := range c.Endpoints {
		https = https || strings.HasPrefix(ep, "https://")
	}
	if c.CAFile == "" && c.CertFile == "" && c.KeyFile == "" && !https {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cafile: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--etcd-cafile %s: no PEM certificate found", c.CAFile)
		}
	}
	switch {
	case c.CertFile == "" && c.KeyFile == "":
	case c.CertFile == "":
		return nil, fmt.Errorf("--etcd-keyfile %s given without --etcd-certfile", c.KeyFile)
	case c.KeyFile == "":
		return nil, fmt.Errorf("--etcd-certfile %s given without --etcd-keyfile", c.CertFile)
	default:
		certPEM, err := os.ReadFile(c.CertFile)
		if err != nil {
			return nil, fmt.Errorf("--etcd-certfile: %w", err)
		}
		keyPEM, err := os.ReadFile(c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--etcd-keyfile: %w", err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("--etcd-certfile %s and --etcd-keyfile %s: %w", c.CertFile, c.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
