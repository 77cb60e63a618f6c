package apiserver

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/nodeplane/nodeplane/internal/apiserver/authz"
	"github.com/nodeplane/nodeplane/internal/apiserver/scraper"
)

// fakeUsage answers for node n1 and pod default/busy only.
type fakeUsage struct{ at time.Time }

func (f fakeUsage) Node(name string) (scraper.Usage, bool) {
	if name != "n1" {
		return scraper.Usage{}, false
	}
	return scraper.Usage{Timestamp: f.at, Window: 15 * time.Second, CPU: 0.25, Memory: 64 << 20}, true
}

func (f fakeUsage) Pod(ns, name string) (scraper.PodUsage, bool) {
	if ns != "default" || name != "busy" {
		return scraper.PodUsage{}, false
	}
	return scraper.PodUsage{Timestamp: f.at, Window: 15 * time.Second, Containers: []scraper.ContainerUsage{
		{Name: "main", Usage: scraper.Usage{CPU: 1.5, Memory: 1 << 20}},
	}}, true
}

func TestResourceMetricsAPI(t *testing.T) {
	at := time.Unix(1700000000, 0)
	s, h := newTestServer(t, Config{Authorizer: authz.New(authz.Config{}), ResourceUsage: fakeUsage{at}})
	if err := s.EnsureBootstrapPolicy(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustDo(t, h, admin, http.MethodPost, "/api/v1/nodes", testNode("n1", map[string]string{"zone": "a"}), http.StatusCreated)
	mustDo(t, h, admin, http.MethodPost, "/api/v1/nodes", testNode("n2", map[string]string{"zone": "b"}), http.StatusCreated)
	for _, name := range []string{"busy", "idle"} {
		mustDo(t, h, admin, http.MethodPost, "/api/v1/namespaces/default/pods", &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "sh"}}},
		}, http.StatusCreated)
	}
	const base = "/apis/metrics.k8s.io/v1beta1"

	t.Run("discovery lists the group with nodes and pods, get and list", func(t *testing.T) {
		list := decode[metav1.APIResourceList](t, mustDo(t, h, admin, http.MethodGet, base, nil, http.StatusOK))
		got := map[string]string{}
		for _, r := range list.APIResources {
			got[r.Name] = r.Kind + " " + strings.Join(r.Verbs, ",")
		}
		if got["nodes"] != "NodeMetrics get,list" || got["pods"] != "PodMetrics get,list" {
			t.Errorf("resources %v", got)
		}
		if !strings.Contains(string(mustDo(t, h, admin, http.MethodGet, "/apis", nil, http.StatusOK).body), `"metrics.k8s.io/v1beta1"`) {
			t.Error("/apis does not list metrics.k8s.io/v1beta1")
		}
	})

	t.Run("a node list holds the nodes with usage, with their labels, in nanocores and bytes", func(t *testing.T) {
		waitFor(t, "n1 in the cache", func() bool {
			l := decode[metricsv1beta1.NodeMetricsList](t, mustDo(t, h, admin, http.MethodGet, base+"/nodes", nil, http.StatusOK))
			return len(l.Items) == 1
		})
		l := decode[metricsv1beta1.NodeMetricsList](t, mustDo(t, h, admin, http.MethodGet, base+"/nodes", nil, http.StatusOK))
		n := l.Items[0]
		if l.Kind != "NodeMetricsList" || n.Name != "n1" || n.Labels["zone"] != "a" || !n.Timestamp.Time.Equal(at) || n.Window.Duration != 15*time.Second {
			t.Errorf("list %+v", l)
		}
		if cpu, mem := n.Usage[corev1.ResourceCPU], n.Usage[corev1.ResourceMemory]; cpu.MilliValue() != 250 || mem.Value() != 64<<20 {
			t.Errorf("usage cpu %s memory %s, want 250m and 64Mi", cpu.String(), mem.String())
		}
		if l := decode[metricsv1beta1.NodeMetricsList](t, mustDo(t, h, admin, http.MethodGet, base+"/nodes?labelSelector=zone%3Db", nil, http.StatusOK)); len(l.Items) != 0 {
			t.Errorf("zone=b selects %v, want none (n2 has no usage)", l.Items)
		}
	})

	t.Run("a get of a node without usage or of no node is 404", func(t *testing.T) {
		for _, name := range []string{"n2", "nope"} {
			st := mustDo(t, h, admin, http.MethodGet, base+"/nodes/"+name, nil, http.StatusNotFound).status(t)
			if st.Reason != metav1.StatusReasonNotFound || !strings.Contains(st.Message, "metrics.k8s.io") {
				t.Errorf("%s: %+v", name, st)
			}
		}
	})

	t.Run("pods are selected by namespace and labels", func(t *testing.T) {
		waitFor(t, "busy has metrics", func() bool {
			return do(t, h, admin, http.MethodGet, base+"/namespaces/default/pods/busy", nil).code == http.StatusOK
		})
		p := decode[metricsv1beta1.PodMetrics](t, mustDo(t, h, admin, http.MethodGet, base+"/namespaces/default/pods/busy", nil, http.StatusOK))
		if len(p.Containers) != 1 || p.Containers[0].Name != "main" || p.Labels["app"] != "busy" {
			t.Errorf("pod metrics %+v", p)
		}
		if cpu := p.Containers[0].Usage[corev1.ResourceCPU]; cpu.MilliValue() != 1500 {
			t.Errorf("cpu %s", cpu.String())
		}
		for path, want := range map[string]int{
			base + "/pods": 1,
			base + "/namespaces/default/pods?labelSelector=app%3Dbusy": 1,
			base + "/namespaces/default/pods?labelSelector=app%3Didle": 0,
			base + "/namespaces/kube-system/pods":                      0,
		} {
			if l := decode[metricsv1beta1.PodMetricsList](t, mustDo(t, h, admin, http.MethodGet, path, nil, http.StatusOK)); len(l.Items) != want {
				t.Errorf("%s: %d items, want %d", path, len(l.Items), want)
			}
		}
	})

	t.Run("writes and watches are refused", func(t *testing.T) {
		mustDo(t, h, admin, http.MethodDelete, base+"/nodes/n1", nil, http.StatusMethodNotAllowed)
		mustDo(t, h, admin, http.MethodGet, base+"/nodes?watch=true", nil, http.StatusMethodNotAllowed)
	})

	t.Run("a user without a grant gets 403, one bound to view may read", func(t *testing.T) {
		bob := requester{"bob", []string{"watchers"}}
		st := mustDo(t, h, bob, http.MethodGet, base+"/nodes", nil, http.StatusForbidden).status(t)
		if !strings.Contains(st.Message, `User "bob" cannot list resource "nodes" in API group "metrics.k8s.io"`) {
			t.Errorf("message %q", st.Message)
		}
		mustDo(t, h, admin, http.MethodPost, clusterRoleBindingsPath, clusterBinding("watchers", "view", rbacv1.Subject{Kind: "Group", Name: "watchers"}), http.StatusCreated)
		waitFor(t, "bob reads pod metrics", func() bool {
			return do(t, h, bob, http.MethodGet, base+"/namespaces/default/pods", nil).code == http.StatusOK
		})
	})
}
