package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubectlSortAndColumns drives kubectl's Table-based output options:
// --sort-by (which asks for the Table with includeObject=Object) on nodes,
// pods and events, -o custom-columns and --show-labels, with every kubectl
// version at hand.
func TestKubectlSortAndColumns(t *testing.T) {
	s := startServer(t, serverOptions{apiOnly: true})
	ctx := context.Background()
	cs := s.client()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	// Names, start times and event times deliberately in different orders.
	for i, name := range []string{"n-c", "n-a", "n-b"} {
		_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rank": string(rune('x' + i))}},
			Spec:       corev1.NodeSpec{PodCIDR: "10.0." + string(rune('1'+i)) + ".0/24"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, name := range []string{"p-late", "p-early", "p-middle"} {
		start := map[int]time.Duration{0: 30 * time.Minute, 1: 0, 2: 10 * time.Minute}[i]
		pod, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.PodSpec{NodeName: "n-a", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st := metav1.NewTime(base.Add(start))
		pod.Status.StartTime = &st
		pod.Status.Phase = corev1.PodRunning
		if _, err := cs.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err = cs.CoreV1().Events("default").Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name + ".ev"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: name},
			Reason:         "Started", Message: "started " + name, Type: corev1.EventTypeNormal,
			FirstTimestamp: st, LastTimestamp: st, Count: 1,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}

	for version, k := range kubectlVersions(t) {
		t.Run("kubectl "+version, func(t *testing.T) {
			for _, tc := range []struct {
				name string
				args []string
				want []string // first column of the rows, in order
			}{
				{"nodes sort by name", []string{"get", "nodes", "--sort-by=.metadata.name"}, []string{"n-a", "n-b", "n-c"}},
				{"nodes sort by a label", []string{"get", "nodes", "--sort-by=.metadata.labels.rank"}, []string{"n-c", "n-a", "n-b"}},
				{"nodes sort by a spec field", []string{"get", "nodes", "--sort-by=.spec.podCIDR", "-o", "wide"}, []string{"n-c", "n-a", "n-b"}},
				{"pods sort by start time", []string{"get", "pods", "--sort-by=.status.startTime"}, []string{"p-early", "p-middle", "p-late"}},
				{"events sort by last time", []string{"get", "events", "--sort-by=.lastTimestamp", "-o", "custom-columns=NAME:.metadata.name"}, []string{"p-early.ev", "p-middle.ev", "p-late.ev"}},
			} {
				out := s.mustKubectl(t, k, tc.args...)
				if got := firstColumn(out); strings.Join(got, " ") != strings.Join(tc.want, " ") {
					t.Errorf("%s: kubectl %s: rows %v, want %v\n%s", tc.name, strings.Join(tc.args, " "), got, tc.want, out)
				}
			}
			out := s.mustKubectl(t, k, "get", "nodes", "-o", "custom-columns=NAME:.metadata.name,CIDR:.spec.podCIDR", "--sort-by=.metadata.name")
			assertColumns(t, out, "NAME CIDR")
			if !regexpLine(out, `^n-a\s+10\.0\.2\.0/24$`) {
				t.Errorf("custom columns:\n%s", out)
			}
			out = s.mustKubectl(t, k, "get", "nodes", "--show-labels")
			if !regexpLine(out, `^n-b\s+.*\brank=z$`) {
				t.Errorf("--show-labels:\n%s", out)
			}
			out = s.mustKubectl(t, k, "get", "pods", "--show-labels", "--sort-by=.metadata.name")
			if got := firstColumn(out); strings.Join(got, " ") != "p-early p-late p-middle" {
				t.Errorf("pods --show-labels --sort-by name: %v\n%s", got, out)
			}
		})
	}
}

// firstColumn returns the first field of every line after the header.
func firstColumn(out string) []string {
	var names []string
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}
