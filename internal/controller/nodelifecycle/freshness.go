package nodelifecycle

import (
	"strconv"
	"time"
)

// Freshness decides whether the controller's view of node heartbeats is
// current (SPEC P3-2), from two signals the shell feeds it:
//
//   - probes: every monitor pass the shell asks storage for the current
//     resourceVersion of leases with a quorum read (a list with limit 1).
//     A failed or slow probe means storage is unreachable or stalled;
//   - the lease informer's last seen resourceVersion. If it stays behind a
//     revision storage reported more than MaxLag ago, the watch is lagging.
//
// The view is fresh when the last probe succeeded no longer than MaxProbeAge
// ago and the informer has caught up with every probe older than MaxLag.
// It is pure: the caller passes every time in.
type Freshness struct {
	// MaxProbeAge: a view whose last successful probe is older is stale
	// (storage unreachable). Typically two monitor periods.
	MaxProbeAge time.Duration
	// MaxLag: how long the informer may take to see a revision storage
	// already reported. Typically one monitor period.
	MaxLag time.Duration

	lastOK  time.Time
	pending []probe // successful probes the informer has not reached yet
	seen    uint64  // informer's resourceVersion
}

type probe struct {
	at time.Time
	rv uint64
}

// Probe records a storage probe made at `at`: the resourceVersion it
// returned, or the error.
func (f *Freshness) Probe(at time.Time, resourceVersion string, err error) {
	if err != nil {
		return
	}
	rv, perr := strconv.ParseUint(resourceVersion, 10, 64)
	if perr != nil {
		return
	}
	f.lastOK = at
	if rv > f.seen {
		f.pending = append(f.pending, probe{at: at, rv: rv})
	}
}

// Seen records the informer's last seen resourceVersion.
func (f *Freshness) Seen(resourceVersion string) {
	rv, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil || rv <= f.seen {
		return
	}
	f.seen = rv
	keep := f.pending[:0]
	for _, p := range f.pending {
		if p.rv > rv {
			keep = append(keep, p)
		}
	}
	f.pending = keep
}

// Fresh reports whether the view is current at now, and if not, why.
func (f *Freshness) Fresh(now time.Time) (bool, string) {
	if f.lastOK.IsZero() || now.Sub(f.lastOK) > f.MaxProbeAge {
		return false, "storage did not answer a probe recently"
	}
	for _, p := range f.pending {
		if now.Sub(p.at) > f.MaxLag {
			return false, "the lease watch lags behind storage"
		}
	}
	return true, ""
}
