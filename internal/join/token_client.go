package join

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// TokenClient requests node bearer tokens for many nodes: it verifies the
// cluster CA once (as a join does, or pins ClientConfig.CAPEM) and sends
// every request over one pooled, verified transport, so that a simulator
// starting thousands of nodes pays for one TLS handshake, not thousands.
// Safe for concurrent use.
type TokenClient struct {
	c         *client
	caPEM     []byte
	transport *http.Transport
}

// NewTokenClient verifies the cluster CA with cfg.Token (cfg.NodeName,
// optional here, only labels the cluster-info request in the server's
// log). Failures that may pass are retried with back-off while ctx lives;
// a cluster CA that does not verify with the token is ErrTokenRejected.
func NewTokenClient(ctx context.Context, cfg ClientConfig) (*TokenClient, error) {
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	if c.Token == "" {
		return nil, errors.New("join: no join token")
	}
	tc := &TokenClient{c: c}
	err = c.retry(ctx, "get cluster info", func() error {
		caPEM, pool, err := c.verifiedCA(ctx)
		if err != nil {
			return err
		}
		tc.caPEM, tc.transport = caPEM, c.transport(c.pinnedTLS(pool))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tc, nil
}

// CAPEM returns the verified cluster CA, for the clients that will use the
// tokens.
func (tc *TokenClient) CAPEM() []byte { return slices.Clone(tc.caPEM) }

// Token returns a node bearer token for nodeName. It expires (see
// TokenExpiry, ServerConfig.NodeTokenTTL): ask for a new one before it
// does. A refusal (wrong secret: ErrTokenRejected; a node name that is not
// a DNS subdomain) is returned at once; failures that may pass are retried
// with back-off while ctx lives.
func (tc *TokenClient) Token(ctx context.Context, nodeName string) (string, error) {
	c := tc.c
	var token string
	err := c.retry(ctx, "request node token", func() error {
		var resp tokenResponse
		if err := c.do(ctx, c.httpClient(tc.transport), http.MethodPost, c.Server+tokenPath, tokenRequest{Token: c.Token, NodeName: nodeName}, &resp); err != nil {
			return c.refusal(err)
		}
		if !bytes.Equal(bytes.TrimSpace([]byte(resp.CA)), bytes.TrimSpace(tc.caPEM)) {
			return fmt.Errorf("join %s: the server answered with another cluster CA than the verified one", c.Server)
		}
		if !strings.HasPrefix(resp.Token, nodeTokenPrefix) {
			return fmt.Errorf("join %s: the server answered with no node token", c.Server)
		}
		token = resp.Token
		return nil
	})
	return token, err
}

// Close closes the pooled connections.
func (tc *TokenClient) Close() { tc.transport.CloseIdleConnections() }

// RequestToken gets one node bearer token for cfg.NodeName and returns it
// with the cluster CA; nothing is written to disk. It is NewTokenClient
// plus one Token call: to get tokens for many nodes, use a TokenClient.
func RequestToken(ctx context.Context, cfg ClientConfig) (token string, caPEM []byte, err error) {
	if cfg.NodeName == "" {
		return "", nil, errors.New("join: node name is required")
	}
	tc, err := NewTokenClient(ctx, cfg)
	if err != nil {
		return "", nil, err
	}
	defer tc.Close()
	token, err = tc.Token(ctx, cfg.NodeName)
	if err != nil {
		return "", nil, err
	}
	return token, tc.CAPEM(), nil
}
