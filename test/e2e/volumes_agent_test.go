package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeplane/nodeplane/internal/agent/volumes"
)

// volProbeSource is a pod's process for the volume tests: `volprobe IN OUT`
// reads the file IN (missing: empty), writes "pod=<HOSTNAME> in=<IN's
// content>" to the file OUT and to stdout, then waits for SIGTERM. Built
// static, so a containerised agent's scratch image can run it too.
const volProbeSource = `package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	in, _ := os.ReadFile(os.Args[1])
	line := fmt.Sprintf("pod=%s in=%s\n", os.Getenv("HOSTNAME"), strings.TrimSpace(string(in)))
	if err := os.WriteFile(os.Args[2], []byte(line), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Print(line)
	<-ch
}
`

// volProbe builds the volume probe once per test run.
func volProbe() (string, error) { return testProgram("volprobe", volProbeSource) }

// probePod runs the probe on node, reading in and writing out, with vols
// mounted as mounts say.
func probePod(name, node, probe, in, out string, vols []corev1.Volume, mounts []corev1.VolumeMount) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: new(int64(1)),
			Volumes:                       vols,
			Containers: []corev1.Container{{
				Name: "probe", Image: probe, Args: []string{in, out}, VolumeMounts: mounts,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}},
			}},
		},
	}
}

func fileIs(path, want string) func() error {
	return func() error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if string(b) != want {
			return fmt.Errorf("%s holds %q, want %q", path, b, want)
		}
		return nil
	}
}

// podEvent finds an event of reason about the pod whose message contains part.
func podEvent(cs kubernetes.Interface, pod, reason, part string) error {
	list, err := cs.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + pod + ",reason=" + reason,
	})
	if err != nil {
		return err
	}
	for _, e := range list.Items {
		if strings.Contains(e.Message, part) {
			return nil
		}
	}
	return fmt.Errorf("no %s event for pod %s containing %q (%d events of that reason)", reason, pod, part, len(list.Items))
}

