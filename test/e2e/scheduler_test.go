package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestScheduler: with three real agents, pods without a node are bound by
// the built-in scheduler and run; a cordoned node gets none; a pod that fits
// nowhere shows the aggregated reason in kubectl describe.
func TestScheduler(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{})
	cs := s.client()
	kubectl := kubectlPath(t)
	for _, name := range []string{"s1", "s2", "s3"} {
		startAgent(t, s, agentOptions{name: name, config: agentTestConfig,
			args: []string{"--node-labels", "topology.kubernetes.io/zone=z-" + name}})
	}
	eventually(t, 30*time.Second, "three schedulable nodes", func() error {
		for _, name := range []string{"s1", "s2", "s3"} {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if condition(n, corev1.NodeReady).Status != corev1.ConditionTrue || len(n.Spec.Taints) != 0 {
				return fmt.Errorf("%s not ready or tainted: %v", name, n.Spec.Taints)
			}
		}
		return nil
	})
	s.mustKubectl(t, kubectl, "cordon", "s2")
	create := func(name string, cpu string) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "sched"}}, Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptrInt64(1),
			Containers: []corev1.Container{{Name: "c", Image: "sleep", Args: []string{"60"},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		create(fmt.Sprintf("p%d", i), "10m")
	}
	for i := range 6 {
		p := waitPodPhase(t, cs, fmt.Sprintf("p%d", i), corev1.PodRunning)
		if p.Spec.NodeName == "s2" {
			t.Errorf("pod %s scheduled on the cordoned node", p.Name)
		}
	}
	create("huge", "1000")
	eventually(t, 30*time.Second, "FailedScheduling with the aggregated reason", func() error {
		out, _, err := s.kubectl(t, kubectl, "describe", "pod", "huge")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "FailedScheduling") || !strings.Contains(out, "0/3 nodes are available") ||
			!strings.Contains(out, "Insufficient cpu") || !strings.Contains(out, "node(s) were unschedulable") {
			return fmt.Errorf("describe:\n%s", out)
		}
		return nil
	})
	p, _ := cs.CoreV1().Pods("default").Get(ctx, "huge", metav1.GetOptions{})
	if podCondition(p, corev1.PodScheduled) != corev1.ConditionFalse || p.Spec.NodeName != "" {
		t.Errorf("unschedulable pod: node %q PodScheduled %q", p.Spec.NodeName, podCondition(p, corev1.PodScheduled))
	}
	for i := range 6 {
		_ = cs.CoreV1().Pods("default").Delete(ctx, fmt.Sprintf("p%d", i), metav1.DeleteOptions{})
	}
}
