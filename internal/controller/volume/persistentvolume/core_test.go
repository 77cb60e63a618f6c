package persistentvolume

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodeplane/nodeplane/internal/volume/shareddir"
)

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func gi(n string) resource.Quantity { return resource.MustParse(n) }

func newClaim(name, class, size string, opts ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: gi(size)}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
	if class != "-" {
		c.Spec.StorageClassName = ptr.To(class)
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func newVolume(name, class, size string, opts ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: gi(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: shareddir.Driver, VolumeHandle: name}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable},
	}
	for _, o := range opts {
		o(pv)
	}
	return pv
}

func class(name, provisioner string, mode storagev1.VolumeBindingMode) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner,
		ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimDelete), VolumeBindingMode: &mode}
}

func refTo(c *corev1.PersistentVolumeClaim, uid types.UID) func(*corev1.PersistentVolume) {
	return func(pv *corev1.PersistentVolume) {
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: c.Namespace, Name: c.Name, UID: uid}
	}
}
func phaseV(p corev1.PersistentVolumePhase) func(*corev1.PersistentVolume) {
	return func(pv *corev1.PersistentVolume) { pv.Status.Phase = p }
}
func reclaim(p corev1.PersistentVolumeReclaimPolicy) func(*corev1.PersistentVolume) {
	return func(pv *corev1.PersistentVolume) { pv.Spec.PersistentVolumeReclaimPolicy = p }
}
func ann(k, v string) func(metav1.Object) {
	return func(o metav1.Object) {
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[k] = v
		o.SetAnnotations(a)
	}
}
func claimAnn(k, v string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) { ann(k, v)(c) }
}
func bound(pvName string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) {
		c.Spec.VolumeName = pvName
		ann(AnnBindCompleted, "yes")(c)
	}
}

func podUsing(name, claim, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{NodeName: node,
		Volumes: []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}}
}

func view(claims []*corev1.PersistentVolumeClaim, pvs []*corev1.PersistentVolume, classes []*storagev1.StorageClass, pods []*corev1.Pod) View {
	return View{Volumes: pvs, Classes: classes, Pods: pods, Claim: func(ns, name string) *corev1.PersistentVolumeClaim {
		for _, c := range claims {
			if c.Namespace == ns && c.Name == name {
				return c
			}
		}
		return nil
	}}
}

