// Package lease keeps a node's heartbeat Lease (kube-node-lease/<node>)
// renewed, the cheapest signal the node lifecycle controller watches (SPEC
// KUB-13..KUB-16, P3-1).
//
// A Renewer does one renewal per call to Renew and says when the next one is
// due, so the same code runs in the agent's own loop (Run) and inside
// nodeplane sim's shared scheduler for thousands of nodes. A renewal updates
// the last written object directly — no read first; it reads only when it
// has nothing cached or the update failed.
//
// The package talks to the API only through the small Client interface; it
// does not touch the Node except to read its UID for the owner reference.
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
)

// Namespace holds node heartbeat leases.
const Namespace = corev1.NamespaceNodeLease

// Renewal timing (SPEC KUB-14).
const (
	// DefaultDuration is nodeLeaseDurationSeconds' default.
	DefaultDuration = 40 * time.Second
	// RenewFraction of the duration is the renew interval (40 s → 10 s).
	RenewFraction = 0.25
	// MaxJitter is the largest extra fraction added to each interval.
	MaxJitter = 0.04
	// FirstBackoff is the retry delay after the first failure; it doubles
	// up to MaxBackoff.
	FirstBackoff = 200 * time.Millisecond
	MaxBackoff   = 7 * time.Second
	// maxUpdateTries is how many direct updates of the cached lease are
	// tried (re-reading on conflict) before falling back to get-or-create.
	maxUpdateTries = 5
)

// updateTries is the back-off of the direct updates: maxUpdateTries, at once.
var updateTries = wait.Backoff{Steps: maxUpdateTries, Factor: 1}

// Client is what the renewer needs from the API (a typed
// coordinationv1.LeaseInterface for kube-node-lease satisfies it).
type Client interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// Config configures a Renewer.
type Config struct {
	// NodeName is the lease's name and holderIdentity.
	NodeName string
	// Duration is leaseDurationSeconds (default 40 s); renewals happen every
	// RenewFraction of it, plus up to MaxJitter of it.
	Duration time.Duration
	Client   Client
	// NodeUID returns the Node's UID for the owner reference (SPEC KUB-15);
	// it is called on every renewal, so it should answer from a cache. An
	// error means the Node is not known yet: the lease is then not created
	// this round, but an existing one is still renewed.
	NodeUID func(ctx context.Context) (types.UID, error)
	Clock   clock.Clock
	// Rand jitters the interval (seed it for reproducible runs; nil: a
	// random seed).
	Rand   *rand.Rand
	Logger *slog.Logger
	// OnRepeatedFailure runs after each failed attempt beyond the first
	// (the kubelet closes its connections there, so a half-dead one is not
	// reused). Optional.
	OnRepeatedFailure func()
}

// Renewer renews one node's lease. Renew and Run must not be called
// concurrently with each other.
type Renewer struct {
	cfg Config

	mu       sync.Mutex // guards the fields below against Stats readers
	last     *coordinationv1.Lease
	failures int
	renewals int64
	// failed counts every failed attempt (failures only the consecutive ones).
	failed  int64
	lastErr error
}

// New returns a Renewer; it checks the Config.
func New(cfg Config) (*Renewer, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("lease: NodeName is required")
	}
	if cfg.Client == nil || cfg.NodeUID == nil {
		return nil, errors.New("lease: Client and NodeUID are required")
	}
	if cfg.Duration == 0 {
		cfg.Duration = DefaultDuration
	}
	if cfg.Duration < time.Second {
		return nil, fmt.Errorf("lease: duration %v is below 1s", cfg.Duration)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Renewer{cfg: cfg}, nil
}

// Interval is the nominal time between renewals.
func (r *Renewer) Interval() time.Duration {
	return time.Duration(float64(r.cfg.Duration) * RenewFraction)
}

