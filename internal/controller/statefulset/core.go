package statefulset

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeplane/nodeplane/internal/controller/ownership"
	"github.com/nodeplane/nodeplane/internal/controller/replicaset"
)

// Names the controller uses, as upstream.
const (
	// ControllerName is the --controllers name and the event source.
	ControllerName = "statefulset-controller"

	// PodNameLabel and PodIndexLabel are put on every pod.
	PodNameLabel  = appsv1.StatefulSetPodNameLabel
	PodIndexLabel = appsv1.PodIndexLabel
	// RevisionLabel names the ControllerRevision a pod was made from.
	RevisionLabel = appsv1.ControllerRevisionHashLabelKey
)

// Kind is the GroupVersionKind the controller references its pods' owner by.
var Kind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")

// Input is what Decide reads.
type Input struct {
	Set *appsv1.StatefulSet
	// Pods are the pods the set controls and the orphans of its namespace.
	Pods []*corev1.Pod
	// Claims are the namespace's claims by name.
	Claims map[string]*corev1.PersistentVolumeClaim
	// Revisions are the ControllerRevisions the set controls.
	Revisions []*appsv1.ControllerRevision
	Now       time.Time
}

// Plan is what the shell does, in this order.
type Plan struct {
	Adopt, Release []*corev1.Pod
	// Revision is a revision to create (the update revision is new).
	Revision *appsv1.ControllerRevision
	// CreateClaims are claims to create before the pods that use them.
	CreateClaims []*corev1.PersistentVolumeClaim
	// OwnClaims are existing claims whose owner references change (the
	// retention policy).
	OwnClaims  []*corev1.PersistentVolumeClaim
	CreatePods []*corev1.Pod
	DeletePods []*corev1.Pod
	// DeleteRevisions are old revisions past revisionHistoryLimit.
	DeleteRevisions []*appsv1.ControllerRevision
	Status          appsv1.StatefulSetStatus
	// RequeueAfter > 0 asks for another sync (a pod becoming available).
	RequeueAfter time.Duration
}

// PodName is the name of the set's pod with ordinal.
func PodName(set string, ordinal int) string { return set + "-" + strconv.Itoa(ordinal) }

// ClaimName is the name of the claim from template for the set's pod with
// ordinal.
func ClaimName(template, set string, ordinal int) string {
	return template + "-" + PodName(set, ordinal)
}

// ordinalOf parses the ordinal of a pod named <set>-<ordinal>; -1 when the
// name is not of that form.
func ordinalOf(set, pod string) int {
	rest, ok := strings.CutPrefix(pod, set+"-")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return -1
	}
	return n
}

