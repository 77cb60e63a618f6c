package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeplane/nodeplane/internal/volume/shareddir"
)

// TestVolumesServer runs the server side of volumes against a real server
// and two real agents: a static shared-dir PV binds its claim, a
// StorageClass provisions and binds another, a claim naming a missing class
// stays Pending with ProvisioningFailed; a pod using a claim gets a
// VolumeAttachment that the built-in attacher marks attached and the
// node's status.volumesAttached lists; a pod on another node waiting for
// the same single-attach volume gets a Multi-Attach event until deleting
// the first pod detaches it, and then it attaches there. Then
// both agents are killed (the test reports their volumes in use, as a dead
// kubelet's last status would): on the node given the out-of-service taint
// the pod is evicted, force-deleted by pod GC and the volume detached at
// once; on the other, a force-deleted pod's volume is detached only after
// the (shortened) unmount wait.
func TestVolumesServer(t *testing.T) {
	ctx := context.Background()
	const wait = 10 * time.Second
	s := startServer(t, serverOptions{args: append([]string{"--leader-elect=false", "--max-wait-for-unmount-duration=" + wait.String()}, shortLifecycle...)})
	cs := s.client()
	kubectl := kubectlPath(t)
	agents := map[string]*agentProc{}
	// Both agents reach the same volume root, as NFS would give them.
	root := t.TempDir()
	for _, name := range []string{"vol-a", "vol-b"} {
		agents[name] = startAgent(t, s, agentOptions{name: name, config: agentTestConfig, args: []string{"--shared-volume-root", root}})
	}
	waitNodesReady(t, cs, 30*time.Second, "vol-a", "vol-b")

	s.mustKubectl(t, kubectl, "apply", "-f", writeManifest(t, `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: shared}
provisioner: nodeplane.io/shared-dir
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: static-1}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  csi: {driver: nodeplane.io/shared-dir, volumeHandle: static-1}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: static}
spec:
  storageClassName: ""
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: dyn-a}
spec:
  storageClassName: shared
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: dyn-b}
spec:
  storageClassName: shared
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: lost-class}
spec:
  storageClassName: nope
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
`))
	if out := s.mustKubectl(t, kubectl, "get", "storageclass", "shared", "--no-headers"); !regexpFields(out, "shared", "nodeplane.io/shared-dir", "Delete", "Immediate", "false") {
		t.Errorf("kubectl get sc: %q", out)
	}
	_, stderr, err := s.kubectl(t, kubectl, "create", "-f", writeManifest(t, `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: bad}
provisioner: nodeplane.io/shared-dir
reclaimPolicy: Recycle
volumeBindingMode: Later
`))
	if err == nil || !strings.Contains(stderr, "reclaimPolicy") || !strings.Contains(stderr, "volumeBindingMode") {
		t.Errorf("a bad StorageClass was not refused naming its fields: %v %s", err, stderr)
	}

	bound := func(claim string) *corev1.PersistentVolumeClaim {
		var pvc *corev1.PersistentVolumeClaim
		eventually(t, 20*time.Second, "claim "+claim+" Bound", func() error {
			var err error
			if pvc, err = cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, claim, metav1.GetOptions{}); err != nil {
				return err
			}
			if pvc.Status.Phase != corev1.ClaimBound || pvc.Annotations["pv.kubernetes.io/bind-completed"] != "yes" {
				return fmt.Errorf("phase %s annotations %v", pvc.Status.Phase, pvc.Annotations)
			}
			pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if pv.Status.Phase != corev1.VolumeBound || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
				return fmt.Errorf("pv %s phase %s claimRef %+v", pv.Name, pv.Status.Phase, pv.Spec.ClaimRef)
			}
			return nil
		})
		return pvc
	}
	if pvc := bound("static"); pvc.Spec.VolumeName != "static-1" {
		t.Errorf("static claim bound to %s", pvc.Spec.VolumeName)
	}
	handles := map[string]string{}
	for _, c := range []string{"dyn-a", "dyn-b"} {
		pvc := bound(c)
		if want := "pvc-" + string(pvc.UID); pvc.Spec.VolumeName != want || pvc.Annotations["volume.kubernetes.io/storage-provisioner"] != shareddir.Driver {
			t.Errorf("%s: volume %s (want %s), annotations %v", c, pvc.Spec.VolumeName, want, pvc.Annotations)
		}
		handles[c] = pvc.Spec.VolumeName
	}
	handles["static"] = "static-1"
	eventually(t, 20*time.Second, "ProvisioningFailed on the claim of a missing class", func() error {
		pvc, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, "lost-class", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pvc.Status.Phase != corev1.ClaimPending {
			return fmt.Errorf("phase %s", pvc.Status.Phase)
		}
		return hasEvent(ctx, cs, "lost-class", "ProvisioningFailed", `storageclass.storage.k8s.io "nope" not found`)
	})

	mkPod := func(name, node, claim string) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			NodeName: node, TerminationGracePeriodSeconds: ptrInt64(1),
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
			Containers: []corev1.Container{{Name: "c", Image: "sleep", Args: []string{"3600"}}}}}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	vaName := func(claim, node string) string {
		return shareddir.AttachmentName(handles[claim], shareddir.Driver, node)
	}
	unique := func(claim string) corev1.UniqueVolumeName {
		return shareddir.UniqueVolumeName(shareddir.Driver, handles[claim])
	}
	attached := func(claim, node string) {
		eventually(t, 20*time.Second, claim+" attached to "+node+" and listed in its volumesAttached", func() error {
			va, err := cs.StorageV1().VolumeAttachments().Get(ctx, vaName(claim, node), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !va.Status.Attached || va.Spec.Attacher != shareddir.Driver || va.Spec.NodeName != node ||
				va.Spec.Source.PersistentVolumeName == nil || *va.Spec.Source.PersistentVolumeName != handles[claim] {
				return fmt.Errorf("attachment %+v %+v", va.Spec, va.Status)
			}
			if !hasFinalizerE2E(va, shareddir.Finalizer) {
				return fmt.Errorf("finalizers %v", va.Finalizers)
			}
			return listed(ctx, cs, node, unique(claim), true)
		})
	}
	detached := func(claim, node string) error {
		_, err := cs.StorageV1().VolumeAttachments().Get(ctx, vaName(claim, node), metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("attachment of %s on %s still there", claim, node)
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		return listed(ctx, cs, node, unique(claim), false)
	}

	mkPod("user", "vol-a", "static")
	attached("static", "vol-a")
	// The single-attach volume is refused to a second node while attached.
	mkPod("second", "vol-b", "static")
	eventually(t, 20*time.Second, "Multi-Attach error on the second pod", func() error {
		return hasEvent(ctx, cs, "second", "FailedAttachVolume", `Multi-Attach error for volume "static-1" Volume is already used by pod(s) user`)
	})
	if err := detached("static", "vol-b"); err != nil {
		t.Errorf("attached to a second node: %v", err)
	}
	if err := cs.CoreV1().Pods("default").Delete(ctx, "user", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the deleted pod's volume detached", func() error { return detached("static", "vol-a") })
	attached("static", "vol-b") // and follows the pod waiting for it
	if err := cs.CoreV1().Pods("default").Delete(ctx, "second", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the second pod's volume detached", func() error { return detached("static", "vol-b") })

	mkPod("oos", "vol-a", "dyn-a")
	mkPod("timeout", "vol-b", "dyn-b")
	attached("dyn-a", "vol-a")
	attached("dyn-b", "vol-b")
	waitPodPhase(t, cs, "oos", corev1.PodRunning)
	waitPodPhase(t, cs, "timeout", corev1.PodRunning)

	for name, a := range agents {
		a.kill9()
		killContainers(a.dataDir)
		_ = name
	}
	eventually(t, 30*time.Second, "both nodes not Ready", func() error {
		for name := range agents {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if condition(n, corev1.NodeReady).Status == corev1.ConditionTrue {
				return fmt.Errorf("%s still Ready", name)
			}
		}
		return nil
	})
	// A dead kubelet's last status: its volumes still in use.
	for node, claim := range map[string]string{"vol-a": "dyn-a", "vol-b": "dyn-b"} {
		patch, _ := json.Marshal(map[string]any{"status": map[string]any{"volumesInUse": []corev1.UniqueVolumeName{unique(claim)}}})
		if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}

	// Without the taint: the operator force-deletes the pod; the volume,
	// still in use on an unhealthy node, waits for the unmount timeout.
	if err := cs.CoreV1().Pods("default").Delete(ctx, "timeout", metav1.DeleteOptions{GracePeriodSeconds: ptrInt64(0)}); err != nil {
		t.Fatal(err)
	}
	requested := time.Now()
	never(t, wait-2*time.Second, "detach before the unmount wait", func() error {
		if detached("dyn-b", "vol-b") == nil {
			return fmt.Errorf("detached after %v", time.Since(requested))
		}
		return nil
	})
	eventually(t, 15*time.Second, "force detach after the unmount wait", func() error { return detached("dyn-b", "vol-b") })
	t.Logf("timeout: detached %v after the force delete (wait %v)", time.Since(requested).Round(100*time.Millisecond), wait)

	// With the out-of-service taint: TEC evicts, pod GC force-deletes, the
	// ADC detaches at once.
	s.mustKubectl(t, kubectl, "taint", "nodes", "vol-a", "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute")
	tainted := time.Now()
	var podGone time.Time
	eventually(t, 45*time.Second, "pod on the out-of-service node force-deleted", func() error {
		_, err := cs.CoreV1().Pods("default").Get(ctx, "oos", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			podGone = time.Now()
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("pod still there")
	})
	eventually(t, 5*time.Second, "out-of-service detach at once", func() error { return detached("dyn-a", "vol-a") })
	t.Logf("out-of-service: pod gone %v after the taint, volume detached %v after the pod",
		podGone.Sub(tainted).Round(100*time.Millisecond), time.Since(podGone).Round(100*time.Millisecond))

	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, reason := range []string{"timeout", "out-of-service"} {
		series := `attach_detach_controller_attachdetach_controller_forced_detaches{reason="` + reason + `"}`
		if v := metricValue(string(raw), series); v != 1 {
			t.Errorf("%s = %v, want 1", series, v)
		}
	}
	if v := metricValue(string(raw), `pod_gc_collector_force_delete_pods_total{namespace="default",reason="out-of-service"}`); v != 1 {
		t.Errorf("pod GC out-of-service force deletes = %v, want 1", v)
	}
}

// listed checks whether node.status.volumesAttached names v.
func listed(ctx context.Context, cs kubernetes.Interface, node string, v corev1.UniqueVolumeName, want bool) error {
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	got := false
	for _, a := range n.Status.VolumesAttached {
		got = got || a.Name == v
	}
	if got != want {
		return fmt.Errorf("node %s volumesAttached %v: listed %v, want %v", node, n.Status.VolumesAttached, got, want)
	}
	return nil
}

func hasEvent(ctx context.Context, cs kubernetes.Interface, object, reason, message string) error {
	evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + object})
	if err != nil {
		return err
	}
	for _, e := range evs.Items {
		if e.Reason == reason && strings.Contains(e.Message, message) {
			return nil
		}
	}
	return fmt.Errorf("no %s event %q on %s among %d", reason, message, object, len(evs.Items))
}

func hasFinalizerE2E(va *storagev1.VolumeAttachment, f string) bool {
	for _, x := range va.Finalizers {
		if x == f {
			return true
		}
	}
	return false
}

// regexpFields reports whether the whitespace-separated fields of out
// start with want.
func regexpFields(out string, want ...string) bool {
	f := strings.Fields(out)
	if len(f) < len(want) {
		return false
	}
	for i, w := range want {
		if f[i] != w {
			return false
		}
	}
	return true
}
