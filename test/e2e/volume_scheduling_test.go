package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestVolumeNodeAffinityScheduling runs the scheduler's VolumeBinding
// filter against the real server and two real agents: four pods sharing a
// claim bound to a volume whose nodeAffinity selects only vs-b are all
// placed on vs-b (the only node it fits: spreading alone would use both),
// and a pod whose claim does not exist is not placed, with a
// FailedScheduling event naming it.
func TestVolumeNodeAffinityScheduling(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{args: []string{"--leader-elect=false"}})
	cs := s.client()
	kubectl := kubectlPath(t)
	root := t.TempDir()
	for _, name := range []string{"vs-a", "vs-b"} {
		startAgent(t, s, agentOptions{name: name, config: agentTestConfig, args: []string{"--shared-volume-root", root}})
	}
	waitNodesReady(t, cs, 30*time.Second, "vs-a", "vs-b")

	manifest := `apiVersion: v1
kind: PersistentVolume
metadata: {name: pinned}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteMany]
  storageClassName: ""
  csi: {driver: nodeplane.io/shared-dir, volumeHandle: pinned}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [vs-b]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: pinned}
spec:
  storageClassName: ""
  volumeName: pinned
  accessModes: [ReadWriteMany]
  resources: {requests: {storage: 1Gi}}
`
	for i := range 4 {
		manifest += fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata: {name: user-%d}
spec:
  containers: [{name: c, image: /bin/sleep, args: ["60"], resources: {requests: {cpu: 10m}}}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: pinned}}]
`, i)
	}
	manifest += `---
apiVersion: v1
kind: Pod
metadata: {name: orphan}
spec:
  containers: [{name: c, image: /bin/sleep, args: ["60"]}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: nope}}]
`
	s.mustKubectl(t, kubectl, "apply", "-f", writeManifest(t, manifest))
	t.Cleanup(func() {
		if t.Failed() {
			out, _, _ := s.kubectl(t, kubectl, "get", "events", "-A")
			pvcs, _, _ := s.kubectl(t, kubectl, "get", "pv,pvc", "-A")
			t.Logf("events:\n%s\n%s", out, pvcs)
		}
	})
	eventually(t, 30*time.Second, "every user pod placed on vs-b", func() error {
		for i := range 4 {
			p, err := cs.CoreV1().Pods("default").Get(ctx, fmt.Sprintf("user-%d", i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Spec.NodeName != "vs-b" {
				return fmt.Errorf("%s on %q", p.Name, p.Spec.NodeName)
			}
		}
		return nil
	})
	eventually(t, 20*time.Second, "FailedScheduling naming the missing claim", func() error {
		return hasEvent(ctx, cs, "orphan", "FailedScheduling", `persistentvolumeclaim "nope" not found`)
	})
	p, err := cs.CoreV1().Pods("default").Get(ctx, "orphan", metav1.GetOptions{})
	if err != nil || p.Spec.NodeName != "" {
		t.Errorf("pod with a missing claim placed on %q (%v)", p.Spec.NodeName, err)
	}
}
