package agent

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// presenceHarness records what a presence does: how many heartbeat runs are
// live, how often it registered, and what it logged.
type presenceHarness struct {
	p        *presence
	log      *bytes.Buffer
	mu       sync.Mutex
	live     int // heartbeat runs in progress
	started  int // heartbeat runs started
	regs     int
	adopted  []types.UID
	register chan *corev1.Node // answers Register
}

func nodeWithUID(uid types.UID) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: uid}}
}

func newPresenceHarness(t *testing.T) *presenceHarness {
	h := &presenceHarness{log: &bytes.Buffer{}, register: make(chan *corev1.Node)}
	h.p = newPresence(presenceConfig{
		NodeName: "n1",
		Register: func(ctx context.Context) (*corev1.Node, error) {
			h.mu.Lock()
			h.regs++
			h.mu.Unlock()
			select {
			case n := <-h.register:
				return n, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
		Heartbeats: func(ctx context.Context) {
			h.mu.Lock()
			h.live++
			h.started++
			h.mu.Unlock()
			<-ctx.Done()
			h.mu.Lock()
			h.live--
			h.mu.Unlock()
		},
		Registered: func(n *corev1.Node) {
			h.mu.Lock()
			h.adopted = append(h.adopted, n.UID)
			h.mu.Unlock()
		},
		Logger: slog.New(slog.NewTextHandler(h.log, nil)),
	}, nodeWithUID("uid-1"))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { h.p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

// state returns live heartbeat runs, runs started and registrations.
func (h *presenceHarness) state() (live, started, regs int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.live, h.started, h.regs
}

func TestPresence(t *testing.T) {
	tests := []struct {
		name string
		// report tells the presence what the watch saw.
		report func(p *presence)
		// deleted is whether that means the registered Node is gone.
		deleted bool
	}{
		{"the watch seeing the registered node deleted stops heartbeats and registers it again",
			func(p *presence) { p.Deleted(nodeWithUID("uid-1")) }, true},
		{"a relist without the node stops heartbeats and registers it again",
			func(p *presence) { p.Listed(nil) }, true},
		{"a relist that still has the node changes nothing",
			func(p *presence) { p.Listed([]*corev1.Node{nodeWithUID("uid-1")}) }, false},
		{"the deletion of an older node object changes nothing",
			func(p *presence) { p.Deleted(nodeWithUID("uid-0")) }, false},
		{"the deletion of another node changes nothing",
			func(p *presence) {
				n := nodeWithUID("uid-1")
				n.Name = "n2"
				p.Deleted(n)
			}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newPresenceHarness(t)
				synctest.Wait()
				if live, _, _ := h.state(); live != 1 {
					t.Fatalf("%d heartbeat runs at start, want 1", live)
				}
				tt.report(h.p)
				synctest.Wait()
				live, started, regs := h.state()
				if !tt.deleted {
					if live != 1 || started != 1 || regs != 0 {
						t.Errorf("live %d, started %d, registrations %d; want 1, 1, 0", live, started, regs)
					}
					if h.log.Len() != 0 {
						t.Errorf("logged %q, want nothing", h.log.String())
					}
					return
				}
				// Heartbeats are stopped while the Node is being registered.
				if live != 0 || regs != 1 {
					t.Fatalf("while registering: live %d, registrations %d; want 0, 1", live, regs)
				}
				if !strings.Contains(h.log.String(), `level=ERROR msg="node was deleted from the cluster`) ||
					!strings.Contains(h.log.String(), "node=n1 uid=uid-1") {
					t.Errorf("log does not name the deleted node:\n%s", h.log.String())
				}
				// A late report about the deleted Node, while registering,
				// is not taken for a deletion of the new one.
				h.p.Deleted(nodeWithUID("uid-1"))
				h.register <- nodeWithUID("uid-2")
				synctest.Wait()
				live, started, regs = h.state()
				if live != 1 || started != 2 || regs != 1 {
					t.Errorf("after registering: live %d, started %d, registrations %d; want 1, 2, 1", live, started, regs)
				}
				if len(h.adopted) != 1 || h.adopted[0] != "uid-2" {
					t.Errorf("adopted %v, want [uid-2]", h.adopted)
				}
				if !strings.Contains(h.log.String(), `msg="node registered again`) {
					t.Errorf("log does not say the node was registered again:\n%s", h.log.String())
				}
				// The new Node's deletion is news again.
				h.p.Deleted(nodeWithUID("uid-2"))
				synctest.Wait()
				if live, _, regs := h.state(); live != 0 || regs != 2 {
					t.Errorf("after the new node's deletion: live %d, registrations %d; want 0, 2", live, regs)
				}
			})
		})
	}
}
