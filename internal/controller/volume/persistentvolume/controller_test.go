package persistentvolume

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeplane/nodeplane/internal/volume/shareddir"
)

// TestSharedVolumeRoot: with --shared-volume-root the server creates a
// provisioned volume's directory and removes it when the released volume
// is deleted; a handle that is not one path element never names a
// directory to remove.
func TestSharedVolumeRoot(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	client := fake.NewSimpleClientset()
	c := NewController(Config{Client: client, SharedVolumeRoot: root})
	claim := newClaim("c1", "shared", "1Gi")
	sc := class("shared", shareddir.Driver, storagev1.VolumeBindingImmediate)
	step := SyncClaim(now, newClaim("c1", "shared", "1Gi", claimAnn(AnnStorageProvisioner, shareddir.Driver)), view(nil, nil, []*storagev1.StorageClass{sc}, nil))
	if step.Kind != CreateVolume {
		t.Fatalf("step %v", step.Kind)
	}
	if err := c.write(ctx, step); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "pvc-"+string(claim.UID))
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("provisioned directory: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	pv, err := client.CoreV1().PersistentVolumes().Get(ctx, step.Volume.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv.Status.Phase = corev1.VolumeReleased
	del := SyncVolume(now, pv, view(nil, []*corev1.PersistentVolume{pv}, nil, nil))
	if del.Kind != DeleteVolume || del.RemoveDir != pv.Name {
		t.Fatalf("step %v remove %q", del.Kind, del.RemoveDir)
	}
	if err := c.write(ctx, del); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory still there: %v", err)
	}
	if _, err := client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); err == nil {
		t.Errorf("volume not deleted")
	}

	escape := newVolume("evil", "", "1Gi", refTo(claim, claim.UID), phaseV(corev1.VolumeReleased), reclaim(corev1.PersistentVolumeReclaimDelete),
		func(pv *corev1.PersistentVolume) {
			pv.Spec.CSI.VolumeHandle = ".."
			ann(AnnProvisionedBy, shareddir.Driver)(pv)
		})
	if s := SyncVolume(now, escape, view(nil, []*corev1.PersistentVolume{escape}, nil, nil)); s.Kind != DeleteVolume || s.RemoveDir != "" {
		t.Errorf("a %q handle: step %v remove %q", "..", s.Kind, s.RemoveDir)
	}
}
