package join

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	randv2 "math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// When RunRenewal renews: at a fraction of the certificate's lifetime
// drawn uniformly from [renewFrom, renewFrom+renewSpread), so that nodes
// that joined together do not all renew together, and well before expiry
// so that a server outage at that moment costs nothing.
const (
	renewFrom   = 0.7
	renewSpread = 0.2
)

// renewalTime is when to renew leaf: fraction of its lifetime after
// NotBefore.
func renewalTime(leaf *x509.Certificate, fraction float64) time.Time {
	lifetime := leaf.NotAfter.Sub(leaf.NotBefore)
	return leaf.NotBefore.Add(time.Duration(fraction * float64(lifetime)))
}

// RunRenewal keeps the identity's certificate fresh until ctx ends. It
// renews (Renew) when 70–90% of the certificate's lifetime has passed
// (jittered by ClientConfig.Rand), retrying failures with exponential
// back-off (1 s doubling up to 5 min). If the certificate has expired
// (the agent was down, or the server unreachable, for too long) it
// re-joins with the join token instead, trusting the pinned CA; without a
// token it keeps retrying and logging, as nothing else can help.
//
// When EnsureServing was called first, it renews the serving certificate
// the same way (RenewServing), alongside.
func (id *Identity) RunRenewal(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	if id.servingLeaf() != nil {
		// Its own source: ClientConfig.Rand is for one goroutine.
		rnd := randv2.New(randv2.NewPCG(id.c.Rand.Uint64(), id.c.Rand.Uint64()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			id.renewLoop(ctx, "serving certificate", rnd, id.servingLeaf, id.RenewServing)
		}()
	}
	id.renewLoop(ctx, "node certificate", id.c.Rand, id.Certificate, id.renewOrRejoin)
}

// renewLoop runs renew whenever 70–90% of current()'s lifetime has
// passed, retrying failures with back-off, until ctx ends.
func (id *Identity) renewLoop(ctx context.Context, what string, rnd *randv2.Rand, current func() *x509.Certificate, renew func(context.Context) error) {
	clk, log := id.c.Clock, id.c.Logger
	for {
		at := renewalTime(current(), renewFrom+renewSpread*rnd.Float64())
		log.Debug("next certificate renewal", "what", what, "node", id.NodeName(), "at", at)
		if d := at.Sub(clk.Now()); d > 0 {
			if sleep(ctx, clk, d) != nil {
				return
			}
		}
		wait := retryInitial
		for {
			err := renew(ctx)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			log.Warn("certificate renewal failed", "what", what, "node", id.NodeName(), "retryIn", wait, "err", err)
			if sleep(ctx, clk, wait) != nil {
				return
			}
			wait = min(2*wait, retryMax)
		}
	}
}

// renewOrRejoin renews a valid certificate, or re-joins with the token
// when it has expired.
func (id *Identity) renewOrRejoin(ctx context.Context) error {
	notAfter := id.Certificate().NotAfter
	if id.c.Clock.Now().Before(notAfter) {
		return id.Renew(ctx)
	}
	if id.c.Token == "" {
		return fmt.Errorf("node certificate expired at %s and there is no join token to re-join with", notAfter.UTC().Format(time.RFC3339))
	}
	return id.rejoin(ctx)
}

// Renew replaces the certificate now: it makes a new key, has the server
// sign it, authenticating with the current certificate, stores the result
// and retires the connections made with the old one (see RESTConfig). The
// certificate must still be valid.
func (id *Identity) Renew(ctx context.Context) error {
	id.renewMu.Lock()
	defer id.renewMu.Unlock()
	c := id.c
	key, err := newKey()
	if err != nil {
		return err
	}
	csr, err := newCSR(c.NodeName, key)
	if err != nil {
		return err
	}
	var resp certificateResponse
	if err := c.do(ctx, c.httpClient(identityTransport{id}), http.MethodPost, c.Server+renewPath, renewRequest{CSR: string(csr)}, &resp); err != nil {
		return fmt.Errorf("renew node certificate at %s: %w", c.Server, err)
	}
	certPEM := []byte(resp.Certificate)
	if err := c.checkIssued(certPEM, []byte(resp.CA), id.caPEM, id.pool, key.Public()); err != nil {
		return err
	}
	creds, err := newCredentials(id.caPEM, certPEM, key)
	if err != nil {
		return fmt.Errorf("renew node certificate: %w", err)
	}
	if err := id.replace(creds); err != nil {
		return err
	}
	c.Logger.Info("node certificate renewed", "node", c.NodeName, "expires", creds.cert.Leaf.NotAfter)
	return nil
}

// rejoin gets a new certificate with the join token, trusting the pinned
// CA.
func (id *Identity) rejoin(ctx context.Context) error {
	id.renewMu.Lock()
	defer id.renewMu.Unlock()
	if id.c.Token == "" {
		return errors.New("join: no join token")
	}
	creds, err := id.c.joinWithCA(ctx, id.caPEM, id.pool)
	if err != nil {
		return err
	}
	if err := id.replace(creds); err != nil {
		return err
	}
	id.c.Logger.Info("node re-joined after its certificate expired", "node", id.c.NodeName, "expires", creds.cert.Leaf.NotAfter)
	return nil
}
