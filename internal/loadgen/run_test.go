package loadgen

import (
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

// fakeConfig is a run against fake clientsets; inside a synctest bubble the
// real clock is the bubble's fake time.
func fakeConfig(mode Mode, clients ...kubernetes.Interface) Config {
	cfg := DefaultConfig()
	cfg.Mode = mode
	cfg.Clients = clients
	cfg.Clock = clock.RealClock{}
	cfg.Rand = rand.New(rand.NewPCG(1, 2))
	cfg.Logger = slog.New(slog.DiscardHandler)
	return cfg
}

// countVerbs counts the requests of each verb on a resource.
func countVerbs(c *fake.Clientset, resource string) map[string]*atomic.Int64 {
	counts := map[string]*atomic.Int64{"create": {}, "update": {}, "get": {}, "list": {}, "delete": {}}
	c.PrependReactor("*", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		if n, ok := counts[a.GetVerb()]; ok {
			n.Add(1)
		}
		return false, nil, nil
	})
	return counts
}

func TestLeaseRunRenewsEveryLeaseOnSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c1, c2 := fake.NewClientset(), fake.NewClientset()
		v1, v2 := countVerbs(c1, "leases"), countVerbs(c2, "leases")
		cfg := fakeConfig(ModeLease, c1, c2)
		cfg.Objects, cfg.Interval, cfg.Duration, cfg.Warmup = 40, time.Second, 10*time.Second, time.Second
		res, err := Run(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.ErrorCount != 0 || res.Conflicts != 0 {
			t.Errorf("%d errors (%v), %d conflicts; want none", res.ErrorCount, res.Errors, res.Conflicts)
		}
		want := TargetRate(40, time.Second, cfg.JitterFactor)
		if math.Abs(res.AchievedPerSecond-want)/want > 0.05 {
			t.Errorf("achieved %.1f/s, want %.1f ± 5%%", res.AchievedPerSecond, want)
		}
		if res.DurationSeconds != 10 {
			t.Errorf("measured %vs, want 10s", res.DurationSeconds)
		}
		// Leases alternate between the clients; no renewal reads first.
		for name, v := range map[string]map[string]*atomic.Int64{"client 1": v1, "client 2": v2} {
			if got := v["create"].Load(); got != 20 {
				t.Errorf("%s created %d leases, want 20", name, got)
			}
			if got := v["get"].Load(); got != 0 {
				t.Errorf("%s read leases %d times, want 0: a renewal updates the last written object", name, got)
			}
			if got := v["update"].Load(); got < 200 || got > 230 {
				t.Errorf("%s renewed %d times in 11s, want about 215", name, got)
			}
		}
		if res.Latency.Count != res.Requests || res.Lag == nil || res.Lag.MaxMs != 0 {
			t.Errorf("latency count %d of %d requests, lag %+v; want every request measured, no lag with instant renewals", res.Latency.Count, res.Requests, res.Lag)
		}
	})
}

func TestLeaseRenewalRereadsOnConflict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := fake.NewClientset()
		verbs := countVerbs(c, "leases")
		var conflicted atomic.Bool
		c.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			if conflicted.CompareAndSwap(false, true) {
				return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "x", nil)
			}
			return false, nil, nil
		})
		cfg := fakeConfig(ModeLease, c)
		cfg.Objects, cfg.Interval, cfg.Duration = 1, time.Second, 5*time.Second
		res, err := Run(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Conflicts != 1 || res.ErrorCount != 0 {
			t.Errorf("%d conflicts, %d errors; want 1 conflict resolved without error", res.Conflicts, res.ErrorCount)
		}
		if got := verbs["get"].Load(); got != 1 {
			t.Errorf("%d gets, want 1 (after the conflict only)", got)
		}
	})
}

func TestLeaseRunCountsFailedRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := fake.NewClientset()
		c.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewTooManyRequests("slow down", 1)
		})
		cfg := fakeConfig(ModeLease, c)
		cfg.Objects, cfg.Interval, cfg.Duration = 10, time.Second, 3*time.Second
		res, err := Run(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.ErrorCount != res.Requests || res.Errors["TooManyRequests"] != res.Requests || res.Requests == 0 {
			t.Errorf("errors %v of %d requests, want every request counted as TooManyRequests", res.Errors, res.Requests)
		}
	})
}

// slowFakes returns n fake clientsets over one object tracker whose
// requests take delay of (bubble) time, and the count of requests by verb
// on resource. The fake serialises the requests of one clientset under a
// mutex, which synctest cannot see through, so each must be used by one
// goroutine at a time.
func slowFakes(n int, delay time.Duration, resource string) ([]kubernetes.Interface, map[string]*atomic.Int64) {
	counts := map[string]*atomic.Int64{"create": {}, "update": {}, "get": {}, "list": {}, "delete": {}}
	first := fake.NewClientset()
	var out []kubernetes.Interface
	for i := range n {
		c := first
		if i > 0 {
			c = fake.NewClientset()
			c.PrependReactor("*", "*", k8stesting.ObjectReaction(first.Tracker()))
		}
		c.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
			time.Sleep(delay) // simulated request latency in synctest bubble time, not a wait
			if n, ok := counts[a.GetVerb()]; ok && a.GetResource().Resource == resource {
				n.Add(1)
			}
			return false, nil, nil
		})
		out = append(out, c)
	}
	return out, counts
}

