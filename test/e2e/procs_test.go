package e2e

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// gomaxprocs is the server's GOMAXPROCS as its /metrics reports it.
func gomaxprocs(ctx context.Context, cs kubernetes.Interface) (float64, error) {
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("scrape /metrics: %w", err)
	}
	v := metricValue(string(raw), "go_sched_gomaxprocs_threads")
	if v < 0 {
		return 0, fmt.Errorf("no go_sched_gomaxprocs_threads in /metrics")
	}
	return v, nil
}

// TestServerSizesItsProcessorsToItsLoad: an idle server keeps one of the Go
// scheduler's processors (each idle one costs CPU per request woken,
// internal/procs); a burst of requests gives it more within moments, and
// when the burst ends it goes back to one. With --elastic-procs=false the
// server keeps Go's choice.
func TestServerSizesItsProcessorsToItsLoad(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: there is nothing to size")
	}
	ctx := context.Background()
	s := startServer(t, serverOptions{apiOnly: true})
	cs := s.client()
	atMost := func(want float64) func() error {
		return func() error {
			p, err := gomaxprocs(ctx, cs)
			if err == nil && p > want {
				err = fmt.Errorf("GOMAXPROCS %v", p)
			}
			return err
		}
	}
	eventually(t, 30*time.Second, "an idle server down to one processor", atMost(1))

	// The burst: 16 clients listing 500 ConfigMaps as JSON as fast as they
	// can, without decoding them: the server encodes each list, the
	// clients only read the bytes, so the server needs far more CPU than
	// they do (on this host, more than one processor can give).
	data := map[string]string{"payload": strings.Repeat("x", 1024)}
	for i := range 500 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", i)}, Data: data}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "the server back to one processor after the setup", atMost(1))
	burst, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var errs sync.Map
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for burst.Err() == nil {
				_, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/default/configmaps").SetHeader("Accept", "application/json").DoRaw(burst)
				if err != nil && burst.Err() == nil {
					errs.Store(i, err)
					return
				}
			}
		}()
	}
	start := time.Now()
	eventually(t, 30*time.Second, "a server under a burst on more than one processor", func() error {
		p, err := gomaxprocs(ctx, cs)
		if err == nil && p < 2 {
			err = fmt.Errorf("GOMAXPROCS %v", p)
		}
		return err
	})
	t.Logf("processors added %v into the burst", time.Since(start).Round(time.Millisecond))
	stop()
	wg.Wait()
	errs.Range(func(k, v any) bool {
		t.Errorf("client %v: %v", k, v)
		return true
	})
	start = time.Now()
	eventually(t, 30*time.Second, "the server back to one processor after the burst", atMost(1))
	t.Logf("back to one processor %v after the burst", time.Since(start).Round(time.Millisecond))

	fixed := startServer(t, serverOptions{apiOnly: true, args: []string{"--elastic-procs=false"}})
	fcs := fixed.client()
	// Idle, it would be down to one within about 2 s (ten calm 200 ms
	// intervals): watch three times that.
	scrapes := 0
	never(t, 6*time.Second, "a server with --elastic-procs=false giving up processors", func() error {
		p, err := gomaxprocs(ctx, fcs)
		if err != nil {
			return nil //nolint:nilerr // a failed scrape is not a sighting; counted below
		}
		scrapes++
		if p < 2 {
			return fmt.Errorf("GOMAXPROCS %v", p)
		}
		return nil
	})
	if scrapes < 10 {
		t.Errorf("only %d of the window's scrapes of /metrics succeeded", scrapes)
	}
}
