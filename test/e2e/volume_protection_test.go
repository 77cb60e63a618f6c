package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestVolumeProtection runs the StorageObjectInUseProtection admission
// plugin and the two protection controllers against the real server: a
// new claim and volume carry kubernetes.io/pvc-protection and
// kubernetes.io/pv-protection; deleting the claim while a scheduled pod
// uses it, and the volume while it is Bound, leaves both Terminating (for
// a watched window); once the pod is gone the claim goes, the volume
// becomes Released, and then it goes too.
func TestVolumeProtection(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{args: []string{"--leader-elect=false"}})
	cs := s.client()
	kubectl := kubectlPath(t)
	s.mustKubectl(t, kubectl, "apply", "-f", writeManifest(t, `apiVersion: v1
kind: PersistentVolume
metadata: {name: kept}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  csi: {driver: nodeplane.io/shared-dir, volumeHandle: kept}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  storageClassName: ""
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: user}
spec:
  nodeName: elsewhere
  containers: [{name: c, image: /bin/true}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: data}}]
`))
	eventually(t, 20*time.Second, "claim data Bound to kept", func() error {
		c, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.Status.Phase != corev1.ClaimBound || c.Spec.VolumeName != "kept" {
			return fmt.Errorf("phase %s volume %q", c.Status.Phase, c.Spec.VolumeName)
		}
		return nil
	})
	claim, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(claim.Finalizers, "kubernetes.io/pvc-protection") || !slices.Contains(pv.Finalizers, "kubernetes.io/pv-protection") {
		t.Fatalf("finalizers: claim %v, volume %v", claim.Finalizers, pv.Finalizers)
	}

	s.mustKubectl(t, kubectl, "delete", "pvc", "data", "--wait=false")
	s.mustKubectl(t, kubectl, "delete", "pv", "kept", "--wait=false")
	never(t, 3*time.Second, "the used claim or the bound volume removed", func() error {
		c, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data", metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		if c.DeletionTimestamp == nil {
			return fmt.Errorf("claim not marked for deletion")
		}
		v, err := cs.CoreV1().PersistentVolumes().Get(ctx, "kept", metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("volume: %w", err)
		}
		if v.DeletionTimestamp == nil || v.Status.Phase != corev1.VolumeBound {
			return fmt.Errorf("volume deletionTimestamp %v phase %s", v.DeletionTimestamp, v.Status.Phase)
		}
		return nil
	})
	if out := s.mustKubectl(t, kubectl, "get", "pvc", "data", "--no-headers"); !regexpFields(out, "data", "Terminating", "kept") {
		t.Errorf("kubectl get pvc of a claim being deleted: %q", out)
	}
	if out := s.mustKubectl(t, kubectl, "get", "pv", "kept", "--no-headers"); !regexpFields(out, "kept", "1Gi", "RWO", "Retain", "Terminating", "default/data") {
		t.Errorf("kubectl get pv of a bound volume being deleted: %q", out)
	}

	if err := cs.CoreV1().Pods("default").Delete(ctx, "user", metav1.DeleteOptions{GracePeriodSeconds: ptrInt64(0)}); err != nil {
		t.Fatal(err)
	}
	podGone := time.Now()
	var claimGone time.Time
	eventually(t, 10*time.Second, "claim and volume removed once no pod uses the claim", func() error {
		if claimGone.IsZero() {
			if _, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("claim still there (%v)", err)
			}
			claimGone = time.Now()
		}
		v, err := cs.CoreV1().PersistentVolumes().Get(ctx, "kept", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("volume phase %s finalizers %v", v.Status.Phase, v.Finalizers)
	})
	t.Logf("pod deleted: claim gone after %v, volume gone after %v",
		claimGone.Sub(podGone).Round(10*time.Millisecond), time.Since(podGone).Round(10*time.Millisecond))
}
