package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

func TestClientGoServerFlags(t *testing.T) {
	s := startServer(t, serverOptions{apiOnly: true, args: []string{
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
		// Nodes live in the etcd member, leases in the in-memory lease store:
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