// TestAgentPodVolumes runs a real agent (root on this host, so it may
// mount) and pods that read and write their volumes through the probe.
func TestAgentPodVolumes(t *testing.T) {
	probe, err := volProbe()
	if err != nil {
		t.Fatal(err)
	}
	// The API server alone: nothing but the test and the agent writes
	// (in particular no attach/detach controller: the test plays the
	// attacher by writing node.status.volumesAttached as the admin).
	s := startServer(t, serverOptions{apiOnly: true})
	cs := s.client()
	ctx := context.Background()
	base := t.TempDir()
	shared := filepath.Join(base, "shared")
	const node = "vol-node"
	a := startAgent(t, s, agentOptions{name: node, args: []string{
		"--shared-volume-root", shared, "--node-status-update-frequency", "1s",
	}})
	eventually(t, 30*time.Second, "the node registers", func() error {
		_, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		return err
	})
	if os.Geteuid() != 0 {
		t.Skip("the agent must be root to mount (see TestAgentVolumesWithoutCapability for the unprivileged case)")
	}
	// Every pod sees its volume at the same path.
	target := filepath.Join(base, "data")
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	in, out := filepath.Join(target, "in"), filepath.Join(target, "out")
	mountAt := []corev1.VolumeMount{{Name: "data", MountPath: target}}
	emptyDirPath := func(uid types.UID) string {
		return filepath.Join(a.dataDir, "volumes", "pods", string(uid), "volumes", "kubernetes.io~empty-dir", "data")
	}

	t.Run("two pods mounting different volumes at one path each see their own", func(t *testing.T) {
		hostB, hostC := filepath.Join(base, "host-b"), filepath.Join(base, "host-c")
		for dir, content := range map[string]string{hostB: "beta", hostC: "gamma"} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "in"), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		hostPath := func(p string, typ corev1.HostPathType) []corev1.Volume {
			return []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p, Type: &typ}}}}
		}
		emptyDir := []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		created := map[string]*corev1.Pod{}
		for _, p := range []*corev1.Pod{
			probePod("empty-a", node, probe, in, out, emptyDir, mountAt),
			probePod("host-b", node, probe, in, out, hostPath(hostB, corev1.HostPathDirectory), mountAt),
			probePod("host-c", node, probe, in, out, hostPath(hostC, corev1.HostPathDirectoryOrCreate), mountAt),
		} {
			c, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			created[p.Name] = c
		}
		for name := range created {
			waitPodPhase(t, cs, name, corev1.PodRunning)
		}
		eventually(t, 10*time.Second, "each pod wrote into its own volume", func() error {
			for path, want := range map[string]string{
				filepath.Join(emptyDirPath(created["empty-a"].UID), "out"): "pod=empty-a in=\n",
				filepath.Join(hostB, "out"):                                "pod=host-b in=beta\n",
				filepath.Join(hostC, "out"):                                "pod=host-c in=gamma\n",
			} {
				if err := fileIs(path, want)(); err != nil {
					return err
				}
			}
			return nil
		})
		if entries, _ := os.ReadDir(target); len(entries) != 0 {
			t.Errorf("the node's own %s holds %d entries: a mount leaked out of a pod's namespace", target, len(entries))
		}
		// A deleted pod's emptyDir goes with it; a hostPath stays.
		dir := emptyDirPath(created["empty-a"].UID)
		if err := cs.CoreV1().Pods("default").Delete(ctx, "empty-a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "the emptyDir of the deleted pod is removed", func() error {
			if _, err := os.Stat(dir); err == nil {
				return fmt.Errorf("%s still exists", dir)
			}
			return nil
		})
		if _, err := os.Stat(filepath.Join(hostB, "out")); err != nil {
			t.Errorf("hostPath content: %v", err)
		}
	})

	t.Run("a hostPath of type Directory that does not exist fails the mount with the upstream message", func(t *testing.T) {
		missing := filepath.Join(base, "no-such-dir")
		typ := corev1.HostPathDirectory
		vols := []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: missing, Type: &typ}}}}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, probePod("host-missing", node, probe, in, out, vols, mountAt), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "a FailedMount event", func() error {
			return podEvent(cs, "host-missing", "FailedMount", "hostPath type check failed: "+missing+" is not a directory")
		})
		if p, _ := cs.CoreV1().Pods("default").Get(ctx, "host-missing", metav1.GetOptions{}); p.Status.Phase != corev1.PodPending {
			t.Errorf("phase %q, want Pending", p.Status.Phase)
		}
	})

	t.Run("a configMap volume shows the configmap's data", func(t *testing.T) {
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "probe-config"},
			Data:       map[string]string{"greeting": "hello from the configmap"},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cfgDir := filepath.Join(base, "config")
		vols := []corev1.Volume{
			{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "probe-config"},
				Items:                []corev1.KeyToPath{{Key: "greeting", Path: "in"}},
			}}},
			{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		}
		mounts := []corev1.VolumeMount{{Name: "cfg", MountPath: cfgDir}, {Name: "data", MountPath: target}}
		p, err := cs.CoreV1().Pods("default").Create(ctx, probePod("config", node, probe, filepath.Join(cfgDir, "in"), out, vols, mounts), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitPodPhase(t, cs, "config", corev1.PodRunning)
		eventually(t, 10*time.Second, "the probe read the configmap", fileIs(filepath.Join(emptyDirPath(p.UID), "out"), "pod=config in=hello from the configmap\n"))
		// The node's identity reads what its pods reference, nothing else.
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "not-referenced"}, Data: map[string]string{"k": "v"},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		nc := nodeClient(t, s, a)
		if _, err := nc.CoreV1().ConfigMaps("default").Get(ctx, "probe-config", metav1.GetOptions{}); err != nil {
			t.Errorf("the node reading a configmap its pod mounts: %v", err)
		}
		for what, err := range map[string]error{
			"get an unreferenced configmap": func() error {
				_, err := nc.CoreV1().ConfigMaps("default").Get(ctx, "not-referenced", metav1.GetOptions{})
				return err
			}(),
			"list configmaps": func() error {
				_, err := nc.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
				return err
			}(),
			"update a configmap its pod mounts": func() error {
				cm, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "probe-config", metav1.GetOptions{})
				if err != nil {
					return err
				}
				cm.Data["greeting"] = "changed by the node"
				_, err = nc.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{})
				return err
			}(),
			"get a secret no pod references": func() error {
				_, err := nc.CoreV1().Secrets("default").Get(ctx, "probe-config", metav1.GetOptions{})
				return err
			}(),
		} {
			if !apierrors.IsForbidden(err) {
				t.Errorf("the node may %s: err = %v, want Forbidden", what, err)
			}
		}
	})

	t.Run("a claim to a shared-dir volume is mounted only once volumesAttached lists it", func(t *testing.T) {
		const handle = "vol-e2e"
		unique := volumes.UniqueName(volumes.DriverSharedDir, handle)
		if err := os.MkdirAll(filepath.Join(shared, handle), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(shared, handle, "in"), []byte("written before"), 0o644); err != nil {
			t.Fatal(err)
		}
		// The binder is another controller's: bind the pair by hand.
		pvc, err := cs.CoreV1().PersistentVolumeClaims("default").Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				VolumeName:       "pv-e2e",
				StorageClassName: new(""),
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pvc.Status.Phase = corev1.ClaimBound
		if _, err := cs.CoreV1().PersistentVolumeClaims("default").UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pv-e2e"},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
					Driver: volumes.DriverSharedDir, VolumeHandle: handle,
				}},
				ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: "data", UID: pvc.UID},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		vols := []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, probePod("claim", node, probe, in, out, vols, mountAt), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "the node reports the volume in use", func() error {
			n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(n.Status.VolumesInUse) != 1 || n.Status.VolumesInUse[0] != unique {
				return fmt.Errorf("volumesInUse %v", n.Status.VolumesInUse)
			}
			return nil
		})
		eventually(t, 30*time.Second, "a FailedMount event naming the unattached volume", func() error {
			return podEvent(cs, "claim", "FailedMount", "unattached volumes=[data]")
		})
		never(t, 3*time.Second, "the pod starting before its volume is attached", func() error {
			p, err := cs.CoreV1().Pods("default").Get(ctx, "claim", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodPending {
				return fmt.Errorf("phase %s", p.Status.Phase)
			}
			if _, err := os.Stat(filepath.Join(shared, handle, "out")); err == nil {
				return fmt.Errorf("the probe wrote into the volume")
			}
			return nil
		})
		// Play the attacher: the admin writes volumesAttached.
		eventually(t, 10*time.Second, "volumesAttached written", func() error {
			n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Status.VolumesAttached = []corev1.AttachedVolume{{Name: unique, DevicePath: ""}}
			_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		})
		waitPodPhase(t, cs, "claim", corev1.PodRunning)
		eventually(t, 10*time.Second, "the probe read the data written before", fileIs(filepath.Join(shared, handle, "out"), "pod=claim in=written before\n"))
		// The agent's own status updates leave volumesAttached alone.
		never(t, 3*time.Second, "the agent dropping volumesAttached", func() error {
			n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(n.Status.VolumesAttached) != 1 {
				return fmt.Errorf("volumesAttached %v", n.Status.VolumesAttached)
			}
			return nil
		})
		if err := cs.CoreV1().Pods("default").Delete(ctx, "claim", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "the volume is no longer in use once the pod is gone", func() error {
			n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(n.Status.VolumesInUse) != 0 {
				return fmt.Errorf("volumesInUse %v", n.Status.VolumesInUse)
			}
			return nil
		})
		if _, err := os.Stat(filepath.Join(shared, handle, "out")); err != nil {
			t.Errorf("the shared volume's data is gone with the pod: %v", err)
		}
	})

	t.Run("a pod using a volume name twice is refused by validation", func(t *testing.T) {
		vols := []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		}
		_, err := cs.CoreV1().Pods("default").Create(ctx, probePod("twice", node, probe, in, out, vols, mountAt), metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `spec.volumes[1].name: Duplicate value: "data"`) {
			t.Fatalf("err = %v, want Invalid with spec.volumes[1].name: Duplicate value: \"data\"", err)
		}
	})
}

