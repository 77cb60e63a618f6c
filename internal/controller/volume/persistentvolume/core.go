package persistentvolume

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nodeplane/nodeplane/internal/volume/shareddir"
)

// Names the controller uses (upstream annotations and event reasons).
const (
	// ControllerName is the --controllers name.
	ControllerName = "persistentvolume-binder-controller"

	AnnBindCompleted          = "pv.kubernetes.io/bind-completed"
	AnnBoundByController      = "pv.kubernetes.io/bound-by-controller"
	AnnStorageProvisioner     = "volume.kubernetes.io/storage-provisioner"
	AnnBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
	AnnSelectedNode           = "volume.kubernetes.io/selected-node"
	AnnProvisionedBy          = "pv.kubernetes.io/provisioned-by"
	AnnBetaStorageClass       = "volume.beta.kubernetes.io/storage-class"
	AnnDefaultClass           = "storageclass.kubernetes.io/is-default-class"
	AnnBetaDefaultClass       = "storageclass.beta.kubernetes.io/is-default-class"

	ReasonWaitForFirstConsumer  = "WaitForFirstConsumer"
	ReasonFailedBinding         = "FailedBinding"
	ReasonProvisioningFailed    = "ProvisioningFailed"
	ReasonProvisioningSucceeded = "ProvisioningSucceeded"
	ReasonExternalProvisioning  = "ExternalProvisioning"
	ReasonClaimLost             = "ClaimLost"
	ReasonClaimMisbound         = "ClaimMisbound"
	ReasonVolumeFailedRecycle   = "VolumeFailedRecycle"
	ReasonVolumeDelete          = "VolumeDelete"
)

// Kind says what write a Step is.
type Kind int

// The writes.
const (
	None Kind = iota
	UpdateClaim
	UpdateClaimStatus
	UpdateVolume
	UpdateVolumeStatus
	CreateVolume
	DeleteVolume
)

// Event is an event about the claim or volume synced.
type Event struct {
	Warning         bool
	Reason, Message string
}

// Step is the next write: Claim or Volume is the object to write (a
// modified copy, or the new PV for CreateVolume, or the PV to delete).
// RemoveDir, for DeleteVolume of a shared-dir volume, is the handle whose
// directory goes with it.
type Step struct {
	Kind      Kind
	Claim     *corev1.PersistentVolumeClaim
	Volume    *corev1.PersistentVolume
	RemoveDir string
	Events    []Event
}

// View is what a sync reads besides the object itself.
type View struct {
	// Volumes are all PVs; Classes all StorageClasses.
	Volumes []*corev1.PersistentVolume
	Classes []*storagev1.StorageClass
	// Claim returns the named claim or nil.
	Claim func(namespace, name string) *corev1.PersistentVolumeClaim
	// Pods are the pods of the claim's namespace (claim syncs only).
	Pods []*corev1.Pod
	// Attached reports whether a VolumeAttachment still names the volume
	// (nil: none does); a released volume is not deleted before it is
	// detached everywhere.
	Attached func(pv string) bool
}

func (v View) volume(name string) *corev1.PersistentVolume {
	for _, pv := range v.Volumes {
		if pv.Name == name {
			return pv
		}
	}
	return nil
}

func (v View) class(name string) *storagev1.StorageClass {
	for _, sc := range v.Classes {
		if sc.Name == name {
			return sc
		}
	}
	return nil
}

// defaultClass is the newest class marked default (upstream's choice when
// several are).
func (v View) defaultClass() *storagev1.StorageClass {
	var best *storagev1.StorageClass
	for _, sc := range v.Classes {
		if sc.Annotations[AnnDefaultClass] != "true" && sc.Annotations[AnnBetaDefaultClass] != "true" {
			continue
		}
		if best == nil || sc.CreationTimestamp.After(best.CreationTimestamp.Time) ||
			(sc.CreationTimestamp.Equal(&best.CreationTimestamp) && sc.Name < best.Name) {
			best = sc
		}
	}
	return best
}