// Decide plans one sync of in.Set.
func Decide(in Input) (Plan, error) {
	set := in.Set
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return Plan{}, fmt.Errorf("stateful set %s/%s: invalid selector: %w", set.Namespace, set.Name, err)
	}
	claimed := ownership.Claim(set, sel, in.Pods)
	plan := Plan{Adopt: claimed.Adopt, Release: claimed.Release}

	// Revisions: the update revision is the current template's.
	update, revs := updateRevision(set, in.Revisions)
	if !containsRevision(in.Revisions, update.Name) {
		plan.Revision = update
	}
	currentName := set.Status.CurrentRevision
	current := findRevision(revs, currentName)
	if current == nil {
		current, currentName = update, update.Name
	}

	replicas := int(derefInt32(set.Spec.Replicas, 1))
	start := 0
	if set.Spec.Ordinals != nil {
		start = int(set.Spec.Ordinals.Start)
	}
	byOrdinal := map[int]*corev1.Pod{}
	var condemned []*corev1.Pod
	for _, p := range append(claimed.Owned, claimed.Adopt...) {
		ord := ordinalOf(set.Name, p.Name)
		if ord >= start && ord < start+replicas {
			byOrdinal[ord] = p
		} else {
			condemned = append(condemned, p)
		}
	}
	sort.Slice(condemned, func(i, j int) bool {
		return ordinalOf(set.Name, condemned[i].Name) > ordinalOf(set.Name, condemned[j].Name)
	})

	plan.Status = status(set, byOrdinal, condemned, currentName, update.Name, in.Now)
	plan.RequeueAfter = untilAvailable(set, byOrdinal, condemned, in.Now)
	if set.DeletionTimestamp != nil {
		return plan, nil
	}
	plan.OwnClaims = ownClaims(set, in.Claims, condemned, start, replicas)

	monotonic := set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
	partition := 0
	rolling := set.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType
	if ru := set.Spec.UpdateStrategy.RollingUpdate; rolling && ru != nil && ru.Partition != nil {
		partition = int(*ru.Partition)
	}
	// Pods in range: replace failed ones, create missing ones.
	healthy := true
	for ord := start; ord < start+replicas; ord++ {
		p := byOrdinal[ord]
		if p != nil && p.Status.Phase == corev1.PodFailed && p.DeletionTimestamp == nil {
			plan.DeletePods = append(plan.DeletePods, p)
			p = nil
			if monotonic {
				return plan, nil
			}
		}
		if p == nil && claimBeingDeleted(set, in.Claims, ord) {
			// As upstream: no pod on a claim that is going (its
			// pvc-protection finalizer holds it while an old pod uses it);
			// the claim is created anew once it is gone.
			healthy = false
			if plan.RequeueAfter == 0 || plan.RequeueAfter > time.Second {
				plan.RequeueAfter = time.Second
			}
			if monotonic {
				return plan, nil
			}
			continue
		}
		if p == nil {
			rev := update
			if rolling && ord-start < partition {
				rev = current
			}
			pod, err := newPod(set, rev, ord)
			if err != nil {
				return plan, err
			}
			plan.CreateClaims = append(plan.CreateClaims, missingClaims(set, in.Claims, ord)...)
			plan.CreatePods = append(plan.CreatePods, pod)
			healthy = false
			if monotonic {
				return plan, nil
			}
			continue
		}
		// As upstream, with OrderedReady the next ordinal waits for this
		// one to be available (Running and Ready for minReadySeconds),
		// not just Ready; RequeueAfter wakes the sync when it is.
		if !available(set, p, in.Now) || p.DeletionTimestamp != nil {
			healthy = false
			if monotonic {
				return plan, nil
			}
		}
	}
	// Scale down, highest ordinal first. As upstream, with OrderedReady an
	// unavailable condemned pod waits unless it is the lowest unavailable
	// one (the others are removed first, from the top).
	var firstUnavailable *corev1.Pod
	for _, p := range condemned {
		if !available(set, p, in.Now) || p.DeletionTimestamp != nil {
			firstUnavailable = p
		}
	}
	for _, p := range condemned {
		if p.DeletionTimestamp != nil {
			if monotonic {
				return plan, nil
			}
			continue
		}
		if monotonic && (!healthy || (!available(set, p, in.Now) && p != firstUnavailable)) {
			return plan, nil
		}
		plan.DeletePods = append(plan.DeletePods, p)
		if monotonic {
			return plan, nil
		}
	}
	if len(condemned) > 0 && monotonic {
		return plan, nil
	}
	// Rolling update, highest ordinal first, down to the partition.
	if rolling && healthy {
		for ord := start + replicas - 1; ord >= start+partition; ord-- {
			p := byOrdinal[ord]
			if p.Labels[RevisionLabel] != update.Name && p.DeletionTimestamp == nil {
				plan.DeletePods = append(plan.DeletePods, p)
				break
			}
			// The updated pod must be available before the next goes.
			if p.DeletionTimestamp != nil || !available(set, p, in.Now) {
				break
			}
		}
	}
	plan.DeleteRevisions = history(set, revs, byOrdinal, currentName, update.Name)
	return plan, nil
}

func derefInt32(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func runningAndReady(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && replicaset.PodReady(p)
}

// available reports whether p is Running and Ready for the set's
// minReadySeconds at now (upstream isRunningAndAvailable).
func available(set *appsv1.StatefulSet, p *corev1.Pod, now time.Time) bool {
	return p.Status.Phase == corev1.PodRunning && replicaset.PodAvailable(p, set.Spec.MinReadySeconds, now)
}

// revisionData is the template snapshot a ControllerRevision holds, in
// upstream's shape (a patch replacing spec.template).
func revisionData(t *corev1.PodTemplateSpec) ([]byte, error) {
	tm, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(tm, &m); err != nil {
		return nil, err
	}
	m["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": m}})
}

// templateOf reads the template back from a revision.
func templateOf(rev *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	var d struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(rev.Data.Raw, &d); err != nil {
		return nil, fmt.Errorf("revision %s: %w", rev.Name, err)
	}
	return &d.Spec.Template, nil
}

// updateRevision returns the revision of set's current template: an
// existing one with the same name (hash), else a new one numbered after
// the newest. It also returns the revisions sorted by number.
func updateRevision(set *appsv1.StatefulSet, existing []*appsv1.ControllerRevision) (*appsv1.ControllerRevision, []*appsv1.ControllerRevision) {
	revs := append([]*appsv1.ControllerRevision(nil), existing...)
	sort.Slice(revs, func(i, j int) bool { return revs[i].Revision < revs[j].Revision })
	name := set.Name + "-" + replicaset.TemplateHash(&set.Spec.Template, set.Status.CollisionCount)
	if r := findRevision(revs, name); r != nil {
		return r, revs
	}
	var next int64 = 1
	if len(revs) > 0 {
		next = revs[len(revs)-1].Revision + 1
	}
	data, _ := revisionData(&set.Spec.Template)
	labels := map[string]string{}
	for k, v := range set.Spec.Template.Labels {
		labels[k] = v
	}
	labels[RevisionLabel] = name
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: set.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, Kind)},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: next,
	}, revs
}