// TestAgentVolumesInContainer runs two agents in containers, as root: one
// given CAP_SYS_ADMIN (--cap-add SYS_ADMIN), where two pods mount
// different hostPath volumes at /data — a path inside the container — and
// each reads and writes its own; one with Docker's default capabilities,
// where a pod that mounts a volume is not started and gets a Warning
// FailedMount event naming the missing capability.
func TestAgentVolumesInContainer(t *testing.T) {
	needDocker(t)
	probe, err := volProbe()
	if err != nil {
		t.Fatal(err)
	}
	image := agentImage(t, "volumes", map[string]string{"/volprobe": probe})

	const hostName = "host.docker.internal"
	s := startServer(t, serverOptions{apiOnly: true, args: []string{"--tls-san", hostName}})
	s.stop()
	s.args = append(s.args, "--listen", fmt.Sprintf("0.0.0.0:%d", s.port))
	s.start()
	token, err := os.ReadFile(filepath.Join(s.dataDir, "node-token"))
	if err != nil {
		t.Fatal(err)
	}
	vols := t.TempDir()
	for sub, content := range map[string]string{"a": "alpha", "b": "beta"} {
		if err := os.MkdirAll(filepath.Join(vols, sub), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(vols, sub, "in"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(node string, extra ...string) {
		name := fmt.Sprintf("np-e2e-vol-%s-%d", node, time.Now().UnixNano()%1e9)
		args := append([]string{"run", "-d", "--name", name, "--add-host", hostName + ":host-gateway", "-v", vols + ":/vols"}, extra...)
		args = append(args, image, "agent", "--server", fmt.Sprintf("https://%s:%d", hostName, s.port),
			"--token", strings.TrimSpace(string(token)), "--node-name", node, "--data-dir", "/agent")
		docker(t, args...)
		t.Cleanup(func() {
			if t.Failed() {
				out, _ := exec.Command("docker", "logs", name).CombinedOutput()
				t.Logf("agent container %s logs:\n%s", name, out)
			}
			_ = exec.Command("docker", "rm", "-f", name).Run()
		})
	}
	run("vol-cap", "--cap-add", "SYS_ADMIN")
	run("vol-nocap")

	ctx := context.Background()
	cs := s.client()
	for _, node := range []string{"vol-cap", "vol-nocap"} {
		eventually(t, 60*time.Second, node+" registered", func() error {
			_, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			return err
		})
	}
	hostPath := func(p string) []corev1.Volume {
		typ := corev1.HostPathDirectory
		return []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p, Type: &typ}}}}
	}
	mountAt := []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	for _, p := range []*corev1.Pod{
		probePod("in-a", "vol-cap", "/volprobe", "/data/in", "/data/out", hostPath("/vols/a"), mountAt),
		probePod("in-b", "vol-cap", "/volprobe", "/data/in", "/data/out", hostPath("/vols/b"), mountAt),
		probePod("no-cap", "vol-nocap", "/volprobe", "/data/in", "/data/out",
			[]corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}, mountAt),
	} {
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitPodPhase(t, cs, "in-a", corev1.PodRunning)
	waitPodPhase(t, cs, "in-b", corev1.PodRunning)
	eventually(t, 10*time.Second, "each pod read and wrote its own /data", func() error {
		if err := fileIs(filepath.Join(vols, "a", "out"), "pod=in-a in=alpha\n")(); err != nil {
			return err
		}
		return fileIs(filepath.Join(vols, "b", "out"), "pod=in-b in=beta\n")()
	})
	eventually(t, 30*time.Second, "a FailedMount event naming CAP_SYS_ADMIN", func() error {
		return podEvent(cs, "no-cap", "FailedMount", "lacks CAP_SYS_ADMIN")
	})
	never(t, 2*time.Second, "the pod without a mountable volume starting", func() error {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "no-cap", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodPending {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
}
