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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

// TestClientGoTyped drives the typed clients of client-go v0.37 (protobuf
// request bodies, JSON answers) through the verbs and semantics agents,
// controllers and kubectl rely on.
func TestClientGoTyped(t *testing.T) {
	s := startServer(t, serverOptions{apiOnly: true})
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
