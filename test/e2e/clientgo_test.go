package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

const mediaProtobuf = "application/vnd.kubernetes.protobuf"

func testNode(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func testPod(ns, name, nodeName string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}},
		},
	}
}

func testLease(ns, name string, labels map[string]string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(name),
			LeaseDurationSeconds: ptr.To(int32(40)),
			RenewTime:            ptr.To(metav1.NewMicroTime(time.Now())),
		},
	}
}

func createNamespace(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

func names[T any](items []T, name func(*T) string) []string {
	out := make([]string, 0, len(items))
	for i := range items {
		out = append(out, name(&items[i]))
	}
	sort.Strings(out)
	return out
}

func podNames(l *corev1.PodList) []string {
	return names(l.Items, func(p *corev1.Pod) string { return p.Name })
}

func wantNotFound(t *testing.T, err error, what string) {
	t.Helper()
	if !apierrors.IsNotFound(err) {
		t.Fatalf("%s: got %v, want NotFound", what, err)
	}
}

func hasToleration(tols []corev1.Toleration, key string, seconds int64) bool {
	for _, tol := range tols {
		if tol.Key == key && tol.Operator == corev1.TolerationOpExists && tol.Effect == corev1.TaintEffectNoExecute &&
			tol.TolerationSeconds != nil && *tol.TolerationSeconds == seconds {
			return true
		}
	}
	return false
}

// TestClientGoTyped drives the typed clients of client-go v0.37 (protobuf
// request bodies, JSON answers) through the verbs and semantics agents,
// controllers and kubectl rely on.
func TestClientGoTyped(t *testing.T) {
	s := startServer(t, serverOptions{})
	cs := s.client()
	ctx := context.Background()

	t.Run("node CRUD", func(t *testing.T) {
		n, err := cs.CoreV1().Nodes().Create(ctx, testNode("crud-node", map[string]string{"a": "1"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.UID == "" || n.CreationTimestamp.IsZero() || n.ResourceVersion == "" {
			t.Fatalf("create did not fill uid/creationTimestamp/resourceVersion: %+v", n.ObjectMeta)
		}
		got, err := cs.CoreV1().Nodes().Get(ctx, "crud-node", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.UID != n.UID || got.Labels["a"] != "1" {
			t.Fatalf("get: got %+v", got.ObjectMeta)
		}
		got.Labels["a"] = "2"
		got.Spec.Unschedulable = true
		upd, err := cs.CoreV1().Nodes().Update(ctx, got, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if upd.Labels["a"] != "2" || !upd.Spec.Unschedulable || upd.ResourceVersion == got.ResourceVersion {
			t.Fatalf("update: got labels %v unschedulable %v rv %s (before %s)", upd.Labels, upd.Spec.Unschedulable, upd.ResourceVersion, got.ResourceVersion)
		}
		patched, err := cs.CoreV1().Nodes().Patch(ctx, "crud-node", types.MergePatchType, []byte(`{"metadata":{"labels":{"b":"3"}}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if patched.Labels["a"] != "2" || patched.Labels["b"] != "3" {
			t.Fatalf("merge patch: got labels %v", patched.Labels)
		}
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(list.Items, func(n corev1.Node) bool { return n.Name == "crud-node" }) {
			t.Fatalf("list: crud-node missing from %d items", len(list.Items))
		}
		if err := cs.CoreV1().Nodes().Delete(ctx, "crud-node", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err = cs.CoreV1().Nodes().Get(ctx, "crud-node", metav1.GetOptions{})
		wantNotFound(t, err, "get after delete")
	})

	t.Run("pod create, bind, status", func(t *testing.T) {
		createNamespace(t, cs, "cg-pods")
		if _, err := cs.CoreV1().Nodes().Create(ctx, testNode("bind-node", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p, err := cs.CoreV1().Pods("cg-pods").Create(ctx, testPod("", "p1", "", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Namespace != "cg-pods" || p.Status.Phase != corev1.PodPending || p.Generation != 1 {
			t.Fatalf("created pod: namespace %q phase %q generation %d", p.Namespace, p.Status.Phase, p.Generation)
		}
		err = cs.CoreV1().Pods("cg-pods").Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: "p1"},
			Target:     corev1.ObjectReference{Kind: "Node", Name: "bind-node"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("bind: %v", err)
		}
		p, err = cs.CoreV1().Pods("cg-pods").Get(ctx, "p1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "bind-node" {
			t.Fatalf("after bind: nodeName %q", p.Spec.NodeName)
		}
		scheduled := false
		for _, c := range p.Status.Conditions {
			scheduled = scheduled || (c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue)
		}
		if !scheduled {
			t.Errorf("after bind: no PodScheduled=True condition in %+v", p.Status.Conditions)
		}
		// A second bind is refused: the pod is already assigned.
		err = cs.CoreV1().Pods("cg-pods").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p1"}, Target: corev1.ObjectReference{Kind: "Node", Name: "other"}}, metav1.CreateOptions{})
		if !apierrors.IsConflict(err) {
			t.Errorf("second bind: got %v, want Conflict", err)
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP = "10.0.0.7"
		p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.7"}}
		st, err := cs.CoreV1().Pods("cg-pods").UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("update status: %v", err)
		}
		if st.Status.Phase != corev1.PodRunning || st.Status.PodIP != "10.0.0.7" {
			t.Fatalf("update status: got phase %q ip %q", st.Status.Phase, st.Status.PodIP)
		}
	})

	t.Run("generation and the status/spec split", func(t *testing.T) {
		pods := cs.CoreV1().Pods("default")
		p, err := pods.Create(ctx, testPod("", "gen", "", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Status change through the status subresource: generation stays,
		// a spec change in the same body is ignored.
		p.Status.Phase = corev1.PodRunning
		p.Spec.Containers[0].Image = "busybox:ignored"
		st, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if st.Generation != 1 {
			t.Errorf("status update: generation %d, want 1", st.Generation)
		}
		if st.Status.Phase != corev1.PodRunning {
			t.Errorf("status update: phase %q, want Running", st.Status.Phase)
		}
		if img := st.Spec.Containers[0].Image; img != "busybox:1.36" {
			t.Errorf("status update changed the spec: image %q", img)
		}
		// Spec change through the main resource: generation bumps, a status
		// change in the same body is ignored.
		st.Spec.Containers[0].Image = "busybox:1.37"
		st.Status.Phase = corev1.PodFailed
		up, err := pods.Update(ctx, st, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if up.Generation != 2 {
			t.Errorf("spec update: generation %d, want 2", up.Generation)
		}
		if img := up.Spec.Containers[0].Image; img != "busybox:1.37" {
			t.Errorf("spec update: image %q, want busybox:1.37", img)
		}
		if up.Status.Phase != corev1.PodRunning {
			t.Errorf("main resource changed the status: phase %q, want Running", up.Status.Phase)
		}
		// A metadata-only update does not bump the generation.
		up.Labels = map[string]string{"x": "y"}
		up, err = pods.Update(ctx, up, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if up.Generation != 2 {
			t.Errorf("label update: generation %d, want 2", up.Generation)
		}
		// Same split for nodes: Update ignores status, UpdateStatus ignores spec.
		n, err := cs.CoreV1().Nodes().Create(ctx, testNode("split-node", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.9.9.9"}}
		n.Spec.Unschedulable = true
		n, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Spec.Unschedulable || len(n.Status.Addresses) != 1 {
			t.Errorf("node status update: unschedulable %v addresses %v", n.Spec.Unschedulable, n.Status.Addresses)
		}
		n.Status.Addresses = nil
		n.Spec.Unschedulable = true
		n, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !n.Spec.Unschedulable || len(n.Status.Addresses) != 1 {
			t.Errorf("node update: unschedulable %v addresses %v", n.Spec.Unschedulable, n.Status.Addresses)
		}
	})

	t.Run("lease optimistic concurrency", func(t *testing.T) {
		leases := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
		l, err := leases.Create(ctx, testLease("", "occ", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stale := l.DeepCopy()
		l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		l2, err := leases.Update(ctx, l, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stale.Spec.HolderIdentity = ptr.To("usurper")
		_, err = leases.Update(ctx, stale, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			t.Fatalf("update with stale resourceVersion: got %v, want Conflict", err)
		}
		if code := err.(apierrors.APIStatus).Status().Code; code != http.StatusConflict {
			t.Errorf("conflict code %d", code)
		}
		cur, err := leases.Get(ctx, "occ", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cur.ResourceVersion != l2.ResourceVersion || *cur.Spec.HolderIdentity != "occ" {
			t.Fatalf("lease changed by the refused update: rv %s (want %s), holder %q", cur.ResourceVersion, l2.ResourceVersion, *cur.Spec.HolderIdentity)
		}
		if !cur.Spec.RenewTime.Equal(l2.Spec.RenewTime) {
			t.Errorf("renewTime did not round-trip: got %v, want %v", cur.Spec.RenewTime, l2.Spec.RenewTime)
		}
	})

	t.Run("events core/v1 and events.k8s.io/v1", func(t *testing.T) {
		const ns = "cg-events"
		createNamespace(t, cs, ns)
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		core := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "ev-core", Namespace: ns},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "evpod", APIVersion: "v1"},
			Reason:         "Started", Message: "started container c", Type: corev1.EventTypeNormal,
			Source: corev1.EventSource{Component: "agent", Host: "n1"}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
		}
		if _, err := cs.CoreV1().Events(ns).Create(ctx, core, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		asV1, err := cs.EventsV1().Events(ns).Get(ctx, "ev-core", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("core/v1 event through events.k8s.io/v1: %v", err)
		}
		if asV1.Regarding.Name != "evpod" || asV1.Note != "started container c" || asV1.Reason != "Started" || asV1.DeprecatedCount != 1 {
			t.Errorf("events.k8s.io/v1 view: %+v", asV1)
		}
		v1ev := &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Name: "ev-new", Namespace: ns},
			EventTime:           metav1.NewMicroTime(time.Now()),
			ReportingController: "nodeplane.io/test", ReportingInstance: "test-1",
			Action: "Renewing", Reason: "LeaseRenewed", Note: "renewed the lease", Type: corev1.EventTypeNormal,
			Regarding: corev1.ObjectReference{Kind: "Lease", Namespace: ns, Name: "evlease", APIVersion: "coordination.k8s.io/v1"},
		}
		if _, err := cs.EventsV1().Events(ns).Create(ctx, v1ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		asCore, err := cs.CoreV1().Events(ns).Get(ctx, "ev-new", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("events.k8s.io/v1 event through core/v1: %v", err)
		}
		if asCore.InvolvedObject.Name != "evlease" || asCore.Message != "renewed the lease" || asCore.ReportingController != "nodeplane.io/test" || asCore.Action != "Renewing" {
			t.Errorf("core/v1 view: %+v", asCore)
		}
		for _, tc := range []struct{ selector, want string }{
			{"involvedObject.name=evpod", "ev-core"},
			{"involvedObject.name=evlease", "ev-new"},
			{"involvedObject.kind=Pod", "ev-core"},
			{"involvedObject.kind=Lease", "ev-new"},
			{"involvedObject.kind=Lease,involvedObject.name=evpod", ""},
		} {
			list, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: tc.selector})
			if err != nil {
				t.Fatalf("list events %s: %v", tc.selector, err)
			}
			got := strings.Join(names(list.Items, func(e *corev1.Event) string { return e.Name }), ",")
			if got != tc.want {
				t.Errorf("events with %s: got [%s], want [%s]", tc.selector, got, tc.want)
			}
		}
		all, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := names(all.Items, func(e *eventsv1.Event) string { return e.Name }); !slices.Equal(got, []string{"ev-core", "ev-new"}) {
			t.Errorf("events.k8s.io/v1 list: %v", got)
		}
	})

	t.Run("namespaces", func(t *testing.T) {
		ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cg-ns", Labels: map[string]string{"team": "a"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ns.Status.Phase != corev1.NamespaceActive {
			t.Errorf("new namespace phase %q", ns.Status.Phase)
		}
		ns.Labels["team"] = "b"
		if _, err := cs.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: "team=b"})
		if err != nil {
			t.Fatal(err)
		}
		if got := names(list.Items, func(n *corev1.Namespace) string { return n.Name }); !slices.Equal(got, []string{"cg-ns"}) {
			t.Errorf("namespaces with team=b: %v", got)
		}
		for _, sys := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
			if _, err := cs.CoreV1().Namespaces().Get(ctx, sys, metav1.GetOptions{}); err != nil {
				t.Errorf("system namespace %s: %v", sys, err)
			}
		}
	})

	t.Run("generateName", func(t *testing.T) {
		seen := map[string]bool{}
		for range 3 {
			n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "gen-"}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(n.Name, "gen-") || len(n.Name) != len("gen-")+5 {
				t.Errorf("generated name %q", n.Name)
			}
			if seen[n.Name] {
				t.Errorf("name %q generated twice", n.Name)
			}
			seen[n.Name] = true
		}
	})

	t.Run("label and field selectors", func(t *testing.T) {
		const ns = "cg-sel"
		createNamespace(t, cs, ns)
		pods := cs.CoreV1().Pods(ns)
		for _, p := range []*corev1.Pod{
			testPod(ns, "a", "n1", map[string]string{"app": "x"}),
			testPod(ns, "b", "n2", map[string]string{"app": "x"}),
			testPod(ns, "c", "", map[string]string{"app": "y"}),
		} {
			if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		b, err := pods.Get(ctx, "b", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b.Status.Phase = corev1.PodRunning
		if _, err := pods.UpdateStatus(ctx, b, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			label, field string
			want         []string
		}{
			{label: "app=x", want: []string{"a", "b"}},
			{label: "app in (x,y),app!=x", want: []string{"c"}},
			{field: "spec.nodeName=n1", want: []string{"a"}},
			{field: "spec.nodeName==n2", want: []string{"b"}},
			{field: "spec.nodeName=", want: []string{"c"}},
			{field: "spec.nodeName!=n1", want: []string{"b", "c"}},
			{field: "status.phase=Running", want: []string{"b"}},
			{field: "status.phase!=Running,status.phase!=Succeeded", want: []string{"a", "c"}},
			{field: "metadata.name=c", want: []string{"c"}},
			{label: "app=x", field: "status.phase=Pending", want: []string{"a"}},
		} {
			list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: tc.label, FieldSelector: tc.field})
			if err != nil {
				t.Fatalf("list label %q field %q: %v", tc.label, tc.field, err)
			}
			if got := podNames(list); !slices.Equal(got, tc.want) {
				t.Errorf("pods with label %q field %q: got %v, want %v", tc.label, tc.field, got, tc.want)
			}
		}
		// Across namespaces too.
		list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n2,metadata.namespace=" + ns})
		if err != nil {
			t.Fatal(err)
		}
		if got := podNames(list); !slices.Equal(got, []string{"b"}) {
			t.Errorf("all-namespace pods on n2: %v", got)
		}
		_, err = pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.bogus=1"})
		if !apierrors.IsBadRequest(err) {
			t.Errorf("unsupported field selector: got %v, want BadRequest", err)
		}
	})

	t.Run("limit and continue", func(t *testing.T) {
		const ns = "cg-page"
		createNamespace(t, cs, ns)
		leases := cs.CoordinationV1().Leases(ns)
		want := map[string]bool{}
		for i := range 25 {
			name := fmt.Sprintf("l%02d", i)
			want[name] = true
			if _, err := leases.Create(ctx, testLease(ns, name, map[string]string{"even": strconv.FormatBool(i%2 == 0)}), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// Pages are a snapshot at the first page's revision: a create and a
		// delete between pages do not show.
		changeBetweenPages := func(t *testing.T) {
			if _, err := leases.Create(ctx, testLease(ns, "l99", nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := leases.Delete(ctx, "l24", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		res := listPages(t, leases, metav1.ListOptions{Limit: 10}, changeBetweenPages)
		if !slices.Equal(res.sizes, []int{10, 10, 5}) {
			t.Errorf("page sizes %v, want [10 10 5]", res.sizes)
		}
		if !slices.Equal(res.remaining, []int64{15, 5, -1}) {
			t.Errorf("remainingItemCount per page %v, want [15 5 none]", res.remaining)
		}
		for name := range want {
			if res.seen[name] != 1 {
				t.Errorf("%s seen %d times", name, res.seen[name])
			}
		}
		if len(res.seen) != len(want) {
			t.Errorf("saw %d distinct leases (%v), want %d", len(res.seen), res.seen, len(want))
		}

		// With a label selector, every match still comes exactly once.
		res = listPages(t, leases, metav1.ListOptions{Limit: 4, LabelSelector: "even=true"}, nil)
		var evens []string
		for name, n := range res.seen {
			if n != 1 {
				t.Errorf("%s seen %d times", name, n)
			}
			evens = append(evens, name)
		}
		sort.Strings(evens)
		wantEvens := []string{"l00", "l02", "l04", "l06", "l08", "l10", "l12", "l14", "l16", "l18", "l20", "l22"}
		if !slices.Equal(evens, wantEvens) {
			t.Errorf("even=true pages: got %v, want %v (l24 was deleted)", evens, wantEvens)
		}
		for _, n := range res.sizes {
			if n > 4 {
				t.Errorf("page of %d items with limit 4", n)
			}
		}
	})

	t.Run("deletecollection with a label selector", func(t *testing.T) {
		const ns = "cg-dc"
		createNamespace(t, cs, ns)
		for i := range 5 {
			del := "yes"
			if i >= 3 {
				del = "no"
			}
			if _, err := cs.CoordinationV1().Leases(ns).Create(ctx, testLease(ns, fmt.Sprintf("dc%d", i), map[string]string{"del": del}), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := cs.CoordinationV1().Leases(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "del=yes"}); err != nil {
			t.Fatal(err)
		}
		list, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := names(list.Items, func(l *coordinationv1.Lease) string { return l.Name }); !slices.Equal(got, []string{"dc3", "dc4"}) {
			t.Errorf("after deletecollection del=yes: %v", got)
		}
	})

	t.Run("protobuf", func(t *testing.T) {
		var log requestLog
		pcs, err := kubernetes.NewForConfig(log.wrap(s.restConfig()))
		if err != nil {
			t.Fatal(err)
		}
		leases := pcs.CoordinationV1().Leases("default")
		l, err := leases.Create(ctx, testLease("", "pb", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create with a protobuf body: %v", err)
		}
		l.Spec.HolderIdentity = ptr.To("pb-2")
		if l, err = leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update with a protobuf body: %v", err)
		}
		if *l.Spec.HolderIdentity != "pb-2" {
			t.Errorf("update: holder %q", *l.Spec.HolderIdentity)
		}
		for _, verb := range []string{http.MethodPost, http.MethodPut} {
			found := false
			for _, r := range log.all() {
				if r.Method == verb && strings.HasPrefix(r.Path, "/apis/coordination.k8s.io/v1/namespaces/default/leases") {
					found = true
					if r.ContentType != mediaProtobuf {
						t.Errorf("%s sent Content-Type %q, want %s", verb, r.ContentType, mediaProtobuf)
					}
				}
			}
			if !found {
				t.Errorf("no %s request logged:\n%s", verb, log.dump())
			}
		}

		// Raw protobuf in and out.
		info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaProtobuf)
		if !ok {
			t.Fatal("no protobuf serializer")
		}
		body, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), testNode("pb-node", map[string]string{"wire": "protobuf"}))
		if err != nil {
			t.Fatal(err)
		}
		hc := s.httpClient()
		resp := s.do(t, hc, http.MethodPost, "/api/v1/nodes", body, "Content-Type", mediaProtobuf, "Accept", mediaProtobuf)
		if resp.code != http.StatusCreated {
			t.Fatalf("protobuf create: %v", resp)
		}
		if ct := resp.header.Get("Content-Type"); ct != mediaProtobuf {
			t.Errorf("protobuf create answered Content-Type %q", ct)
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(resp.body, nil, nil)
		if err != nil {
			t.Fatalf("decode protobuf answer: %v", err)
		}
		n, ok := obj.(*corev1.Node)
		if !ok || n.Name != "pb-node" || n.Labels["wire"] != "protobuf" || n.UID == "" {
			t.Fatalf("protobuf answer: %T %+v", obj, obj)
		}
		resp = s.do(t, hc, http.MethodGet, "/api/v1/nodes/pb-node", nil, "Accept", mediaProtobuf+", application/json")
		if resp.code != http.StatusOK || resp.header.Get("Content-Type") != mediaProtobuf {
			t.Fatalf("protobuf get: %v (Content-Type %q)", resp, resp.header.Get("Content-Type"))
		}
		if obj, _, err = scheme.Codecs.UniversalDeserializer().Decode(resp.body, nil, nil); err != nil || obj.(*corev1.Node).UID != n.UID {
			t.Fatalf("protobuf get: %v %v", obj, err)
		}
	})

	t.Run("graceful pod deletion", func(t *testing.T) {
		pods := cs.CoreV1().Pods("default")
		if _, err := pods.Create(ctx, testPod("", "bound", "some-node", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := pods.Create(ctx, testPod("", "unbound", "", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := pods.Delete(ctx, "bound", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		p, err := pods.Get(ctx, "bound", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("bound pod after delete: %v (want it to stay until its agent confirms)", err)
		}
		if p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != corev1.DefaultTerminationGracePeriodSeconds {
			t.Fatalf("bound pod after delete: deletionTimestamp %v deletionGracePeriodSeconds %v", p.DeletionTimestamp, p.DeletionGracePeriodSeconds)
		}
		if err := pods.Delete(ctx, "bound", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
			t.Fatal(err)
		}
		_, err = pods.Get(ctx, "bound", metav1.GetOptions{})
		wantNotFound(t, err, "bound pod after delete with grace 0")

		if err := pods.Delete(ctx, "unbound", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err = pods.Get(ctx, "unbound", metav1.GetOptions{})
		wantNotFound(t, err, "unbound pod after delete")
	})

	t.Run("finalizers", func(t *testing.T) {
		leases := cs.CoordinationV1().Leases("default")
		l := testLease("", "held", nil)
		l.Finalizers = []string{"nodeplane.io/hold"}
		if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := leases.Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := leases.Get(ctx, "held", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("lease with a finalizer after delete: %v", err)
		}
		if got.DeletionTimestamp == nil {
			t.Fatal("lease with a finalizer after delete: no deletionTimestamp")
		}
		// Other updates keep it.
		got.Labels = map[string]string{"still": "here"}
		if got, err = leases.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		got.Finalizers = nil
		if _, err := leases.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("remove finalizer: %v", err)
		}
		eventually(t, 5*time.Second, "lease gone after its finalizer is removed", func() error {
			_, err := leases.Get(ctx, "held", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("get: %v", err)
		})
	})

	t.Run("namespace deletion", func(t *testing.T) {
		const ns = "cg-doomed"
		createNamespace(t, cs, ns)
		if _, err := cs.CoordinationV1().Leases(ns).Create(ctx, testLease(ns, "l1", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, testPod(ns, "p1", "", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// A finalizer keeps the namespace terminating until it is removed.
		held := testLease(ns, "held", nil)
		held.Finalizers = []string{"nodeplane.io/hold"}
		if _, err := cs.CoordinationV1().Leases(ns).Create(ctx, held, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "namespace content removed", func() error {
			if _, err := cs.CoordinationV1().Leases(ns).Get(ctx, "l1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("lease l1: %v", err)
			}
			if _, err := cs.CoreV1().Pods(ns).Get(ctx, "p1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("pod p1: %v", err)
			}
			h, err := cs.CoordinationV1().Leases(ns).Get(ctx, "held", metav1.GetOptions{})
			if err != nil || h.DeletionTimestamp == nil {
				return fmt.Errorf("held lease not marked for deletion: %v", err)
			}
			return nil
		})
		nsObj, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("terminating namespace: %v", err)
		}
		if nsObj.Status.Phase != corev1.NamespaceTerminating || nsObj.DeletionTimestamp == nil {
			t.Fatalf("namespace phase %q deletionTimestamp %v, want Terminating", nsObj.Status.Phase, nsObj.DeletionTimestamp)
		}
		_, err = cs.CoordinationV1().Leases(ns).Create(ctx, testLease(ns, "late", nil), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("create in a terminating namespace: got %v, want Forbidden", err)
		}
		if !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			t.Errorf("forbidden create lacks the %s cause: %v", corev1.NamespaceTerminatingCause, err)
		}
		h, err := cs.CoordinationV1().Leases(ns).Get(ctx, "held", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h.Finalizers = nil
		if _, err := cs.CoordinationV1().Leases(ns).Update(ctx, h, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("remove finalizer: %v", err)
		}
		eventually(t, 10*time.Second, "namespace removed", func() error {
			_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("get namespace: %v", err)
		})
		_, err = cs.CoordinationV1().Leases(ns).Create(ctx, testLease(ns, "later", nil), metav1.CreateOptions{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("create in a missing namespace: got %v, want NotFound", err)
		}
		_, err = cs.CoreV1().Pods("never-was").Create(ctx, testPod("", "p", "", nil), metav1.CreateOptions{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("create in a namespace that never existed: got %v, want NotFound", err)
		}
	})

	t.Run("DefaultTolerationSeconds", func(t *testing.T) {
		p, err := cs.CoreV1().Pods("default").Create(ctx, testPod("", "dts", "", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
			if !hasToleration(p.Spec.Tolerations, key, 300) {
				t.Errorf("no %s:NoExecute toleration for 300s in %+v", key, p.Spec.Tolerations)
			}
		}
	})
}

// TestClientGoServerFlags covers what needs server flags: bookmarks every
// second, compaction every second, and non-default toleration seconds.
func TestClientGoServerFlags(t *testing.T) {
	s := startServer(t, serverOptions{args: []string{
		"--watch-bookmark-interval=1s",
		"--etcd-compaction-interval=1s",
		"--default-not-ready-toleration-seconds=10",
		"--default-unreachable-toleration-seconds=20",
	}})
	cs := s.client()
	ctx := context.Background()
	for _, name := range []string{"bm-1", "bm-2", "bm-3"} {
		if _, err := cs.CoreV1().Nodes().Create(ctx, testNode(name, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("periodic bookmark", func(t *testing.T) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		start, _ := strconv.ParseInt(list.ResourceVersion, 10, 64)
		ch := s.rawWatch(t, "/api/v1/nodes?watch=true&allowWatchBookmarks=true&resourceVersion="+list.ResourceVersion)
		deadline := time.Now().Add(5 * time.Second)
		for {
			ev := nextEvent(t, ch, time.Until(deadline))
			if ev.Type != string(watch.Bookmark) {
				continue
			}
			o := ev.object(t)
			if o.Kind != "Node" || o.APIVersion != "v1" {
				t.Errorf("bookmark kind %q apiVersion %q, want Node v1", o.Kind, o.APIVersion)
			}
			rv, err := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
			if err != nil || rv < start {
				t.Errorf("bookmark resourceVersion %q, want >= %d", o.Metadata.ResourceVersion, start)
			}
			return
		}
	})

	t.Run("watch-list initial events end with the annotated bookmark", func(t *testing.T) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := names(list.Items, func(n *corev1.Node) string { return n.Name })
		ch := s.rawWatch(t, "/api/v1/nodes?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
		var added []string
		for {
			ev := nextEvent(t, ch, 5*time.Second)
			o := ev.object(t)
			if ev.Type == string(watch.Added) {
				added = append(added, o.Metadata.Name)
				continue
			}
			if ev.Type != string(watch.Bookmark) {
				t.Fatalf("unexpected %s event before the initial-events bookmark", ev.Type)
			}
			if o.Metadata.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
				t.Fatalf("first bookmark lacks %s=true: %s", metav1.InitialEventsAnnotationKey, ev.Object)
			}
			rv, _ := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
			listRV, _ := strconv.ParseInt(list.ResourceVersion, 10, 64)
			if rv < listRV {
				t.Errorf("initial-events bookmark resourceVersion %d older than the list's %d", rv, listRV)
			}
			break
		}
		sort.Strings(added)
		if !slices.Equal(added, want) {
			t.Errorf("initial ADDED events for %v, want %v", added, want)
		}
	})

	t.Run("sendInitialEvents without resourceVersionMatch is refused", func(t *testing.T) {
		resp := s.do(t, s.httpClient(), http.MethodGet, "/api/v1/nodes?watch=true&sendInitialEvents=true&allowWatchBookmarks=true", nil)
		if resp.code < 400 || resp.code >= 500 {
			t.Fatalf("got %v, want a 4xx", resp)
		}
		wantStatus(t, resp, resp.code, metav1.StatusReasonInvalid)
	})

	t.Run("continue token expires after compaction", func(t *testing.T) {
		// Nodes live in the main etcd member, leases in the lease member:
		// both are compacted.
		type lister func(opts metav1.ListOptions) (continueToken string, err error)
		for _, tc := range []struct {
			resource string
			create   func(name string) error
			list     lister
		}{
			{
				resource: "nodes",
				create: func(name string) error {
					_, err := cs.CoreV1().Nodes().Create(ctx, testNode(name, nil), metav1.CreateOptions{})
					return err
				},
				list: func(opts metav1.ListOptions) (string, error) {
					l, err := cs.CoreV1().Nodes().List(ctx, opts)
					if err != nil {
						return "", err
					}
					return l.Continue, nil
				},
			},
			{
				resource: "leases",
				create: func(name string) error {
					_, err := cs.CoordinationV1().Leases("default").Create(ctx, testLease("", name, nil), metav1.CreateOptions{})
					return err
				},
				list: func(opts metav1.ListOptions) (string, error) {
					l, err := cs.CoordinationV1().Leases("default").List(ctx, opts)
					if err != nil {
						return "", err
					}
					return l.Continue, nil
				},
			},
		} {
			t.Run(tc.resource, func(t *testing.T) {
				for i := range 5 {
					if err := tc.create(fmt.Sprintf("cmp%d", i)); err != nil {
						t.Fatal(err)
					}
				}
				token, err := tc.list(metav1.ListOptions{Limit: 2})
				if err != nil {
					t.Fatal(err)
				}
				if token == "" {
					t.Fatal("no continue token with limit 2")
				}
				// Move the revision on so the compactor passes the token's revision.
				if err := tc.create("cmp-after"); err != nil {
					t.Fatal(err)
				}
				eventually(t, 15*time.Second, "continue token expired by compaction", func() error {
					_, err := tc.list(metav1.ListOptions{Limit: 2, Continue: token})
					if err == nil {
						return fmt.Errorf("continue still served")
					}
					if !apierrors.IsResourceExpired(err) {
						t.Fatalf("continue after compaction: got %v, want 410 Expired", err)
					}
					if code := err.(apierrors.APIStatus).Status().Code; code != http.StatusGone {
						t.Fatalf("continue after compaction: code %d, want 410", code)
					}
					return nil
				})
			})
		}
	})

	t.Run("DefaultTolerationSeconds from flags", func(t *testing.T) {
		p, err := cs.CoreV1().Pods("default").Create(ctx, testPod("", "dts", "", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !hasToleration(p.Spec.Tolerations, corev1.TaintNodeNotReady, 10) {
			t.Errorf("no not-ready:NoExecute toleration for 10s in %+v", p.Spec.Tolerations)
		}
		if !hasToleration(p.Spec.Tolerations, corev1.TaintNodeUnreachable, 20) {
			t.Errorf("no unreachable:NoExecute toleration for 20s in %+v", p.Spec.Tolerations)
		}
		// A pod that brings its own not-ready toleration keeps it.
		own := testPod("", "dts-own", "", nil)
		own.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(5))}}
		p, err = cs.CoreV1().Pods("default").Create(ctx, own, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !hasToleration(p.Spec.Tolerations, corev1.TaintNodeNotReady, 5) || hasToleration(p.Spec.Tolerations, corev1.TaintNodeNotReady, 10) {
			t.Errorf("own not-ready toleration not kept as is: %+v", p.Spec.Tolerations)
		}
	})
}

// classicListerWatcher declares that it does not support watch-list, so a
// reflector built on it does a classic LIST then WATCH whatever the
// WatchListClient feature gate says.
type classicListerWatcher struct{ cache.ListerWatcher }

func (classicListerWatcher) IsWatchListSemanticsUnSupported() bool { return true }

// classicInformer builds an informer on resource that uses LIST + WATCH.
func classicInformer(cs kubernetes.Interface, resource string, objType runtime.Object, rec *eventRecorder) (cache.Store, cache.Controller) {
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), resource, metav1.NamespaceAll, fields.Everything())
	return cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: classicListerWatcher{lw},
		ObjectType:    objType,
		Handler:       rec.handler(),
	})
}

// informerScenario creates, updates and deletes one node and one pod named
// prefix-… and waits for the recorders to see each change.
func informerScenario(t *testing.T, cs kubernetes.Interface, prefix string, nodes, pods *eventRecorder) {
	t.Helper()
	ctx := context.Background()
	node, pod := prefix+"-node", prefix+"-pod"
	if _, err := cs.CoreV1().Nodes().Create(ctx, testNode(node, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes.waitFor(t, 10*time.Second, "ADD "+node)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(`{"metadata":{"labels":{"changed":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes.waitFor(t, 10*time.Second, "UPDATE "+node)
	if err := cs.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes.waitFor(t, 10*time.Second, "DELETE "+node)

	if _, err := cs.CoreV1().Pods("default").Create(ctx, testPod("", pod, "", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods.waitFor(t, 10*time.Second, "ADD "+pod)
	if err := cs.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod}, Target: corev1.ObjectReference{Kind: "Node", Name: "somewhere"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods.waitFor(t, 10*time.Second, "UPDATE "+pod)
	if err := cs.CoreV1().Pods("default").Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	pods.waitFor(t, 10*time.Second, "DELETE "+pod)
}

// pages is what paging through a list saw.
type pages struct {
	sizes     []int
	remaining []int64 // remainingItemCount per page, -1 when absent
	seen      map[string]int
}

// listPages lists leases page by page with opts, calling between (when
// set) once after the first page.
func listPages(t *testing.T, leases interface {
	List(context.Context, metav1.ListOptions) (*coordinationv1.LeaseList, error)
}, opts metav1.ListOptions, between func(*testing.T)) pages {
	t.Helper()
	res := pages{seen: map[string]int{}}
	var listRV string
	for {
		list, err := leases.List(context.Background(), opts)
		if err != nil {
			t.Fatalf("page %d: %v", len(res.sizes)+1, err)
		}
		res.sizes = append(res.sizes, len(list.Items))
		remaining := int64(-1)
		if list.RemainingItemCount != nil {
			remaining = *list.RemainingItemCount
		}
		res.remaining = append(res.remaining, remaining)
		for _, l := range list.Items {
			res.seen[l.Name]++
		}
		if listRV == "" {
			listRV = list.ResourceVersion
		} else if list.ResourceVersion != listRV {
			t.Errorf("page %d: resourceVersion %s, first page had %s", len(res.sizes), list.ResourceVersion, listRV)
		}
		if list.Continue == "" {
			return res
		}
		if len(res.sizes) > 20 {
			t.Fatalf("more than 20 pages: %v", res.sizes)
		}
		if between != nil && len(res.sizes) == 1 {
			between(t)
		}
		opts.Continue = list.Continue
	}
}

func isList(r loggedRequest, path string) bool {
	return r.Method == http.MethodGet && r.Path == path && !strings.Contains(r.Query, "watch=")
}

func isWatchList(r loggedRequest, path string) bool {
	return r.Method == http.MethodGet && r.Path == path && strings.Contains(r.Query, "watch=true") &&
		strings.Contains(r.Query, "sendInitialEvents=true") && strings.Contains(r.Query, "resourceVersionMatch=NotOlderThan")
}

// TestClientGoInformers runs informers against the server both ways
// client-go v0.37 does it: watch-list (the default) and LIST + WATCH.
func TestClientGoInformers(t *testing.T) {
	s := startServer(t, serverOptions{})
	cs := s.client()
	ctx := context.Background()
	if _, err := cs.CoreV1().Nodes().Create(ctx, testNode("pre-existing", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("kube-system").Create(ctx, testPod("", "pre-existing", "", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("SharedInformerFactory with watch-list", func(t *testing.T) {
		var log requestLog
		ics, err := kubernetes.NewForConfig(log.wrap(s.restConfig()))
		if err != nil {
			t.Fatal(err)
		}
		factory := informers.NewSharedInformerFactory(ics, 0)
		var nodes, pods eventRecorder
		nodeInf, podInf := factory.Core().V1().Nodes().Informer(), factory.Core().V1().Pods().Informer()
		if _, err := nodeInf.AddEventHandler(nodes.handler()); err != nil {
			t.Fatal(err)
		}
		if _, err := podInf.AddEventHandler(pods.handler()); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		defer func() { close(stop); factory.Shutdown() }()
		factory.Start(stop)
		syncCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for typ, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
			if !ok {
				t.Fatalf("%v informer did not sync within 10s; requests:\n%s", typ, log.dump())
			}
		}
		if _, ok, _ := nodeInf.GetStore().GetByKey("pre-existing"); !ok {
			t.Error("node cache lacks the pre-existing node")
		}
		if _, ok, _ := podInf.GetStore().GetByKey("kube-system/pre-existing"); !ok {
			t.Error("pod cache lacks the pre-existing pod")
		}
		informerScenario(t, cs, "wl", &nodes, &pods)
		for _, path := range []string{"/api/v1/nodes", "/api/v1/pods"} {
			reqs := log.all()
			if !slices.ContainsFunc(reqs, func(r loggedRequest) bool { return isWatchList(r, path) }) {
				t.Errorf("no watch-list request for %s:\n%s", path, log.dump())
			}
			if slices.ContainsFunc(reqs, func(r loggedRequest) bool { return isList(r, path) }) {
				t.Errorf("informer fell back to LIST %s:\n%s", path, log.dump())
			}
		}
	})

	t.Run("LIST then WATCH", func(t *testing.T) {
		var log requestLog
		ics, err := kubernetes.NewForConfig(log.wrap(s.restConfig()))
		if err != nil {
			t.Fatal(err)
		}
		var nodes, pods eventRecorder
		nodeStore, nodeCtl := classicInformer(ics, "nodes", &corev1.Node{}, &nodes)
		podStore, podCtl := classicInformer(ics, "pods", &corev1.Pod{}, &pods)
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		go nodeCtl.RunWithContext(runCtx)
		go podCtl.RunWithContext(runCtx)
		syncCtx, cancelSync := context.WithTimeout(ctx, 10*time.Second)
		defer cancelSync()
		if !cache.WaitForCacheSync(syncCtx.Done(), nodeCtl.HasSynced, podCtl.HasSynced) {
			t.Fatalf("LIST+WATCH informers did not sync within 10s; requests:\n%s", log.dump())
		}
		if _, ok, _ := nodeStore.GetByKey("pre-existing"); !ok {
			t.Error("node cache lacks the pre-existing node")
		}
		if _, ok, _ := podStore.GetByKey("kube-system/pre-existing"); !ok {
			t.Error("pod cache lacks the pre-existing pod")
		}
		informerScenario(t, cs, "classic", &nodes, &pods)
		for _, path := range []string{"/api/v1/nodes", "/api/v1/pods"} {
			reqs := log.all()
			if !slices.ContainsFunc(reqs, func(r loggedRequest) bool { return isList(r, path) }) {
				t.Errorf("no LIST %s:\n%s", path, log.dump())
			}
			if !slices.ContainsFunc(reqs, func(r loggedRequest) bool {
				return r.Path == path && strings.Contains(r.Query, "watch=true") && strings.Contains(r.Query, "resourceVersion=") && !strings.Contains(r.Query, "sendInitialEvents")
			}) {
				t.Errorf("no WATCH %s from the list's resourceVersion:\n%s", path, log.dump())
			}
		}
	})
}

// TestClientGoRestart stops and restarts the server under running
// informers, then checks that they resume and that old resourceVersions
// are answered with 410 Expired.
func TestClientGoRestart(t *testing.T) {
	s := startServer(t, serverOptions{})
	cs := s.client()
	ctx := context.Background()
	if _, err := cs.CoreV1().Nodes().Create(ctx, testNode("rs-1", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The informer clients keep their transport across the restart: the CA
	// and admin certificate persist in the data dir.
	factory := informers.NewSharedInformerFactory(cs, 0)
	nodeInf := factory.Core().V1().Nodes().Informer()
	var wlNodes, classicNodes eventRecorder
	if _, err := nodeInf.AddEventHandler(wlNodes.handler()); err != nil {
		t.Fatal(err)
	}
	classicStore, classicCtl := classicInformer(cs, "nodes", &corev1.Node{}, &classicNodes)
	runCtx, cancel := context.WithCancel(ctx)
	factory.Start(runCtx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	go classicCtl.RunWithContext(runCtx)
	syncCtx, cancelSync := context.WithTimeout(ctx, 10*time.Second)
	defer cancelSync()
	if !cache.WaitForCacheSync(syncCtx.Done(), nodeInf.HasSynced, classicCtl.HasSynced) {
		t.Fatal("informers did not sync within 10s")
	}

	if err := s.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	s.start()

	n, err := cs.CoreV1().Nodes().Get(ctx, "rs-1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("rs-1 after restart: %v", err)
	}
	n.Labels = map[string]string{"after": "restart"}
	if _, err := cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, testNode("rs-2", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, store := range map[string]cache.Store{"watch-list": nodeInf.GetStore(), "LIST+WATCH": classicStore} {
		eventually(t, 30*time.Second, name+" informer sees the changes made after the restart", func() error {
			obj, ok, _ := store.GetByKey("rs-1")
			if !ok || obj.(*corev1.Node).Labels["after"] != "restart" {
				return fmt.Errorf("rs-1 not updated in the cache")
			}
			if _, ok, _ := store.GetByKey("rs-2"); !ok {
				return fmt.Errorf("rs-2 not in the cache")
			}
			return nil
		})
	}

	t.Run("watch from an expired resourceVersion", func(t *testing.T) {
		// On the wire: HTTP 200, then one ERROR event carrying a v1 Status.
		ev := nextEvent(t, s.rawWatch(t, "/api/v1/nodes?watch=true&resourceVersion=1"), 5*time.Second)
		o := ev.object(t)
		if ev.Type != string(watch.Error) || o.Kind != "Status" || o.APIVersion != "v1" || o.Code != http.StatusGone || o.Reason != metav1.StatusReasonExpired {
			t.Fatalf("raw watch from resourceVersion 1: got %s %s, want ERROR with a v1 Status 410 Expired", ev.Type, ev.Object)
		}

		// Through client-go.
		w, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
		if err != nil {
			t.Fatalf("watch from resourceVersion 1: %v", err)
		}
		defer w.Stop()
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended without an event")
			}
			if ev.Type != watch.Error {
				t.Fatalf("first event %s, want ERROR", ev.Type)
			}
			st, ok := ev.Object.(*metav1.Status)
			if !ok {
				t.Fatalf("ERROR event carries %T, want *v1.Status", ev.Object)
			}
			if st.Code != http.StatusGone || st.Reason != metav1.StatusReasonExpired {
				t.Fatalf("ERROR event status code %d reason %q, want 410 Expired", st.Code, st.Reason)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no event within 5s")
		}
	})
}