func findRevision(revs []*appsv1.ControllerRevision, name string) *appsv1.ControllerRevision {
	for _, r := range revs {
		if r.Name == name {
			return r
		}
	}
	return nil
}

func containsRevision(revs []*appsv1.ControllerRevision, name string) bool {
	return findRevision(revs, name) != nil
}

// newPod is the set's pod with ordinal made from rev's template.
func newPod(set *appsv1.StatefulSet, rev *appsv1.ControllerRevision, ord int) (*corev1.Pod, error) {
	tmpl := &set.Spec.Template
	if rev.Data.Raw != nil {
		t, err := templateOf(rev)
		if err != nil {
			return nil, err
		}
		tmpl = t
	}
	name := PodName(set.Name, ord)
	pod := replicaset.PodFromTemplate(tmpl, set.Namespace, "", *metav1.NewControllerRef(set, Kind))
	pod.Name = name
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[PodNameLabel] = name
	pod.Labels[PodIndexLabel] = strconv.Itoa(ord)
	pod.Labels[RevisionLabel] = rev.Name
	pod.Spec.Hostname = name
	pod.Spec.Subdomain = set.Spec.ServiceName
	for _, t := range set.Spec.VolumeClaimTemplates {
		v := corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: ClaimName(t.Name, set.Name, ord),
		}}}
		replaced := false
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Name == t.Name {
				pod.Spec.Volumes[i], replaced = v, true
			}
		}
		if !replaced {
			pod.Spec.Volumes = append(pod.Spec.Volumes, v)
		}
	}
	return pod, nil
}

// missingClaims returns the claims of ordinal's pod that do not exist yet.
// claimBeingDeleted reports whether a claim of the set's pod with ordinal
// exists with a deletionTimestamp.
func claimBeingDeleted(set *appsv1.StatefulSet, claims map[string]*corev1.PersistentVolumeClaim, ord int) bool {
	for _, t := range set.Spec.VolumeClaimTemplates {
		if c, ok := claims[ClaimName(t.Name, set.Name, ord)]; ok && c.DeletionTimestamp != nil {
			return true
		}
	}
	return false
}

func missingClaims(set *appsv1.StatefulSet, claims map[string]*corev1.PersistentVolumeClaim, ord int) []*corev1.PersistentVolumeClaim {
	var out []*corev1.PersistentVolumeClaim
	for _, t := range set.Spec.VolumeClaimTemplates {
		name := ClaimName(t.Name, set.Name, ord)
		if _, ok := claims[name]; ok {
			continue
		}
		c := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: set.Namespace, Labels: map[string]string{}, Annotations: t.Annotations},
			Spec:       *t.Spec.DeepCopy(),
		}
		for k, v := range set.Spec.Selector.MatchLabels {
			c.Labels[k] = v
		}
		for k, v := range t.Labels {
			c.Labels[k] = v
		}
		if deleteWithSet(set) {
			c.OwnerReferences = []metav1.OwnerReference{setRef(set)}
		}
		out = append(out, c)
	}
	return out
}

func deleteWithSet(set *appsv1.StatefulSet) bool {
	p := set.Spec.PersistentVolumeClaimRetentionPolicy
	return p != nil && p.WhenDeleted == appsv1.DeletePersistentVolumeClaimRetentionPolicyType
}

func deleteWhenScaled(set *appsv1.StatefulSet) bool {
	p := set.Spec.PersistentVolumeClaimRetentionPolicy
	return p != nil && p.WhenScaled == appsv1.DeletePersistentVolumeClaimRetentionPolicyType
}

// setRef is the (non-controller) owner reference of a claim to the set.
func setRef(set *appsv1.StatefulSet) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: Kind.GroupVersion().String(), Kind: Kind.Kind, Name: set.Name, UID: set.UID}
}

func podRef(p *corev1.Pod) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID}
}

