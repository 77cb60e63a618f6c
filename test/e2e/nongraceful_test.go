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
	"k8s.io/client-go/kubernetes"

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

// ngsCluster is the harness of the non-graceful shutdown tests: a server
// reachable from containers and agents in Docker containers (one per node,
// `--cap-add SYS_ADMIN`) sharing one host directory as their
// --shared-volume-root, the "NFS" every node reaches.
type ngsCluster struct {
	s          *serverProc
	cs         kubernetes.Interface
	kubectl    string
	shared     string
	containers map[string]string // node → container
}

// startNGSCluster starts the server with serverArgs (after the short node
// lifecycle and --pod-gc-period=1s) and one agent container per node.
func startNGSCluster(t *testing.T, serverArgs []string, nodes ...string) *ngsCluster {
	t.Helper()
	needDocker(t)
	probe, err := stsProbe()
	if err != nil {
		t.Fatal(err)
	}
	image := agentImage(t, "ngs", map[string]string{"/stsprobe": probe})

	const hostName = "host.docker.internal"
	args := append([]string{"--tls-san", hostName, "--leader-elect=false", "--pod-gc-period=1s"}, shortLifecycle...)
	s := startServer(t, serverOptions{args: append(args, serverArgs...)})
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
	c := &ngsCluster{s: s, cs: s.client(), kubectl: kubectlPath(t), shared: t.TempDir(), containers: map[string]string{}}
	for _, node := range nodes {
		name := fmt.Sprintf("np-e2e-%s-%d", node, time.Now().UnixNano()%1e9)
		docker(t, "run", "-d", "--name", name, "--cap-add", "SYS_ADMIN",
			"--add-host", hostName+":host-gateway", "-v", c.shared+":"+c.shared, "-v", cfgDir+":/cfg:ro", image,
			"agent", "--server", fmt.Sprintf("https://%s:%d", hostName, s.port), "--token", strings.TrimSpace(string(token)),
			"--node-name", node, "--data-dir", "/agent", "--config", "/cfg/config.yaml", "--shared-volume-root", c.shared)
		c.containers[node] = name
		t.Cleanup(func() {
			if t.Failed() {
				out, _ := exec.Command("docker", "logs", "--tail", "80", name).CombinedOutput()
				t.Logf("agent container %s logs:\n%s", name, out)
			}
			_ = exec.Command("docker", "rm", "-f", name).Run()
		})
	}
	waitNodesReady(t, c.cs, 60*time.Second, slices.Collect(maps.Keys(c.containers))...)
	return c
}

// ngsDB is the one-replica StatefulSet "db" of the non-graceful shutdown
// tests, running: its first pod, the node it runs on, its volume's
// directory on the share, the attachment's name and the line it wrote.
type ngsDB struct {
	first  *corev1.Pod
	node   string
	handle string
	volDir string
	va     string
	before string
}