// Run renews until ctx ends.
func (r *Renewer) Run(ctx context.Context) {
	for {
		next := r.Renew(ctx)
		t := r.cfg.Clock.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// Renew makes one renewal attempt and returns how long to wait before the
// next: the jittered interval after a success, the back-off after a failure.
func (r *Renewer) Renew(ctx context.Context) time.Duration {
	err := r.renew(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastErr = err
	if err == nil {
		r.failures = 0
		r.renewals++
		jitter := r.cfg.Rand.Float64() * MaxJitter
		return time.Duration(float64(r.cfg.Duration) * (RenewFraction + jitter*RenewFraction))
	}
	r.failures++
	r.failed++
	if ctx.Err() == nil {
		r.cfg.Logger.Warn("lease renewal failed", "node", r.cfg.NodeName, "failures", r.failures, "err", err)
	}
	if r.failures > 1 && r.cfg.OnRepeatedFailure != nil {
		r.cfg.OnRepeatedFailure()
	}
	return Backoff(r.failures)
}

// Backoff is the wait after the n-th consecutive failure (n ≥ 1):
// 200 ms, 400 ms, 800 ms … capped at 7 s.
func Backoff(n int) time.Duration {
	d := FirstBackoff
	for i := 1; i < n && d < MaxBackoff; i++ {
		d *= 2
	}
	return min(d, MaxBackoff)
}

// Stats is a snapshot of the renewer's progress.
type Stats struct {
	Renewals int64
	// Failures counts the consecutive failed attempts; FailedTotal all.
	Failures    int
	FailedTotal int64
	LastErr     error
	// RenewTime of the last lease written (zero before the first).
	RenewTime time.Time
}

// Stats returns the renewer's progress.
func (r *Renewer) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Stats{Renewals: r.renewals, Failures: r.failures, FailedTotal: r.failed, LastErr: r.lastErr}
	if r.last != nil && r.last.Spec.RenewTime != nil {
		s.RenewTime = r.last.Spec.RenewTime.Time
	}
	return s
}

// Forget drops the cached lease, so that the next renewal reads the lease
// afresh (or creates it). The agent calls it after registering its Node
// again. It must not be called concurrently with Renew.
func (r *Renewer) Forget() {
	r.remember(nil)
}

func (r *Renewer) cached() *coordinationv1.Lease {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

func (r *Renewer) remember(l *coordinationv1.Lease) {
	r.mu.Lock()
	r.last = l
	r.mu.Unlock()
}

func (r *Renewer) renew(ctx context.Context) error {
	if base := r.cached(); base != nil {
		// Any error but a conflict falls back to get-or-create below.
		err := retry.RetryOnConflict(updateTries, func() error {
			lease, err := r.cfg.Client.Update(ctx, r.renewed(ctx, base), metav1.UpdateOptions{})
			if err == nil {
				r.remember(lease)
				return nil
			}
			if apierrors.IsConflict(err) {
				fresh, gerr := r.cfg.Client.Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
				if gerr != nil {
					return fmt.Errorf("re-read lease: %w", gerr)
				}
				base = fresh
			}
			return err
		})
		if err == nil {
			return nil
		}
	}
	current, err := r.cfg.Client.Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
	switch {
	case err == nil:
		lease, err := r.cfg.Client.Update(ctx, r.renewed(ctx, current), metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("update lease %s/%s: %w", Namespace, r.cfg.NodeName, err)
		}
		r.remember(lease)
		return nil
	case apierrors.IsNotFound(err):
		fresh := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: r.cfg.NodeName, Namespace: Namespace}}
		desired := r.renewed(ctx, fresh)
		if len(desired.OwnerReferences) == 0 {
			// KUB-15: no lease for a Node that does not exist yet.
			return fmt.Errorf("create lease %s/%s: node not registered yet", Namespace, r.cfg.NodeName)
		}
		lease, err := r.cfg.Client.Create(ctx, desired, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create lease %s/%s: %w", Namespace, r.cfg.NodeName, err)
		}
		r.remember(lease)
		return nil
	default:
		return fmt.Errorf("get lease %s/%s: %w", Namespace, r.cfg.NodeName, err)
	}
}

// renewed returns a copy of base with this renewal's spec: holder, duration
// (rewritten each time so config changes propagate), renewTime = now, and
// the owner reference to the Node when the Node is known and the reference
// is missing or names another Node object (one deleted and registered
// again: a lease left pointing at it would be garbage collected).
func (r *Renewer) renewed(ctx context.Context, base *coordinationv1.Lease) *coordinationv1.Lease {
	l := base.DeepCopy()
	holder := r.cfg.NodeName
	seconds := int32(r.cfg.Duration / time.Second)
	now := metav1.NewMicroTime(r.cfg.Clock.Now())
	l.Spec.HolderIdentity = &holder
	l.Spec.LeaseDurationSeconds = &seconds
	l.Spec.RenewTime = &now
	if uid, err := r.cfg.NodeUID(ctx); err == nil && uid != "" {
		l.OwnerReferences = withNodeOwner(l.OwnerReferences, r.cfg.NodeName, uid)
	}
	return l
}

// withNodeOwner returns refs with exactly one Node owner reference: the Node
// named node with the given uid. Other owners are kept.
func withNodeOwner(refs []metav1.OwnerReference, node string, uid types.UID) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, ref := range refs {
		if ref.APIVersion == "v1" && ref.Kind == "Node" {
			if ref.Name == node && ref.UID == uid {
				return refs
			}
			continue
		}
		out = append(out, ref)
	}
	return append(out, metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node, UID: uid})
}