// ownClaims returns the existing claims of the set's pods whose owner
// references must change for the retention policy: the set owns every
// claim when whenDeleted is Delete; a condemned pod owns its claims when
// whenScaled is Delete. Other owners are kept.
func ownClaims(set *appsv1.StatefulSet, claims map[string]*corev1.PersistentVolumeClaim, condemned []*corev1.Pod, start, replicas int) []*corev1.PersistentVolumeClaim {
	var out []*corev1.PersistentVolumeClaim
	fix := func(c *corev1.PersistentVolumeClaim, pod *corev1.Pod) {
		want := map[string]metav1.OwnerReference{}
		if deleteWithSet(set) {
			want[string(set.UID)] = setRef(set)
		}
		if pod != nil {
			want[string(pod.UID)] = podRef(pod)
		}
		var refs []metav1.OwnerReference
		changed := false
		for _, r := range c.OwnerReferences {
			switch {
			case r.UID == set.UID || (r.Kind == "Pod" && r.APIVersion == "v1" && strings.HasPrefix(r.Name, set.Name+"-")):
				if _, ok := want[string(r.UID)]; !ok {
					changed = true
					continue
				}
				delete(want, string(r.UID))
			}
			refs = append(refs, r)
		}
		for _, r := range sortedRefs(want) {
			refs = append(refs, r)
			changed = true
		}
		if changed {
			c = c.DeepCopy()
			c.OwnerReferences = refs
			out = append(out, c)
		}
	}
	for _, t := range set.Spec.VolumeClaimTemplates {
		for ord := start; ord < start+replicas; ord++ {
			if c, ok := claims[ClaimName(t.Name, set.Name, ord)]; ok {
				fix(c, nil)
			}
		}
		for _, p := range condemned {
			ord := ordinalOf(set.Name, p.Name)
			if c, ok := claims[ClaimName(t.Name, set.Name, ord)]; ok && ord >= 0 {
				var owner *corev1.Pod
				if deleteWhenScaled(set) {
					owner = p
				}
				fix(c, owner)
			}
		}
	}
	return out
}

func sortedRefs(m map[string]metav1.OwnerReference) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}

// status counts the set's pods.
func status(set *appsv1.StatefulSet, byOrdinal map[int]*corev1.Pod, condemned []*corev1.Pod, current, update string, now time.Time) appsv1.StatefulSetStatus {
	st := appsv1.StatefulSetStatus{
		ObservedGeneration: set.Generation,
		CollisionCount:     set.Status.CollisionCount,
		CurrentRevision:    current,
		UpdateRevision:     update,
		Conditions:         set.Status.Conditions,
	}
	count := func(p *corev1.Pod) {
		st.Replicas++
		if runningAndReady(p) {
			st.ReadyReplicas++
			if replicaset.PodAvailable(p, set.Spec.MinReadySeconds, now) {
				st.AvailableReplicas++
			}
		}
		if p.Labels[RevisionLabel] == current {
			st.CurrentReplicas++
		}
		if p.Labels[RevisionLabel] == update {
			st.UpdatedReplicas++
		}
	}
	for _, p := range byOrdinal {
		count(p)
	}
	for _, p := range condemned {
		count(p)
	}
	// A finished rolling update makes the update revision current.
	if set.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType &&
		st.UpdatedReplicas == st.Replicas && st.ReadyReplicas == st.Replicas && st.Replicas == derefInt32(set.Spec.Replicas, 1) {
		st.CurrentRevision = update
		st.CurrentReplicas = st.UpdatedReplicas
	}
	return st
}

// untilAvailable is when the first ready pod not yet available becomes so
// (0: none): status.availableReplicas changes then, and an ordered set
// waiting on that pod moves on.
func untilAvailable(set *appsv1.StatefulSet, byOrdinal map[int]*corev1.Pod, condemned []*corev1.Pod, now time.Time) time.Duration {
	var next time.Duration
	pods := slices.Collect(maps.Values(byOrdinal))
	for _, p := range append(pods, condemned...) {
		if wait, ok := replicaset.UntilAvailable(p, set.Spec.MinReadySeconds, now); ok && wait > 0 && (next == 0 || wait < next) {
			next = wait
		}
	}
	return next
}

// history returns the revisions to delete: those no pod uses and that are
// neither current nor update, oldest first, beyond revisionHistoryLimit.
func history(set *appsv1.StatefulSet, revs []*appsv1.ControllerRevision, byOrdinal map[int]*corev1.Pod, current, update string) []*appsv1.ControllerRevision {
	live := map[string]bool{current: true, update: true}
	for _, p := range byOrdinal {
		live[p.Labels[RevisionLabel]] = true
	}
	var unused []*appsv1.ControllerRevision
	for _, r := range revs {
		if !live[r.Name] {
			unused = append(unused, r)
		}
	}
	limit := int(derefInt32(set.Spec.RevisionHistoryLimit, 10))
	if len(unused) <= limit {
		return nil
	}
	return unused[:len(unused)-limit]
}