// deployDB applies the StorageClass "shared" and the StatefulSet "db" (2 s
// unreachable/not-ready tolerations, so the pod of a dead node is evicted
// quickly) and waits for db-0 to run, bind its claim and write its log.
func (c *ngsCluster) deployDB(t *testing.T) ngsDB {
	t.Helper()
	ctx := context.Background()
	c.s.mustKubectl(t, c.kubectl, "apply", "-f", writeManifest(t, `apiVersion: storage.k8s.io/v1
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

	var db ngsDB
	db.first = waitPodPhase(t, c.cs, "db-0", corev1.PodRunning)
	db.node = db.first.Spec.NodeName
	eventually(t, 20*time.Second, "claim data-db-0 Bound", func() error {
		claim, err := c.cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data-db-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if claim.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("phase %s", claim.Status.Phase)
		}
		pv, err := c.cs.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		db.handle = pv.Spec.CSI.VolumeHandle
		return nil
	})
	db.volDir = filepath.Join(c.shared, db.handle)
	eventually(t, 20*time.Second, "db-0 wrote its log", func() error {
		b, err := os.ReadFile(filepath.Join(db.volDir, "log"))
		if err != nil {
			return err
		}
		if !strings.HasPrefix(string(b), "host=db-0 at=") || strings.Count(string(b), "\n") != 1 {
			return fmt.Errorf("log %q", b)
		}
		db.before = string(b)
		return nil
	})
	db.va = shareddir.AttachmentName(db.handle, "nodeplane.io/shared-dir", db.node)
	if _, err := c.cs.StorageV1().VolumeAttachments().Get(ctx, db.va, metav1.GetOptions{}); err != nil {
		t.Fatalf("attachment %s on %s: %v", db.va, db.node, err)
	}
	// The node must have reported the volume mounted before it dies (its
	// agent's status update may trail the pod start): only then is the
	// detach a forced one, as with a node that dies in service.
	unique := shareddir.UniqueVolumeName(shareddir.Driver, db.handle)
	eventually(t, 30*time.Second, db.node+" lists the volume in volumesInUse", func() error {
		n, err := c.cs.CoreV1().Nodes().Get(ctx, db.node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !slices.Contains(n.Status.VolumesInUse, unique) {
			return fmt.Errorf("volumesInUse %v", n.Status.VolumesInUse)
		}
		return nil
	})
	t.Logf("db-0 on %s wrote %q to %s", db.node, strings.TrimSpace(db.before), db.handle)
	return db
}

// killNode kills db-0's node's container (no graceful shutdown) and waits
// for the node to go Unknown and db-0 to be Terminating.
func (c *ngsCluster) killNode(t *testing.T, db ngsDB) {
	t.Helper()
	ctx := context.Background()
	docker(t, "kill", c.containers[db.node])
	killed := time.Now()
	eventually(t, 30*time.Second, db.node+" Ready Unknown", func() error {
		n, err := c.cs.CoreV1().Nodes().Get(ctx, db.node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cond := condition(n, corev1.NodeReady); cond.Status != corev1.ConditionUnknown {
			return fmt.Errorf("Ready %s", cond.Status)
		}
		return nil
	})
	eventually(t, 30*time.Second, "db-0 Terminating (evicted after its 2s toleration)", func() error {
		p, err := c.cs.CoreV1().Pods("default").Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID != db.first.UID || p.DeletionTimestamp == nil {
			return fmt.Errorf("uid %s deletionTimestamp %v", p.UID, p.DeletionTimestamp)
		}
		return nil
	})
	t.Logf("%s Unknown and db-0 Terminating %v after docker kill", db.node, time.Since(killed).Round(100*time.Millisecond))
}

// vaGone reports whether the attachment named name is deleted.
func (c *ngsCluster) vaGone(name string) bool {
	_, err := c.cs.StorageV1().VolumeAttachments().Get(context.Background(), name, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

// newDBRunning returns db-0 when it is a pod other than first, Running.
func (c *ngsCluster) newDBRunning(first *corev1.Pod) (*corev1.Pod, error) {
	p, err := c.cs.CoreV1().Pods("default").Get(context.Background(), "db-0", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if p.UID == first.UID || p.Status.Phase != corev1.PodRunning {
		return nil, fmt.Errorf("db-0 uid %s phase %s on %q", p.UID, p.Status.Phase, p.Spec.NodeName)
	}
	return p, nil
}

// readBefore waits for the new db-0 to have read the first pod's line
// from the volume and appended its own.
func (c *ngsCluster) readBefore(t *testing.T, db ngsDB) {
	t.Helper()
	eventually(t, 20*time.Second, "the new db-0 read the data written before the crash", func() error {
		if err := fileIs(filepath.Join(db.volDir, "last-read"), db.before)(); err != nil {
			return err
		}
		b, err := os.ReadFile(filepath.Join(db.volDir, "log"))
		if err != nil {
			return err
		}
		if !strings.HasPrefix(string(b), db.before) || strings.Count(string(b), "\n") != 2 {
			return fmt.Errorf("log %q", b)
		}
		return nil
	})
}

// forcedDetaches reads the ADC's forced-detach counter of reason.
func (c *ngsCluster) forcedDetaches(t *testing.T, reason string) float64 {
	t.Helper()
	raw, err := c.cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return metricValue(string(raw), `attach_detach_controller_attachdetach_controller_forced_detaches{reason="`+reason+`"}`)
}

// TestNonGracefulShutdownRecovery is issue 14's headline: three agents in
// containers share a volume root; a one-replica StatefulSet's pod writes
// to its nodeplane.io/shared-dir claim. `docker kill` of its node leaves
// the node Unknown, the pod Terminating and the VolumeAttachment in place;
// `kubectl taint ... node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`
// gets the pod force-deleted, the attachment deleted, and the new pod of
// the same name Running on another node, reading what the first wrote.
func TestNonGracefulShutdownRecovery(t *testing.T) {
	c := startNGSCluster(t, nil, "ngs-1", "ngs-2", "ngs-3")
	ctx := context.Background()
	db := c.deployDB(t)
	c.killNode(t, db)
	never(t, 10*time.Second, "the pod leaving or the attachment going without the taint", func() error {
		p, err := c.cs.CoreV1().Pods("default").Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID != db.first.UID {
			return fmt.Errorf("db-0 replaced (uid %s)", p.UID)
		}
		if c.vaGone(db.va) {
			return fmt.Errorf("attachment %s deleted", db.va)
		}
		return nil
	})

	c.s.mustKubectl(t, c.kubectl, "taint", "nodes", db.node, "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute")
	tainted := time.Now()
	var gone, detached time.Time
	var second *corev1.Pod
	eventually(t, 60*time.Second, "a new db-0 Running on another node", func() error {
		if gone.IsZero() {
			p, err := c.cs.CoreV1().Pods("default").Get(ctx, "db-0", metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && p.UID != db.first.UID) {
				gone = time.Now()
			}
		}
		if detached.IsZero() && c.vaGone(db.va) {
			detached = time.Now()
		}
		p, err := c.newDBRunning(db.first)
		second = p
		return err
	})
	running := time.Now()
	if gone.IsZero() || detached.IsZero() {
		t.Errorf("old pod gone at %v, attachment deleted at %v (zero: not seen)", gone, detached)
	}
	if second.Spec.NodeName == db.node {
		t.Errorf("new db-0 runs on the out-of-service node %s", db.node)
	}
	c.readBefore(t, db)
	va, err := c.cs.StorageV1().VolumeAttachments().Get(ctx, shareddir.AttachmentName(db.handle, "nodeplane.io/shared-dir", second.Spec.NodeName), metav1.GetOptions{})
	if err != nil || !va.Status.Attached {
		t.Errorf("attachment on %s: %v (%+v)", second.Spec.NodeName, err, va)
	}
	took := running.Sub(tainted)
	t.Logf("out-of-service taint on %s: old pod gone after %v, attachment deleted after %v, new db-0 Running on %s after %v (goal <= 15s)",
		db.node, gone.Sub(tainted).Round(100*time.Millisecond), detached.Sub(tainted).Round(100*time.Millisecond),
		second.Spec.NodeName, took.Round(100*time.Millisecond))
	if took > 15*time.Second {
		t.Errorf("taint to Running took %v, goal <= 15s", took)
	}
	if v := c.forcedDetaches(t, "out-of-service"); v != 1 {
		t.Errorf("forced detaches out-of-service = %v, want 1", v)
	}
}

// TestNonGracefulShutdownTimeoutDetach is the path without the taint: the
// operator force-deletes the Terminating pod of the dead node; the new
// db-0 is placed on the other node but cannot attach (Multi-Attach) while
// the dead node still lists the volume in use, until the unmount wait
// (shortened to 8 s) has passed since the force delete. Then the
// attachment is force-detached (reason "timeout") and the new pod reads
// the old data.
func TestNonGracefulShutdownTimeoutDetach(t *testing.T) {
	const wait = 8 * time.Second
	c := startNGSCluster(t, []string{"--max-wait-for-unmount-duration=" + wait.String()}, "ngt-1", "ngt-2")
	ctx := context.Background()
	db := c.deployDB(t)
	c.killNode(t, db)

	c.s.mustKubectl(t, c.kubectl, "delete", "pod", "db-0", "--force", "--grace-period=0")
	requested := time.Now()
	never(t, wait-1500*time.Millisecond, "the attachment deleted or the new pod running before the unmount wait", func() error {
		if c.vaGone(db.va) {
			return fmt.Errorf("attachment %s deleted %v after the force delete", db.va, time.Since(requested))
		}
		if p, err := c.newDBRunning(db.first); err == nil {
			return fmt.Errorf("new db-0 Running on %s", p.Spec.NodeName)
		}
		return nil
	})
	if err := hasEvent(ctx, c.cs, "db-0", "FailedAttachVolume", "Multi-Attach error for volume"); err != nil {
		t.Errorf("the waiting pod: %v", err)
	}
	var detached time.Time
	var second *corev1.Pod
	eventually(t, 30*time.Second, "attachment force-detached and the new db-0 Running", func() error {
		if detached.IsZero() && c.vaGone(db.va) {
			detached = time.Now()
		}
		p, err := c.newDBRunning(db.first)
		second = p
		return err
	})
	if detached.IsZero() {
		t.Errorf("attachment deletion not seen before the new pod ran")
	}
	c.readBefore(t, db)
	t.Logf("no taint, unmount wait %v: attachment deleted %v after the force delete, new db-0 Running on %s %v after it",
		wait, detached.Sub(requested).Round(100*time.Millisecond), second.Spec.NodeName, time.Since(requested).Round(100*time.Millisecond))
	if v := c.forcedDetaches(t, "timeout"); v != 1 {
		t.Errorf("forced detaches timeout = %v, want 1", v)
	}
}

// TestNonGracefulShutdownNoForceDetach is the same path with
// --disable-force-detach-on-timeout: the attachment of the dead node
// stays over a window of four unmount waits (3 s each) and the new pod
// waits on Multi-Attach; only the out-of-service taint then detaches it
// (ADC-3d).
func TestNonGracefulShutdownNoForceDetach(t *testing.T) {
	const wait = 3 * time.Second
	c := startNGSCluster(t, []string{"--max-wait-for-unmount-duration=" + wait.String(), "--disable-force-detach-on-timeout"}, "ngd-1", "ngd-2")
	ctx := context.Background()
	db := c.deployDB(t)
	c.killNode(t, db)

	c.s.mustKubectl(t, c.kubectl, "delete", "pod", "db-0", "--force", "--grace-period=0")
	never(t, 4*wait, "the attachment deleted or the new pod running without the taint", func() error {
		if c.vaGone(db.va) {
			return fmt.Errorf("attachment %s deleted", db.va)
		}
		if p, err := c.newDBRunning(db.first); err == nil {
			return fmt.Errorf("new db-0 Running on %s", p.Spec.NodeName)
		}
		return nil
	})
	if err := hasEvent(ctx, c.cs, "db-0", "FailedAttachVolume", "Multi-Attach error for volume"); err != nil {
		t.Errorf("the waiting pod: %v", err)
	}
	if v := c.forcedDetaches(t, "timeout"); v > 0 { // -1: no such series yet
		t.Errorf("forced detaches timeout = %v, want none", v)
	}

	c.s.mustKubectl(t, c.kubectl, "taint", "nodes", db.node, "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute")
	tainted := time.Now()
	eventually(t, 30*time.Second, "attachment detached and the new db-0 Running after the taint", func() error {
		if !c.vaGone(db.va) {
			return fmt.Errorf("attachment %s still there", db.va)
		}
		_, err := c.newDBRunning(db.first)
		return err
	})
	c.readBefore(t, db)
	t.Logf("force detach disabled: attachment kept %v past the force delete; after the taint, new db-0 Running in %v",
		4*wait, time.Since(tainted).Round(100*time.Millisecond))
	if v := c.forcedDetaches(t, "out-of-service"); v != 1 {
		t.Errorf("forced detaches out-of-service = %v, want 1", v)
	}
}
