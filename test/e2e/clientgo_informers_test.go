package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

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
	s := startServer(t, serverOptions{apiOnly: true})
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
	s := startServer(t, serverOptions{apiOnly: true})
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