// SyncClaim decides the next write for claim.
func SyncClaim(now time.Time, claim *corev1.PersistentVolumeClaim, v View) Step {
	if claim.DeletionTimestamp != nil {
		return Step{}
	}
	if claim.Annotations[AnnBindCompleted] == "" {
		return syncUnboundClaim(now, claim, v)
	}
	if claim.Spec.VolumeName == "" {
		return claimLost(claim, ReasonClaimLost, "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!")
	}
	pv := v.volume(claim.Spec.VolumeName)
	switch {
	case pv == nil:
		return claimLost(claim, ReasonClaimLost, "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
	case pv.Spec.ClaimRef == nil || boundTo(pv, claim):
		return bind(now, claim, pv)
	}
	return claimLost(claim, ReasonClaimMisbound, "Two claims are bound to the same volume, this one is bound incorrectly")
}

func syncUnboundClaim(now time.Time, claim *corev1.PersistentVolumeClaim, v View) Step {
	if claim.Spec.VolumeName != "" {
		// Pre-bound by the user to a named volume.
		pv := v.volume(claim.Spec.VolumeName)
		switch {
		case pv == nil:
			return pending(claim)
		case pv.Spec.ClaimRef == nil:
			if why := satisfies(pv, claim); why != "" {
				return withEvent(pending(claim), false, ReasonFailedBinding, fmt.Sprintf("Cannot bind to requested volume %q: %s", pv.Name, why))
			}
			return bind(now, claim, pv)
		case boundTo(pv, claim) || preBoundTo(pv, claim):
			return bind(now, claim, pv)
		}
		return withEvent(pending(claim), true, ReasonFailedBinding, fmt.Sprintf("volume %q already bound to a different claim.", pv.Name))
	}

	if claim.Spec.StorageClassName == nil && claim.Annotations[AnnBetaStorageClass] == "" {
		if sc := v.defaultClass(); sc != nil {
			c := claim.DeepCopy()
			c.Spec.StorageClassName = &sc.Name
			return Step{Kind: UpdateClaim, Claim: c}
		}
	}
	className := claimClass(claim)
	var sc *storagev1.StorageClass
	if className != "" {
		sc = v.class(className)
	}
	node := selectedNode(claim, v.Pods)
	delay := sc != nil && sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer && node == ""
	if pv := bestMatch(claim, v.Volumes, delay); pv != nil {
		return bind(now, claim, pv)
	}
	switch {
	case delay:
		return withEvent(pending(claim), false, ReasonWaitForFirstConsumer, "waiting for first consumer to be created before binding")
	case className == "":
		return withEvent(pending(claim), false, ReasonFailedBinding, "no persistent volumes available for this claim and no storage class is set")
	case sc == nil:
		return withEvent(pending(claim), true, ReasonProvisioningFailed, fmt.Sprintf("storageclass.storage.k8s.io %q not found", className))
	case claim.Spec.Selector != nil:
		return withEvent(pending(claim), true, ReasonProvisioningFailed, "claim Selector is not supported")
	}
	if claim.Annotations[AnnStorageProvisioner] != sc.Provisioner || (node != "" && claim.Annotations[AnnSelectedNode] == "") {
		c := claim.DeepCopy()
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[AnnStorageProvisioner] = sc.Provisioner
		c.Annotations[AnnBetaStorageProvisioner] = sc.Provisioner
		if node != "" && c.Annotations[AnnSelectedNode] == "" {
			c.Annotations[AnnSelectedNode] = node
		}
		s := Step{Kind: UpdateClaim, Claim: c}
		if sc.Provisioner != shareddir.Driver {
			s.Events = []Event{{Reason: ReasonExternalProvisioning, Message: fmt.Sprintf("Waiting for a volume to be created either by the external provisioner '%s' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.", sc.Provisioner)}}
		}
		return s
	}
	if sc.Provisioner != shareddir.Driver {
		return pending(claim)
	}
	name := shareddir.ProvisionedName(string(claim.UID))
	if v.volume(name) != nil {
		return pending(claim) // provisioned; bestMatch did not take it: it no longer fits
	}
	return Step{Kind: CreateVolume, Volume: provision(claim, sc, name), Events: []Event{{
		Reason: ReasonProvisioningSucceeded, Message: fmt.Sprintf("Successfully provisioned volume %s", name),
	}}}
}

// provision builds the shared-dir PV for claim, pre-bound to it.
func provision(claim *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass, name string) *corev1.PersistentVolume {
	reclaim := corev1.PersistentVolumeReclaimDelete
	if sc.ReclaimPolicy != nil {
		reclaim = *sc.ReclaimPolicy
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{AnnProvisionedBy: sc.Provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: claim.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   claim.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              sc.Name,
			MountOptions:                  sc.MountOptions,
			VolumeMode:                    claim.Spec.VolumeMode,
			ClaimRef:                      claimRef(claim),
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: shareddir.Driver, VolumeHandle: name,
			}},
		},
	}
}

