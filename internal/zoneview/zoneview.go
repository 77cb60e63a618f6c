// Package zoneview is the node lifecycle controller's zones live in the
// browser (`/ui/`): an Aggregator keeps a bounded ring of the controller's
// per-pass summaries (nodelifecycle.Summary, computed once per monitor
// pass whatever the number of readers) and streams each new one to its
// subscribers as server-sent events; the page itself is plain HTML, CSS
// and JavaScript embedded in the binary.
//
// The page's files hold no cluster data and are served to anyone (a
// browser must load the sign-in form before it has a credential); the data
// under APIPrefix is served only behind the server's authentication and
// authorization, like any non-resource path.
package zoneview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/controller/nodelifecycle"
)

const (
	// Prefix is where the page is served.
	Prefix = "/ui/"
	// APIPrefix is where its data is served: ZonesPath (the ring as JSON)
	// and EventsPath (server-sent events: the ring, then each sample).
	APIPrefix  = "/ui/api/"
	ZonesPath  = APIPrefix + "zones"
	EventsPath = APIPrefix + "events"
)

// Config configures an Aggregator. Zero fields take the defaults.
type Config struct {
	// Samples is how many summaries the ring keeps (default 120: ten
	// minutes at the default 5 s monitor period).
	Samples int
	// Buffer is how many samples may wait for one subscriber; a subscriber
	// that falls further behind is disconnected (default 8).
	Buffer int
	// MaxSubscribers bounds the open event streams; more get 429
	// (default 32).
	MaxSubscribers int
	// MaxPerUser bounds one user's open event streams, so that one user
	// cannot take every stream from the others (default 4).
	MaxPerUser int
	// WriteTimeout bounds each write to a subscriber (default 10 s).
	WriteTimeout time.Duration
	// KeepAlive is how often an idle stream gets a comment (default 15 s).
	KeepAlive time.Duration
	Clock     clock.WithTicker
	// Leading reports whether this server runs the node lifecycle
	// controller (nil: always).
	Leading func() bool
}

// Aggregator keeps the recent summaries and fans them out. Record never
// blocks on a reader.
type Aggregator struct {
	cfg Config

	mu    sync.Mutex
	ring  [][]byte // encoded summaries, oldest at start
	start int
	subs  map[*subscriber]struct{}
	// perUser counts the open streams of each user.
	perUser map[string]int
	// dropped counts subscribers disconnected for falling behind.
	dropped int
}

type subscriber struct {
	user string
	ch   chan []byte
	gone chan struct{} // closed when the aggregator drops the subscriber
}

// New returns an Aggregator.
func New(cfg Config) *Aggregator {
	if cfg.Samples <= 0 {
		cfg.Samples = 120
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 8
	}
	if cfg.MaxSubscribers <= 0 {
		cfg.MaxSubscribers = 32
	}
	if cfg.MaxPerUser <= 0 {
		cfg.MaxPerUser = 4
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 15 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Aggregator{cfg: cfg, subs: map[*subscriber]struct{}{}, perUser: map[string]int{}}
}

// Record implements nodelifecycle.SummarySink: it encodes s once, keeps it
// in the ring and queues it for every subscriber, dropping those whose
// queue is full.
func (a *Aggregator) Record(s nodelifecycle.Summary) {
	data, err := json.Marshal(s)
	if err != nil {
		return // a Summary always encodes
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.ring) < a.cfg.Samples {
		a.ring = append(a.ring, data)
	} else {
		a.ring[a.start] = data
		a.start = (a.start + 1) % len(a.ring)
	}
	for sub := range a.subs {
		select {
		case sub.ch <- data:
		default:
			a.dropLocked(sub)
			a.dropped++
		}
	}
}

// Dropped returns how many subscribers were disconnected for falling
// behind.
func (a *Aggregator) Dropped() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dropped
}

// Subscribers returns the number of open event streams.
func (a *Aggregator) Subscribers() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.subs)
}

func (a *Aggregator) dropLocked(sub *subscriber) {
	if _, ok := a.subs[sub]; ok {
		delete(a.subs, sub)
		if a.perUser[sub.user]--; a.perUser[sub.user] <= 0 {
			delete(a.perUser, sub.user)
		}
		close(sub.gone)
	}
}

// snapshotLocked is {"leading":..,"samples":[...]} from the ring.
func (a *Aggregator) snapshotLocked() []byte {
	leading := a.cfg.Leading == nil || a.cfg.Leading()
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"leading":%t,"samples":[`, leading)
	for i := range a.ring {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(a.ring[(a.start+i)%len(a.ring)])
	}
	b.WriteString("]}")
	return b.Bytes()
}

// subscribe registers a subscriber for user and returns it with the
// snapshot it starts from (nil when there are MaxSubscribers already, or
// MaxPerUser of user's).
func (a *Aggregator) subscribe(user string) (*subscriber, []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.subs) >= a.cfg.MaxSubscribers || a.perUser[user] >= a.cfg.MaxPerUser {
		return nil, nil
	}
	sub := &subscriber{user: user, ch: make(chan []byte, a.cfg.Buffer), gone: make(chan struct{})}
	a.subs[sub] = struct{}{}
	a.perUser[user]++
	return sub, a.snapshotLocked()
}

func (a *Aggregator) unsubscribe(sub *subscriber) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropLocked(sub)
}
