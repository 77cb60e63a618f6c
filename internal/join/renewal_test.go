package join_test

import (
	"context"
	"crypto/ecdsa"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/join"
)

func TestRenewReplacesTheCertificateForTheNextHandshake(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	cfg := f.clientConfig(t, "worker-1")
	id, err := join.Ensure(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	old := id.Certificate()
	hc := restHTTPClient(t, id.RESTConfig()) // built once, used across the renewal
	if got := whoamiWith(t, hc, f.url).Serial; got != old.SerialNumber.String() {
		t.Fatalf("before renewal the server sees certificate %s, want %s", got, old.SerialNumber)
	}

	f.clock.Step(30 * 24 * time.Hour)
	if err := id.Renew(context.Background()); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	renewed := id.Certificate()
	if !renewed.NotAfter.After(old.NotAfter) {
		t.Errorf("renewed NotAfter %s is not after the old %s", renewed.NotAfter, old.NotAfter)
	}
	if renewed.Subject.CommonName != "system:node:worker-1" {
		t.Errorf("renewed certificate is for %s", renewed.Subject)
	}
	if renewed.PublicKey.(*ecdsa.PublicKey).Equal(old.PublicKey) {
		t.Error("renewal kept the old key, want a new one")
	}
	a := whoamiWith(t, hc, f.url)
	if a.Serial != renewed.SerialNumber.String() || a.User.Name != "system:node:worker-1" {
		t.Errorf("after renewal the server sees %s as %s, want the renewed certificate %s", a.User.Name, a.Serial, renewed.SerialNumber)
	}
	if got := f.count("v1/renew"); got != 1 {
		t.Errorf("renew requests = %d, want 1", got)
	}

	// The renewed identity is what a restarted agent finds.
	restarted, err := join.Ensure(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if restarted.Certificate().SerialNumber.Cmp(renewed.SerialNumber) != 0 {
		t.Error("a restarted agent does not find the renewed certificate")
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, join.PKIDir, "node.key.next")); !os.IsNotExist(err) {
		t.Errorf("a pending key file is left behind: %v", err)
	}
}

func TestRunRenewal(t *testing.T) {
	// A 10-hour certificate (11 hours with the server's 1-hour backdating)
	// is renewed at 70–90% of its lifetime.
	const ttl = 10 * time.Hour
	const seed = 42
	tests := []struct {
		name string
		// unavailableRenewals: how many renew requests fail with 503.
		unavailableRenewals int
		// expire: let the certificate expire before the renewal is due
		// (the agent was suspended); it must re-join with the token.
		expire bool
	}{
		{name: "the certificate is renewed at the jittered time"},
		{name: "a failed renewal is retried after a back-off", unavailableRenewals: 2},
		{name: "an expired certificate is replaced by a join with the token", expire: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{certTTL: ttl})
			cfg := f.clientConfig(t, "worker-1")
			cfg.Rand = rand.New(rand.NewPCG(seed, seed))
			id, err := join.Ensure(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			old := id.Certificate()
			lifetime := old.NotAfter.Sub(old.NotBefore)
			// The same draw RunRenewal makes.
			fraction := 0.7 + 0.2*rand.New(rand.NewPCG(seed, seed)).Float64()
			due := old.NotBefore.Add(time.Duration(fraction * float64(lifetime)))
			if due.Before(old.NotBefore.Add(lifetime*7/10)) || !due.Before(old.NotBefore.Add(lifetime*9/10)) {
				t.Fatalf("renewal due at %s, outside 70–90%% of the lifetime", due)
			}
			f.failNext("v1/renew", tt.unavailableRenewals)

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				id.RunRenewal(ctx)
			}()
			t.Cleanup(func() { cancel(); <-done })

			eventually(t, "RunRenewal to wait for the renewal time", f.clock.HasWaiters)
			if tt.expire {
				f.clock.SetTime(old.NotAfter.Add(time.Minute))
			} else {
				f.clock.SetTime(due.Add(-time.Second))
				if !f.clock.HasWaiters() || id.Certificate() != old {
					t.Fatal("renewed before the due time")
				}
				f.clock.Step(time.Second)
			}
			for i, wait := 0, time.Second; i < tt.unavailableRenewals; i, wait = i+1, 2*wait {
				eventually(t, "the failed renewal to be retried", func() bool { return f.count("v1/renew") == i+1 && f.clock.HasWaiters() })
				f.clock.Step(wait)
			}
			eventually(t, "the certificate to be replaced", func() bool { return id.Certificate() != old })

			renewed := id.Certificate()
			if want := f.clock.Now().Add(ttl).Truncate(time.Second); !renewed.NotAfter.Equal(want) {
				t.Errorf("new NotAfter = %s, want %s", renewed.NotAfter, want)
			}
			wantRenew, wantJoin := tt.unavailableRenewals+1, 1
			if tt.expire {
				wantRenew, wantJoin = 0, 2
			}
			if got := f.count("v1/renew"); got != wantRenew {
				t.Errorf("renew requests = %d, want %d", got, wantRenew)
			}
			if got := f.count("v1/certificate"); got != wantJoin {
				t.Errorf("certificate (join) requests = %d, want %d", got, wantJoin)
			}
			if a := whoamiWith(t, restHTTPClient(t, id.RESTConfig()), f.url); a.Serial != renewed.SerialNumber.String() {
				t.Errorf("server sees certificate %s, want the new %s", a.Serial, renewed.SerialNumber)
			}
			// The next renewal is scheduled on the new certificate.
			eventually(t, "RunRenewal to wait for the next renewal", f.clock.HasWaiters)
		})
	}
}

func TestAnInterruptedRenewalIsCompletedOnLoad(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	cfg := f.clientConfig(t, "worker-1")
	id, err := join.Ensure(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cfg.DataDir, join.PKIDir)
	oldKey, err := os.ReadFile(filepath.Join(dir, join.NodeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	newKey, err := os.ReadFile(filepath.Join(dir, join.NodeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	// The state a crash leaves between writing the renewed certificate and
	// moving its key into place.
	if err := os.WriteFile(filepath.Join(dir, "node.key.next"), newKey, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, join.NodeKeyFile), oldKey, 0o600); err != nil {
		t.Fatal(err)
	}

	cfg.Token = "" // no way to re-join: the renewed identity must be recovered
	restarted, err := join.Ensure(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Ensure after an interrupted renewal: %v", err)
	}
	if restarted.Certificate().SerialNumber.Cmp(id.Certificate().SerialNumber) != 0 {
		t.Error("the renewed certificate was not recovered")
	}
	if got, _ := os.ReadFile(filepath.Join(dir, join.NodeKeyFile)); string(got) != string(newKey) {
		t.Error("node.key is not the renewed key")
	}
	if _, err := os.Stat(filepath.Join(dir, "node.key.next")); !os.IsNotExist(err) {
		t.Errorf("node.key.next is left behind: %v", err)
	}
}
