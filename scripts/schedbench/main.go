// Command schedbench measures the built-in scheduler: it creates -pods
// pending pods (10m CPU each, no node) with -clients concurrent creators and
// watches until every one is bound, reporting pods/s from the first create to
// the last binding and the create→bound latency percentiles. Run it against
// a server with simulated nodes (scripts/schedbench.sh does the whole run).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "admin kubeconfig")
	pods := flag.Int("pods", 10000, "pending pods to create")
	clients := flag.Int("clients", 32, "concurrent creators")
	flag.Parse()
	if err := run(*kubeconfig, *pods, *clients); err != nil {
		fmt.Fprintln(os.Stderr, "schedbench:", err)
		os.Exit(1)
	}
}

func run(kubeconfig string, n, clients int) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: "schedbench=1"})
	if err != nil {
		return err
	}
	var mu sync.Mutex
	created := make(map[string]time.Time, n)
	bound := make(map[string]time.Time, n)
	done := make(chan struct{})
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted || p.Spec.NodeName == "" {
				continue
			}
			mu.Lock()
			if _, seen := bound[p.Name]; !seen {
				bound[p.Name] = time.Now()
				if len(bound) == n {
					close(done)
				}
			}
			mu.Unlock()
		}
	}()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var createErr atomic.Value
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				name := fmt.Sprintf("sb-%06d", i)
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"schedbench": "1"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "sleep",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}}}}}
				t0 := time.Now()
				if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
					createErr.Store(err)
					return
				}
				mu.Lock()
				created[name] = t0
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err, _ := createErr.Load().(error); err != nil {
		return err
	}
	createdAll := time.Since(start)
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		return fmt.Errorf("only %d of %d pods bound after 10 min", len(bound), n)
	}
	total := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	lat := make([]time.Duration, 0, n)
	for name, b := range bound {
		lat = append(lat, b.Sub(created[name]))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	fmt.Printf("pods=%d created in %v (%.0f/s); all bound after %v: %.0f pods/s end to end\n",
		n, createdAll.Round(time.Millisecond), float64(n)/createdAll.Seconds(), total.Round(time.Millisecond), float64(n)/total.Seconds())
	fmt.Printf("create→bound latency: p50 %v  p99 %v  max %v\n", q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
	return nil
}
