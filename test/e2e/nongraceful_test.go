package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/volume/shareddir"
)

// stsProbeSource is the StatefulSet pod's process for the non-graceful
// shutdown test: on start it reads /data/log (what earlier pods wrote),
// copies it to /data/last-read, appends "host=<HOSTNAME> at=<time>" to
// /data/log, then waits for SIGTERM. Built static for the scratch image.
const stsProbeSource = `package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	prev, _ := os.ReadFile("/data/log")
	if err := os.WriteFile("/data/last-read", prev, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	line := fmt.Sprintf("host=%s at=%s\n", os.Getenv("HOSTNAME"), time.Now().UTC().Format(time.RFC3339Nano))
	if err := os.WriteFile("/data/log", append(prev, line...), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("read %q, wrote %q", prev, line)
	<-ch
}
`

// stsProbe builds the StatefulSet probe once per test run.
func stsProbe() (string, error) { return testProgram("stsprobe", stsProbeSource) }

// TestNonGracefulShutdownRecovery is issue 14's headline: three agents in
// containers share a volume root; a one-replica StatefulSet's pod writes
// to its nodeplane.io/shared-dir claim. `docker kill` of its node leaves
// the node Unknown, the pod Terminating and the VolumeAttachment in place;
// `kubectl taint ... node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`
// gets the pod force-deleted, the attachment deleted, and the new pod of
// the same name Running on another node, reading what the first wrote.
func TestNonGracefulShutdownRecovery(t *testing.T) {
	needDocker(t)
	probe, err := stsProbe()
	if err != nil {
		t.Fatal(err)
	}
	image := agentImage(t, "ngs", map[string]string{"/stsprobe": probe})

	const hostName = "host.docker.internal"
	args := append([]string{"--tls-san", hostName, "--leader-elect=false", "--pod-gc-period=1s"}, shortLifecycle...)
	s := startServer(t, serverOptions{args: args})
	s.stop()
	s.args = append(s.args, "--listen", fmt.Sprintf("0.0.0.0:%d", s.port))
	s.start()
	token, err := os.ReadFile(filepath.Join(s.dataDir, "node-token"))
	if err != nil {
		t.Fatal(err)
	}
	cfgDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(cfgDir, "config.yaml"), []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+agentTestConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	shared := t.TempDir() // the "NFS" root, at the same path in every agent
	containers := map[string]string{}
	for _, node := range []string{"ngs-1", "ngs-2", "ngs-3"} {
		name := fmt.Sprintf("np-e2e-%s-%d", node, time.Now().UnixNano()%1e9)
		docker(t, "run", "-d", "--name", name, "--cap-add", "SYS_ADMIN",
			"--add-host", hostName+":host-gateway", "-v", shared+":"+shared, "-v", cfgDir+":/cfg:ro", image,
			"agent", "--server", fmt.Sprintf("https://%s:%d", hostName, s.port), "--token", strings.TrimSpace(string(token)),
			"--node-name", node, "--data-dir", "/agent", "--config", "/cfg/config.yaml", "--shared-volume-root", shared)
		containers[node] = name
		t.Cleanup(func() {
			if t.Failed() {
				out, _ := exec.Command("docker", "logs", "--tail", "80", name).CombinedOutput()
				t.Logf("agent container %s logs:\n%s", name, out)
			}
			_ = exec.Command("docker", "rm", "-f", name).Run()
		})
	}

	ctx := context.Background()
	cs := s.client()
	kubectl := kubectlPath(t)
	waitNodesReady(t, cs, 60*time.Second, slices.Collect(maps.Keys(containers))...)

	s.mustKubectl(t, kubectl, "apply", "-f", writeManifest(t, `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: shared}
provisioner: nodeplane.io/shared-dir
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 1
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 1
      tolerations:
      - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 2}
      - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 2}
      containers:
      - name: db
        image: /stsprobe
        resources: {requests: {cpu: 10m}}
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      storageClassName: shared
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Mi}}
`))

	first := waitPodPhase(t, cs, "db-0", corev1.PodRunning)
	node := first.Spec.NodeName
	var handle string
	eventually(t, 20*time.Second, "claim data-db-0 Bound", func() error {
		c, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data-db-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("phase %s", c.Status.Phase)
		}
		pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		handle = pv.Spec.CSI.VolumeHandle
		return nil
	})
	volDir := filepath.Join(shared, handle)
	var before string
	eventually(t, 20*time.Second, "db-0 wrote its log", func() error {
		b, err := os.ReadFile(filepath.Join(volDir, "log"))
		if err != nil {
			return err
		}
		if !strings.HasPrefix(string(b), "host=db-0 at=") || strings.Count(string(b), "\n") != 1 {
			return fmt.Errorf("log %q", b)
		}
		before = string(b)
		return nil
	})
	vaName := shareddir.AttachmentName(handle, "nodeplane.io/shared-dir", node)
	if _, err := cs.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{}); err != nil {
		t.Fatalf("attachment %s on %s: %v", vaName, node, err)
	}
	t.Logf("db-0 on %s wrote %q to %s", node, strings.TrimSpace(before), handle)

	// The node dies without warning.
	docker(t, "kill", containers[node])
	killed := time.Now()
	eventually(t, 30*time.Second, node+" Ready Unknown", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := condition(n, corev1.NodeReady); c.Status != corev1.ConditionUnknown {
			return fmt.Errorf("Ready %s", c.Status)
		}
		return nil
	})
	eventually(t, 30*time.Second, "db-0 Terminating (evicted after its 2s toleration)", func() error {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID != first.UID || p.DeletionTimestamp == nil {
			return fmt.Errorf("uid %s deletionTimestamp %v", p.UID, p.DeletionTimestamp)
		}
		return nil
	})
	t.Logf("%s Unknown and db-0 Terminating %v after docker kill", node, time.Since(killed).Round(100*time.Millisecond))
	never(t, 10*time.Second, "the pod leaving or the attachment going without the taint", func() error {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID != first.UID {
			return fmt.Errorf("db-0 replaced (uid %s)", p.UID)
		}
		if _, err := cs.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("attachment: %w", err)
		}
		return nil
	})

	s.mustKubectl(t, kubectl, "taint", "nodes", node, "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute")
	tainted := time.Now()
	var gone, detached time.Time
	var second *corev1.Pod
	eventually(t, 60*time.Second, "a new db-0 Running on another node", func() error {
		if gone.IsZero() {
			p, err := cs.CoreV1().Pods("default").Get(ctx, "db-0", metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && p.UID != first.UID) {
				gone = time.Now()
			}
		}
		if detached.IsZero() {
			_, err := cs.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				detached = time.Now()
			}
		}
		p, err := cs.CoreV1().Pods("default").Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID == first.UID || p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("db-0 uid %s phase %s on %q", p.UID, p.Status.Phase, p.Spec.NodeName)
		}
		second = p
		return nil
	})
	running := time.Now()
	if gone.IsZero() || detached.IsZero() {
		t.Errorf("old pod gone at %v, attachment deleted at %v (zero: not seen)", gone, detached)
	}
	if second.Spec.NodeName == node {
		t.Errorf("new db-0 runs on the out-of-service node %s", node)
	}
	eventually(t, 20*time.Second, "the new db-0 read the data written before the crash", func() error {
		if err := fileIs(filepath.Join(volDir, "last-read"), before)(); err != nil {
			return err
		}
		b, err := os.ReadFile(filepath.Join(volDir, "log"))
		if err != nil {
			return err
		}
		if !strings.HasPrefix(string(b), before) || strings.Count(string(b), "\n") != 2 {
			return fmt.Errorf("log %q", b)
		}
		return nil
	})
	va, err := cs.StorageV1().VolumeAttachments().Get(ctx, shareddir.AttachmentName(handle, "nodeplane.io/shared-dir", second.Spec.NodeName), metav1.GetOptions{})
	if err != nil || !va.Status.Attached {
		t.Errorf("attachment on %s: %v (%+v)", second.Spec.NodeName, err, va)
	}
	took := running.Sub(tainted)
	t.Logf("out-of-service taint on %s: old pod gone after %v, attachment deleted after %v, new db-0 Running on %s after %v (goal <= 15s)",
		node, gone.Sub(tainted).Round(100*time.Millisecond), detached.Sub(tainted).Round(100*time.Millisecond),
		second.Spec.NodeName, took.Round(100*time.Millisecond))
	if took > 15*time.Second {
		t.Errorf("taint to Running took %v, goal <= 15s", took)
	}
}