// bind returns the next of the four binding writes still to do.
func bind(now time.Time, claim *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) Step {
	if !boundTo(pv, claim) {
		p := pv.DeepCopy()
		if p.Spec.ClaimRef == nil {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[AnnBoundByController] = "yes"
		}
		p.Spec.ClaimRef = claimRef(claim)
		return Step{Kind: UpdateVolume, Volume: p}
	}
	if pv.Status.Phase != corev1.VolumeBound {
		return volumePhase(now, pv, corev1.VolumeBound)
	}
	if claim.Spec.VolumeName != pv.Name || claim.Annotations[AnnBindCompleted] != "yes" {
		c := claim.DeepCopy()
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		if c.Spec.VolumeName == "" {
			c.Annotations[AnnBoundByController] = "yes"
		}
		c.Spec.VolumeName = pv.Name
		c.Annotations[AnnBindCompleted] = "yes"
		return Step{Kind: UpdateClaim, Claim: c}
	}
	want := corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: pv.Spec.AccessModes, Capacity: pv.Spec.Capacity}
	if claim.Status.Phase != want.Phase || !sameModes(claim.Status.AccessModes, want.AccessModes) || !sameQuantity(claim.Status.Capacity, want.Capacity) {
		c := claim.DeepCopy()
		c.Status.Phase, c.Status.AccessModes, c.Status.Capacity = want.Phase, want.AccessModes, want.Capacity
		return Step{Kind: UpdateClaimStatus, Claim: c}
	}
	return Step{}
}

// SyncVolume decides the next write for pv.
func SyncVolume(now time.Time, pv *corev1.PersistentVolume, v View) Step {
	if pv.DeletionTimestamp != nil {
		return syncDeletedVolume(now, pv, v)
	}
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		if pv.Status.Phase != corev1.VolumeAvailable {
			return volumePhase(now, pv, corev1.VolumeAvailable)
		}
		return Step{}
	}
	claim := v.Claim(ref.Namespace, ref.Name)
	if claim != nil && claim.UID != ref.UID {
		claim = nil // a namesake of the claim that was deleted
	}
	if claim == nil {
		switch pv.Status.Phase {
		case corev1.VolumeReleased:
		case corev1.VolumeFailed:
			return Step{}
		default:
			return volumePhase(now, pv, corev1.VolumeReleased)
		}
		switch pv.Spec.PersistentVolumeReclaimPolicy {
		case corev1.PersistentVolumeReclaimRetain:
			return Step{}
		case corev1.PersistentVolumeReclaimRecycle:
			s := volumePhase(now, pv, corev1.VolumeFailed)
			s.Volume.Status.Message = "No recycler plugin found for the volume!"
			return withEvent(s, true, ReasonVolumeFailedRecycle, "No recycler plugin found for the volume!")
		}
		// Delete: ours to delete only when it is a shared-dir volume; others
		// wait for their external provisioner, as upstream's do.
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != shareddir.Driver {
			return Step{}
		}
		if v.Attached != nil && v.Attached(pv.Name) {
			return Step{}
		}
		s := Step{Kind: DeleteVolume, Volume: pv}
		if shareddir.ValidHandle(pv.Spec.CSI.VolumeHandle) == "" && pv.Annotations[AnnProvisionedBy] == shareddir.Driver {
			s.RemoveDir = pv.Spec.CSI.VolumeHandle
		}
		return s
	}
	switch claim.Spec.VolumeName {
	case "":
		return Step{} // the claim sync binds it
	case pv.Name:
		if pv.Status.Phase != corev1.VolumeBound {
			return volumePhase(now, pv, corev1.VolumeBound)
		}
		return Step{}
	}
	// The claim is bound to another volume.
	if pv.Annotations[AnnBoundByController] != "" {
		p := pv.DeepCopy()
		p.Spec.ClaimRef = nil
		delete(p.Annotations, AnnBoundByController)
		return Step{Kind: UpdateVolume, Volume: p}
	}
	return Step{}
}

// syncDeletedVolume: a volume deleted while Bound is kept by its
// kubernetes.io/pv-protection finalizer; it only needs to become Released
// when its claim goes, so the protection controller lets it go. Nothing
// else (binding, reclaim) is done to a volume being deleted.
func syncDeletedVolume(now time.Time, pv *corev1.PersistentVolume, v View) Step {
	if pv.Status.Phase != corev1.VolumeBound || pv.Spec.ClaimRef == nil {
		return Step{}
	}
	ref := pv.Spec.ClaimRef
	if claim := v.Claim(ref.Namespace, ref.Name); claim != nil && (ref.UID == "" || claim.UID == ref.UID) {
		return Step{}
	}
	return volumePhase(now, pv, corev1.VolumeReleased)
}

func volumePhase(now time.Time, pv *corev1.PersistentVolume, phase corev1.PersistentVolumePhase) Step {
	p := pv.DeepCopy()
	p.Status.Phase = phase
	p.Status.Message, p.Status.Reason = "", ""
	t := metav1.NewTime(now)
	p.Status.LastPhaseTransitionTime = &t
	return Step{Kind: UpdateVolumeStatus, Volume: p}
}

func pending(claim *corev1.PersistentVolumeClaim) Step {
	if claim.Status.Phase == corev1.ClaimPending {
		return Step{}
	}
	c := claim.DeepCopy()
	c.Status.Phase = corev1.ClaimPending
	return Step{Kind: UpdateClaimStatus, Claim: c}
}