func TestRequestModes(t *testing.T) {
	tests := []struct {
		mode Mode
		rate float64
		// verb and resource every measured request sends
		verb, resource string
	}{
		{ModeCreate, 0, "create", "nodes"},
		{ModeGet, 0, "get", "nodes"},
		{ModeGet, 50, "get", "nodes"},
		{ModeUpdate, 0, "update", "nodes"},
		{ModeList, 0, "list", "nodes"},
	}
	for _, tt := range tests {
		name := string(tt.mode)
		if tt.rate > 0 {
			name += " open loop"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clients, verbs := slowFakes(2, 10*time.Millisecond, tt.resource)
				cfg := fakeConfig(tt.mode, clients...)
				cfg.Objects, cfg.Duration, cfg.Rate, cfg.SetupConcurrency = 20, 2*time.Second, tt.rate, 1
				if tt.mode == ModeCreate {
					cfg.Duration = 0
				}
				res, err := Run(t.Context(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				if res.ErrorCount != 0 {
					t.Fatalf("errors %v", res.Errors)
				}
				sent := verbs[tt.verb].Load()
				if tt.mode != ModeCreate && tt.verb == "create" {
					sent -= 20 // the setup's
				}
				if int64(res.Requests) != sent || res.Requests == 0 {
					t.Errorf("%d requests measured, %d %s sent", res.Requests, sent, tt.verb)
				}
				switch {
				case tt.mode == ModeCreate:
					if res.Requests != 20 {
						t.Errorf("created %d nodes, want 20", res.Requests)
					}
				case tt.rate > 0:
					if math.Abs(res.AchievedPerSecond-tt.rate) > 1 {
						t.Errorf("achieved %.1f/s, want %v/s", res.AchievedPerSecond, tt.rate)
					}
					if res.Service == nil || res.Service.P50Ms != 10 {
						t.Errorf("service latency %+v, want 10ms", res.Service)
					}
				default:
					// Two workers, 10 ms per request: 200/s for 2 s.
					if res.Requests < 390 || res.Requests > 402 {
						t.Errorf("%d requests in 2s by 2 workers at 10ms, want about 400", res.Requests)
					}
					if res.Latency.P50Ms != 10 {
						t.Errorf("p50 %vms, want 10ms", res.Latency.P50Ms)
					}
				}
				if tt.mode == ModeList && res.ListItems != 20 {
					t.Errorf("lists returned %d items, want 20", res.ListItems)
				}
			})
		})
	}
}

func TestCleanupDeletesWhatTheRunCreated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := fake.NewClientset()
		// One node and its lease exist before the run and must survive it.
		pre := NewNode(NodeName("load-", 0), 0, t0)
		if _, err := c.CoreV1().Nodes().Create(context.Background(), pre, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CoordinationV1().Leases(NodeLeaseNamespace).Create(context.Background(), NewLease(pre.Name, t0, pre), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cfg := fakeConfig(ModeLease, c)
		cfg.Objects, cfg.Duration, cfg.WithNodes, cfg.Cleanup = 3, time.Second, true, true
		res, err := Run(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Setup) != 2 || res.Setup[0].Created != 2 || res.Setup[0].Existing != 1 || res.Setup[1].Created != 2 {
			t.Errorf("setup %+v %+v, want 2 nodes and 2 leases created, 1 of each existing", res.Setup[0], res.Setup[1])
		}
		leases, _ := c.CoordinationV1().Leases(NodeLeaseNamespace).List(context.Background(), metav1.ListOptions{})
		nodes, _ := c.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if len(leases.Items) != 1 || len(nodes.Items) != 1 || nodes.Items[0].Name != pre.Name {
			t.Errorf("after cleanup %d leases, %d nodes remain; want only the pre-existing one of each", len(leases.Items), len(nodes.Items))
		}
	})
}

func TestConfigValidate(t *testing.T) {
	ok := fakeConfig(ModeLease, fake.NewClientset())
	tests := []struct {
		name   string
		change func(*Config)
	}{
		{"an unknown mode", func(c *Config) { c.Mode = "burst" }},
		{"no clients", func(c *Config) { c.Clients = nil }},
		{"no objects", func(c *Config) { c.Objects = 0 }},
		{"no duration outside create mode", func(c *Config) { c.Duration = 0 }},
		{"a negative rate", func(c *Config) { c.Rate = -1 }},
		{"no interval and no rate in lease mode", func(c *Config) { c.Interval = 0 }},
		{"an unsupported resourceVersion", func(c *Config) { c.ResourceVersion = "42" }},
		{"no clock", func(c *Config) { c.Clock = nil }},
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("the defaults are invalid: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.change(&c)
			if err := c.Validate(); err == nil {
				t.Error("Validate accepted it")
			}
		})
	}
	create := ok
	create.Mode, create.Duration = ModeCreate, 0
	if err := create.Validate(); err != nil {
		t.Errorf("create without a duration: %v, want accepted", err)
	}
}