func TestSyncClaim(t *testing.T) {
	shared := class("shared", shareddir.Driver, storagev1.VolumeBindingImmediate)
	late := class("late", shareddir.Driver, storagev1.VolumeBindingWaitForFirstConsumer)
	ext := class("ebs", "ebs.csi.aws.com", storagev1.VolumeBindingImmediate)
	c1 := newClaim("c1", "", "1Gi")
	tests := []struct {
		name      string
		claim     *corev1.PersistentVolumeClaim
		pvs       []*corev1.PersistentVolume
		classes   []*storagev1.StorageClass
		pods      []*corev1.Pod
		want      Kind
		check     func(t *testing.T, s Step)
		wantEvent string
	}{
		{name: "an unbound claim first puts its claimRef on the smallest fitting available volume",
			claim: c1, pvs: []*corev1.PersistentVolume{newVolume("big", "", "10Gi"), newVolume("small", "", "2Gi"), newVolume("tiny", "", "500Mi")},
			want: UpdateVolume, check: func(t *testing.T, s Step) {
				if s.Volume.Name != "small" || s.Volume.Spec.ClaimRef.UID != c1.UID || s.Volume.Annotations[AnnBoundByController] != "yes" {
					t.Errorf("bound %s %+v %v", s.Volume.Name, s.Volume.Spec.ClaimRef, s.Volume.Annotations)
				}
			}},
		{name: "then sets the volume Bound",
			claim: c1, pvs: []*corev1.PersistentVolume{newVolume("small", "", "2Gi", refTo(c1, c1.UID))},
			want: UpdateVolumeStatus, check: func(t *testing.T, s Step) {
				if s.Volume.Status.Phase != corev1.VolumeBound || s.Volume.Status.LastPhaseTransitionTime == nil {
					t.Errorf("status %+v", s.Volume.Status)
				}
			}},
		{name: "then names the volume in the claim with the bind annotations",
			claim: c1, pvs: []*corev1.PersistentVolume{newVolume("small", "", "2Gi", refTo(c1, c1.UID), phaseV(corev1.VolumeBound))},
			want: UpdateClaim, check: func(t *testing.T, s Step) {
				if s.Claim.Spec.VolumeName != "small" || s.Claim.Annotations[AnnBindCompleted] != "yes" || s.Claim.Annotations[AnnBoundByController] != "yes" {
					t.Errorf("claim %+v %v", s.Claim.Spec, s.Claim.Annotations)
				}
			}},
		{name: "and last sets the claim Bound with the volume's capacity and modes",
			claim: newClaim("c1", "", "1Gi", bound("small")), pvs: []*corev1.PersistentVolume{newVolume("small", "", "2Gi", refTo(c1, c1.UID), phaseV(corev1.VolumeBound))},
			want: UpdateClaimStatus, check: func(t *testing.T, s Step) {
				q := s.Claim.Status.Capacity[corev1.ResourceStorage]
				if s.Claim.Status.Phase != corev1.ClaimBound || q.String() != "2Gi" || len(s.Claim.Status.AccessModes) != 1 {
					t.Errorf("status %+v", s.Claim.Status)
				}
			}},
		{name: "a volume of another class, too small, or with other access modes does not fit",
			claim: c1, pvs: []*corev1.PersistentVolume{newVolume("other", "gold", "5Gi"), newVolume("small", "", "500Mi"), newVolume("rox", "", "5Gi", func(pv *corev1.PersistentVolume) {
				pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}
			})},
			want: None, wantEvent: "FailedBinding: no persistent volumes available for this claim and no storage class is set"},
		{name: "a volume pre-bound to the claim by name wins over a smaller one, without bound-by-controller",
			claim: c1, pvs: []*corev1.PersistentVolume{newVolume("small", "", "1Gi"), newVolume("mine", "", "5Gi", refTo(c1, ""))},
			want: UpdateVolume, check: func(t *testing.T, s Step) {
				if s.Volume.Name != "mine" || s.Volume.Annotations[AnnBoundByController] != "" {
					t.Errorf("bound %s %v", s.Volume.Name, s.Volume.Annotations)
				}
			}},
		{name: "a released volume is not rebound",
			claim: c1, pvs: []*corev1.PersistentVolume{newVolume("old", "", "5Gi", refTo(newClaim("gone", "", "1Gi"), "uid-gone"), phaseV(corev1.VolumeReleased))},
			want: None, wantEvent: "FailedBinding"},
		{name: "a claim naming a volume bound to a different claim stays Pending with a warning",
			claim: newClaim("c1", "", "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "taken" }),
			pvs:   []*corev1.PersistentVolume{newVolume("taken", "", "5Gi", refTo(newClaim("other", "", "1Gi"), "uid-other"), phaseV(corev1.VolumeBound))},
			want:  None, wantEvent: `FailedBinding: volume "taken" already bound to a different claim.`},
		{name: "a claim naming a free volume that does not fit stays Pending",
			claim: newClaim("c1", "", "10Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "small" }),
			pvs:   []*corev1.PersistentVolume{newVolume("small", "", "1Gi")},
			want:  None, wantEvent: `FailedBinding: Cannot bind to requested volume "small": requested PV is too small`},
		{name: "a claim naming a free volume that fits binds it",
			claim: newClaim("c1", "", "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "v" }),
			pvs:   []*corev1.PersistentVolume{newVolume("v", "", "1Gi")}, want: UpdateVolume},
		{name: "a claim naming a missing storage class is accepted and stays Pending with ProvisioningFailed",
			claim: newClaim("c1", "nope", "1Gi"), want: None, wantEvent: `ProvisioningFailed: storageclass.storage.k8s.io "nope" not found`},
		{name: "a claim of a shared-dir class is first annotated with its provisioner",
			claim: newClaim("c1", "shared", "1Gi"), classes: []*storagev1.StorageClass{shared}, want: UpdateClaim,
			check: func(t *testing.T, s Step) {
				if s.Claim.Annotations[AnnStorageProvisioner] != shareddir.Driver || s.Claim.Annotations[AnnBetaStorageProvisioner] != shareddir.Driver {
					t.Errorf("annotations %v", s.Claim.Annotations)
				}
			}},
		{name: "then gets a provisioned volume pre-bound to it",
			claim: newClaim("c1", "shared", "1Gi", claimAnn(AnnStorageProvisioner, shareddir.Driver)), classes: []*storagev1.StorageClass{shared},
			want: CreateVolume, wantEvent: "ProvisioningSucceeded: Successfully provisioned volume pvc-uid-c1",
			check: func(t *testing.T, s Step) {
				pv := s.Volume
				q := pv.Spec.Capacity[corev1.ResourceStorage]
				if pv.Name != "pvc-uid-c1" || pv.Spec.CSI.VolumeHandle != "pvc-uid-c1" || pv.Spec.CSI.Driver != shareddir.Driver ||
					pv.Spec.ClaimRef.UID != "uid-c1" || pv.Spec.StorageClassName != "shared" || q.String() != "1Gi" ||
					pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Annotations[AnnProvisionedBy] != shareddir.Driver {
					t.Errorf("provisioned %+v", pv)
				}
			}},
		{name: "a provisioned volume is then bound like a static one",
			claim:   newClaim("c1", "shared", "1Gi", claimAnn(AnnStorageProvisioner, shareddir.Driver)),
			pvs:     []*corev1.PersistentVolume{newVolume("pvc-uid-c1", "shared", "1Gi", refTo(c1, c1.UID))},
			classes: []*storagev1.StorageClass{shared}, want: UpdateVolumeStatus},
		{name: "a claim of another provisioner is annotated and waits for it",
			claim: newClaim("c1", "ebs", "1Gi"), classes: []*storagev1.StorageClass{ext}, want: UpdateClaim, wantEvent: "ExternalProvisioning: Waiting for a volume to be created either by the external provisioner 'ebs.csi.aws.com'"},
		{name: "an annotated claim of another provisioner waits quietly",
			claim: newClaim("c1", "ebs", "1Gi", claimAnn(AnnStorageProvisioner, "ebs.csi.aws.com")), classes: []*storagev1.StorageClass{ext}, want: None},
		{name: "a WaitForFirstConsumer claim without a scheduled pod waits, even with a fitting volume",
			claim: newClaim("c1", "late", "1Gi"), pvs: []*corev1.PersistentVolume{newVolume("v", "late", "1Gi")}, classes: []*storagev1.StorageClass{late},
			pods: []*corev1.Pod{podUsing("p", "c1", "")}, want: None, wantEvent: "WaitForFirstConsumer: waiting for first consumer to be created before binding"},
		{name: "a WaitForFirstConsumer claim binds once a pod using it is on a node",
			claim: newClaim("c1", "late", "1Gi"), pvs: []*corev1.PersistentVolume{newVolume("v", "late", "1Gi")}, classes: []*storagev1.StorageClass{late},
			pods: []*corev1.Pod{podUsing("p", "c1", "n1")}, want: UpdateVolume},
		{name: "a WaitForFirstConsumer claim is provisioned once its pod is on a node, recording the node",
			claim: newClaim("c1", "late", "1Gi"), classes: []*storagev1.StorageClass{late},
			pods: []*corev1.Pod{podUsing("p", "c1", "n1")}, want: UpdateClaim,
			check: func(t *testing.T, s Step) {
				if s.Claim.Annotations[AnnSelectedNode] != "n1" || s.Claim.Annotations[AnnStorageProvisioner] != shareddir.Driver {
					t.Errorf("annotations %v", s.Claim.Annotations)
				}
			}},
		{name: "the selected-node annotation is honoured as the scheduler's choice",
			claim: newClaim("c1", "late", "1Gi", claimAnn(AnnSelectedNode, "n2")), pvs: []*corev1.PersistentVolume{newVolume("v", "late", "1Gi")},
			classes: []*storagev1.StorageClass{late}, want: UpdateVolume},
		{name: "a claim with no class is given the default class",
			claim: newClaim("c1", "-", "1Gi"), classes: []*storagev1.StorageClass{shared, func() *storagev1.StorageClass {
				sc := class("std", shareddir.Driver, storagev1.VolumeBindingImmediate)
				sc.Annotations = map[string]string{AnnDefaultClass: "true"}
				return sc
			}()}, want: UpdateClaim, check: func(t *testing.T, s Step) {
				if ptr.Deref(s.Claim.Spec.StorageClassName, "") != "std" {
					t.Errorf("class %v", s.Claim.Spec.StorageClassName)
				}
			}},
		{name: "a bound claim whose volume is gone is Lost",
			claim: newClaim("c1", "", "1Gi", bound("gone")), want: UpdateClaimStatus,
			wantEvent: "ClaimLost: Bound claim has lost its PersistentVolume. Data on the volume is lost!",
			check: func(t *testing.T, s Step) {
				if s.Claim.Status.Phase != corev1.ClaimLost {
					t.Errorf("phase %s", s.Claim.Status.Phase)
				}
			}},
		{name: "a bound claim whose volume is bound to another claim is Lost as misbound",
			claim: newClaim("c1", "", "1Gi", bound("v")), pvs: []*corev1.PersistentVolume{newVolume("v", "", "1Gi", refTo(newClaim("other", "", "1Gi"), "uid-other"))},
			want: UpdateClaimStatus, wantEvent: "ClaimMisbound: Two claims are bound to the same volume, this one is bound incorrectly"},
		{name: "a fully bound claim needs nothing",
			claim: func() *corev1.PersistentVolumeClaim {
				c := newClaim("c1", "", "1Gi", bound("v"))
				c.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Capacity: corev1.ResourceList{corev1.ResourceStorage: gi("1Gi")}}
				return c
			}(), pvs: []*corev1.PersistentVolume{newVolume("v", "", "1Gi", refTo(c1, c1.UID), phaseV(corev1.VolumeBound))}, want: None},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := SyncClaim(now, tt.claim, view([]*corev1.PersistentVolumeClaim{tt.claim}, tt.pvs, tt.classes, tt.pods))
			if s.Kind != tt.want {
				t.Fatalf("step %v, want %v (%+v)", s.Kind, tt.want, s)
			}
			var events []string
			for _, e := range s.Events {
				events = append(events, e.Reason+": "+e.Message)
			}
			if got := strings.Join(events, "\n"); !strings.HasPrefix(got, tt.wantEvent) || (tt.wantEvent == "") != (got == "") {
				t.Errorf("events %q, want %q", got, tt.wantEvent)
			}
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}

func TestSyncVolume(t *testing.T) {
	c1 := newClaim("c1", "", "1Gi", bound("v"))
	namesake := newClaim("c1", "", "1Gi")
	namesake.UID = "uid-new"
	provisioned := func(pv *corev1.PersistentVolume) { ann(AnnProvisionedBy, shareddir.Driver)(pv) }
	deleting := func(pv *corev1.PersistentVolume) { pv.DeletionTimestamp = &metav1.Time{Time: now} }
	tests := []struct {
		name     string
		pv       *corev1.PersistentVolume
		claims   []*corev1.PersistentVolumeClaim
		attached bool
		want     Kind
		phase    corev1.PersistentVolumePhase
		rmDir    string
	}{
		{name: "a new volume becomes Available", pv: newVolume("v", "", "1Gi", phaseV(corev1.VolumePending)), want: UpdateVolumeStatus, phase: corev1.VolumeAvailable},
		{name: "a volume pre-bound by name waits Available", pv: newVolume("v", "", "1Gi", refTo(c1, ""), phaseV(corev1.VolumePending)), want: UpdateVolumeStatus, phase: corev1.VolumeAvailable},
		{name: "a volume whose claim names it becomes Bound", pv: newVolume("v", "", "1Gi", refTo(c1, c1.UID)), claims: []*corev1.PersistentVolumeClaim{c1}, want: UpdateVolumeStatus, phase: corev1.VolumeBound},
		{name: "a volume whose claim was deleted is Released", pv: newVolume("v", "", "1Gi", refTo(c1, c1.UID), phaseV(corev1.VolumeBound)), want: UpdateVolumeStatus, phase: corev1.VolumeReleased},
		{name: "a new claim of the same name does not hold the volume", pv: newVolume("v", "", "1Gi", refTo(c1, c1.UID), phaseV(corev1.VolumeBound)),
			claims: []*corev1.PersistentVolumeClaim{namesake}, want: UpdateVolumeStatus, phase: corev1.VolumeReleased},
		{name: "a released Retain volume stays Released", pv: newVolume("v", "", "1Gi", refTo(c1, c1.UID), phaseV(corev1.VolumeReleased)), want: None},
		{name: "a released Delete volume of the driver is deleted with its directory",
			pv: newVolume("pvc-x", "", "1Gi", refTo(c1, c1.UID), phaseV(corev1.VolumeReleased), reclaim(corev1.PersistentVolumeReclaimDelete), provisioned), want: DeleteVolume, rmDir: "pvc-x"},
		{name: "a released static Delete volume is deleted but its directory kept",
			pv: newVolume("static", "", "1Gi", refTo(c1, c1.UID), phaseV(corev1.VolumeReleased), reclaim(corev1.PersistentVolumeReclaimDelete)), want: DeleteVolume},
		{name: "a released Delete volume still attached somewhere waits for the detach",
			pv: newVolume("pvc-x", "", "1Gi", refTo(c1, c1.UID), phaseV(corev1.VolumeReleased), reclaim(corev1.PersistentVolumeReclaimDelete), provisioned), attached: true, want: None},
		{name: "a released Delete volume of another driver waits for its provisioner",
			pv: newVolume("v", "", "1Gi", refTo(c1, c1.UID), phaseV(corev1.VolumeReleased), reclaim(corev1.PersistentVolumeReclaimDelete), func(pv *corev1.PersistentVolume) {
				pv.Spec.CSI.Driver = "ebs.csi.aws.com"
			}), want: None},
		{name: "a released Recycle volume Fails: there is no recycler",
			pv: newVolume("v", "", "1Gi", refTo(c1, c1.UID), phaseV(corev1.VolumeReleased), reclaim(corev1.PersistentVolumeReclaimRecycle)), want: UpdateVolumeStatus, phase: corev1.VolumeFailed},
		{name: "a volume the controller bound to a claim that took another volume is unbound",
			pv:     newVolume("w", "", "1Gi", refTo(c1, c1.UID), func(pv *corev1.PersistentVolume) { ann(AnnBoundByController, "yes")(pv) }),
			claims: []*corev1.PersistentVolumeClaim{c1}, want: UpdateVolume},
		{name: "a volume the user pre-bound to a claim that took another volume is left alone",
			pv: newVolume("w", "", "1Gi", refTo(c1, c1.UID)), claims: []*corev1.PersistentVolumeClaim{c1}, want: None},
		{name: "a deleted bound volume whose claim is there stays Bound (pv-protection keeps it)",
			pv: newVolume("v", "", "1Gi", refTo(c1, c1.UID), phaseV(corev1.VolumeBound), deleting), claims: []*corev1.PersistentVolumeClaim{c1}, want: None},
		{name: "a deleted bound volume whose claim went is Released (so pv-protection lets it go)",
			pv: newVolume("v", "", "1Gi", refTo(c1, c1.UID), phaseV(corev1.VolumeBound), deleting), want: UpdateVolumeStatus, phase: corev1.VolumeReleased},
		{name: "a deleted released Delete volume is not reclaimed again",
			pv: newVolume("pvc-x", "", "1Gi", refTo(c1, c1.UID), phaseV(corev1.VolumeReleased), reclaim(corev1.PersistentVolumeReclaimDelete), provisioned, deleting), want: None},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := view(tt.claims, []*corev1.PersistentVolume{tt.pv}, nil, nil)
			v.Attached = func(string) bool { return tt.attached }
			s := SyncVolume(now, tt.pv, v)
			if s.Kind != tt.want {
				t.Fatalf("step %v, want %v", s.Kind, tt.want)
			}
			if tt.phase != "" && s.Volume.Status.Phase != tt.phase {
				t.Errorf("phase %s, want %s", s.Volume.Status.Phase, tt.phase)
			}
			if s.RemoveDir != tt.rmDir {
				t.Errorf("remove dir %q, want %q", s.RemoveDir, tt.rmDir)
			}
			if tt.want == UpdateVolume && s.Volume.Spec.ClaimRef != nil {
				t.Errorf("claimRef kept: %+v", s.Volume.Spec.ClaimRef)
			}
		})
	}
}