func claimLost(claim *corev1.PersistentVolumeClaim, reason, msg string) Step {
	if claim.Status.Phase == corev1.ClaimLost {
		return Step{}
	}
	c := claim.DeepCopy()
	c.Status.Phase = corev1.ClaimLost
	return Step{Kind: UpdateClaimStatus, Claim: c, Events: []Event{{Warning: true, Reason: reason, Message: msg}}}
}

func withEvent(s Step, warning bool, reason, msg string) Step {
	s.Events = append(s.Events, Event{Warning: warning, Reason: reason, Message: msg})
	return s
}

func claimRef(claim *corev1.PersistentVolumeClaim) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: claim.Namespace, Name: claim.Name,
		UID: claim.UID, ResourceVersion: claim.ResourceVersion}
}

func boundTo(pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) bool {
	r := pv.Spec.ClaimRef
	return r != nil && r.Namespace == claim.Namespace && r.Name == claim.Name && r.UID == claim.UID
}

// preBoundTo: the volume names the claim but not yet its UID.
func preBoundTo(pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) bool {
	r := pv.Spec.ClaimRef
	return r != nil && r.Namespace == claim.Namespace && r.Name == claim.Name && r.UID == ""
}

func claimClass(claim *corev1.PersistentVolumeClaim) string {
	if c, ok := claim.Annotations[AnnBetaStorageClass]; ok {
		return c
	}
	if claim.Spec.StorageClassName != nil {
		return *claim.Spec.StorageClassName
	}
	return ""
}

func volumeClass(pv *corev1.PersistentVolume) string {
	if c, ok := pv.Annotations[AnnBetaStorageClass]; ok {
		return c
	}
	return pv.Spec.StorageClassName
}

// selectedNode: the annotation, else the node of a running pod using the claim.
func selectedNode(claim *corev1.PersistentVolumeClaim, pods []*corev1.Pod) string {
	if n := claim.Annotations[AnnSelectedNode]; n != "" {
		return n
	}
	var names []string
	byName := map[string]string{}
	for _, p := range pods {
		if p.Namespace != claim.Namespace || p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, vol := range p.Spec.Volumes {
			if vol.PersistentVolumeClaim != nil && vol.PersistentVolumeClaim.ClaimName == claim.Name {
				names = append(names, p.Name)
				byName[p.Name] = p.Spec.NodeName
			}
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	return byName[names[0]]
}

// satisfies says why pv cannot serve claim ("" when it can).
func satisfies(pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) string {
	if pv.DeletionTimestamp != nil {
		return "volume is being deleted"
	}
	if volumeClass(pv) != claimClass(claim) {
		return "storageClassName does not match"
	}
	if mode(pv.Spec.VolumeMode) != mode(claim.Spec.VolumeMode) {
		return "incompatible volumeMode"
	}
	for _, m := range claim.Spec.AccessModes {
		if !hasMode(pv.Spec.AccessModes, m) {
			return "incompatible accessMode"
		}
	}
	want := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	have := pv.Spec.Capacity[corev1.ResourceStorage]
	if have.Cmp(want) < 0 {
		return "requested PV is too small"
	}
	if claim.Spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(claim.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pv.Labels)) {
			return "volume does not match the claim's selector"
		}
	}
	return ""
}

// bestMatch: a volume pre-bound to the claim if one fits, else the
// smallest available volume that fits (none when binding is delayed).
func bestMatch(claim *corev1.PersistentVolumeClaim, pvs []*corev1.PersistentVolume, delay bool) *corev1.PersistentVolume {
	var best *corev1.PersistentVolume
	for _, pv := range pvs {
		if satisfies(pv, claim) != "" {
			continue
		}
		if boundTo(pv, claim) || preBoundTo(pv, claim) {
			return pv
		}
		if delay || pv.Spec.ClaimRef != nil || pv.Status.Phase == corev1.VolumeReleased || pv.Status.Phase == corev1.VolumeFailed {
			continue
		}
		if best == nil {
			best = pv
			continue
		}
		a, b := pv.Spec.Capacity[corev1.ResourceStorage], best.Spec.Capacity[corev1.ResourceStorage]
		if c := a.Cmp(b); c < 0 || (c == 0 && pv.Name < best.Name) {
			best = pv
		}
	}
	return best
}

func mode(m *corev1.PersistentVolumeMode) corev1.PersistentVolumeMode {
	if m == nil {
		return corev1.PersistentVolumeFilesystem
	}
	return *m
}

func hasMode(modes []corev1.PersistentVolumeAccessMode, m corev1.PersistentVolumeAccessMode) bool {
	for _, x := range modes {
		if x == m {
			return true
		}
	}
	return false
}

func sameModes(a, b []corev1.PersistentVolumeAccessMode) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sameQuantity(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		o, ok := b[k]
		if !ok || q.Cmp(o) != 0 {
			return false
		}
	}
	return true
}
