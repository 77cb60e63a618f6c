package apiserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/apiserver/admission"
	"github.com/nodeplane/nodeplane/internal/apiserver/authz"
)

func testNode(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: taints},
	}
}

func testPod(name, node string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func testLease(name, ns string) *coordinationv1.Lease {
	holder := name
	return &coordinationv1.Lease{
		TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}
}

func decode[T any](t *testing.T, r response) *T {
	t.Helper()
	out := new(T)
	if err := json.Unmarshal(r.body, out); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	return out
}

// TestNodeAccess runs SPEC §8 through the real handler: the Node
// authorizer's rules and NodeRestriction admission, for node "a" acting on
// its own objects and on node "b"'s, plus an administrator and a plain
// user. Steps run in order; some build on earlier ones.
func TestNodeAccess(t *testing.T) {
	_, h := newTestServer(t, Config{
		Authorizer: authz.New(authz.Config{}),
		Admission:  []admission.Plugin{admission.DefaultTolerationSeconds{NotReadySeconds: 300, UnreachableSeconds: 300}, admission.NodeRestriction{}},
	})
	nodeA, nodeB := asNode("a"), asNode("b")
	const (
		nodes  = "/api/v1/nodes"
		pods   = "/api/v1/namespaces/default/pods"
		leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
		claims = "/api/v1/namespaces/default/persistentvolumeclaims"
	)
	noSchedule := corev1.Taint{Key: "example.com/dedicated", Effect: corev1.TaintEffectNoSchedule}

	// Node a registers itself (with a taint, as --register-with-taints
	// does); the administrator creates node b and the pods.
	created := decode[corev1.Node](t, mustDo(t, h, nodeA, http.MethodPost, nodes, testNode("a", map[string]string{"kubernetes.io/hostname": "a"}, noSchedule), http.StatusCreated))
	mustDo(t, h, admin, http.MethodPost, nodes, testNode("b", nil), http.StatusCreated)
	mustDo(t, h, admin, http.MethodPost, pods, testPod("on-a", "a"), http.StatusCreated)
	mustDo(t, h, admin, http.MethodPost, pods, testPod("on-b", "b"), http.StatusCreated)
	mustDo(t, h, admin, http.MethodPost, pods, testPod("doomed-a", "a"), http.StatusCreated)
	mustDo(t, h, admin, http.MethodPost, leases, testLease("b", "kube-node-lease"), http.StatusCreated)
	for _, c := range []struct{ claim, node string }{{"data-a", "a"}, {"data-b", "b"}} {
		mustDo(t, h, admin, http.MethodPost, "/api/v1/namespaces/default/persistentvolumeclaims", &corev1.PersistentVolumeClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: metav1.ObjectMeta{Name: c.claim, Namespace: "default"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}, http.StatusCreated)
		mustDo(t, h, admin, http.MethodPost, pods, testPod("uses-"+c.claim, c.node, func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.claim}}}}
		}), http.StatusCreated)
	}

	nodeAWith := func(mutate func(*corev1.Node)) func() any {
		return func() any {
			n := decode[corev1.Node](t, mustDo(t, h, admin, http.MethodGet, nodes+"/a", nil, http.StatusOK))
			mutate(n)
			return n
		}
	}
	mirror := func(mutate ...func(*corev1.Pod)) func() any {
		return func() any {
			yes := true
			p := testPod("static-a", "a", func(p *corev1.Pod) {
				p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "a", UID: created.UID, Controller: &yes}}
			})
			for _, m := range mutate {
				m(p)
			}
			return p
		}
	}
	podStatus := func(name string) func() any {
		return func() any {
			p := decode[corev1.Pod](t, mustDo(t, h, admin, http.MethodGet, pods+"/"+name, nil, http.StatusOK))
			p.Status.Phase = corev1.PodRunning
			return p
		}
	}
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))

	steps := []struct {
		name   string
		user   requester
		method string
		path   string
		body   func() any
		want   int
		// wantMsg is a substring of the Status message of a refusal.
		wantMsg string
	}{
		{"a node reads its own node", nodeA, "GET", nodes + "/a", nil, 200, ""},
		{"a node may not read another node", nodeA, "GET", nodes + "/b", nil, 403, `nodes "b" is forbidden: User "system:node:a" cannot get resource "nodes" in API group "" at the cluster scope: nodes may not read other nodes`},
		{"a node may not list all nodes", nodeA, "GET", nodes, nil, 403, `node "a" can only list nodes with fieldSelector metadata.name=a`},
		{"a node lists its own node by field selector", nodeA, "GET", nodes + "?fieldSelector=metadata.name%3Da", nil, 200, ""},
		{"a node may not watch all nodes", nodeA, "GET", nodes + "?watch=true", nil, 403, "can only watch nodes with fieldSelector metadata.name=a"},
		{"a node relabels itself with an allowed label", nodeA, "PUT", nodes + "/a", nodeAWith(func(n *corev1.Node) { n.Labels["rack"] = "r1" }), 200, ""},
		{"a node may not change its taints", nodeA, "PUT", nodes + "/a", nodeAWith(func(n *corev1.Node) { n.Spec.Taints = nil }), 403, `node "a" is not allowed to modify taints`},
		{"a node may not give itself a reserved label", nodeA, "PATCH", nodes + "/a", func() any { return `{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}` }, 403,
			`node "a" is not allowed to modify labels: node-role.kubernetes.io/control-plane`},
		{"a node patches an allowed label", nodeA, "PATCH", nodes + "/a", func() any { return `{"metadata":{"labels":{"node.kubernetes.io/pool":"x"}}}` }, 200, ""},
		{"a node patches its status", nodeA, "PATCH", nodes + "/a/status", func() any {
			return `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"AgentReady"}]}}`
		}, 200, ""},
		{"a node may not patch another node's status", nodeA, "PATCH", nodes + "/b/status", func() any { return `{"status":{"conditions":[{"type":"Ready","status":"False"}]}}` }, 403, `node "a" is not allowed to modify node "b"`},
		{"a node may not update another node", nodeA, "PATCH", nodes + "/b", func() any { return `{"metadata":{"labels":{"rack":"r9"}}}` }, 403, `node "a" is not allowed to modify node "b"`},
		{"a node may not register another node", nodeA, "POST", nodes, func() any { return testNode("c", nil) }, 403, `node "a" is not allowed to modify node "c"`},
		{"a node may not register with a reserved label", asNode("c"), "POST", nodes, func() any { return testNode("c", map[string]string{"node-restriction.kubernetes.io/trusted": "yes"}) }, 403,
			`node "c" is not allowed to set the following labels: node-restriction.kubernetes.io/trusted`},
		{"a node may not delete its node", nodeA, "DELETE", nodes + "/a", nil, 403, `cannot delete resource "nodes"`},

		{"a node creates its own lease", nodeA, "POST", leases, func() any { return testLease("a", "kube-node-lease") }, 201, ""},
		{"a node may not create a lease named after another node", nodeA, "POST", leases, func() any { return testLease("c", "kube-node-lease") }, 403, "can only access node lease with the same name as the requesting node"},
		{"a node may not create a lease in another namespace", nodeA, "POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", func() any { return testLease("a", "default") }, 403, "can only access leases in namespace kube-node-lease"},
		{"a node renews its own lease", nodeA, "PATCH", leases + "/a", func() any { return `{"spec":{"leaseDurationSeconds":40}}` }, 200, ""},
		{"a node may not read another node's lease", nodeA, "GET", leases + "/b", nil, 403, `leases.coordination.k8s.io "b" is forbidden: User "system:node:a" cannot get resource "leases" in API group "coordination.k8s.io" in the namespace "kube-node-lease": can only access node lease with the same name as the requesting node`},
		{"a node may not renew another node's lease", nodeA, "PUT", leases + "/b", func() any { return testLease("b", "kube-node-lease") }, 403, "same name as the requesting node"},
		{"a node may not list leases", nodeA, "GET", leases, nil, 403, "can only get, create, update, patch or delete a node lease"},
		{"a node deletes its own lease", nodeA, "DELETE", leases + "/a", nil, 200, ""},

		{"a node reads a pod bound to it", nodeA, "GET", pods + "/on-a", nil, 200, ""},
		{"a node may not read a pod bound elsewhere", nodeA, "GET", pods + "/on-b", nil, 403, "no relationship found between node 'a' and this object"},
		{"a node may not list pods without a selector", nodeA, "GET", "/api/v1/pods", nil, 403, `node "a" can only list pods with fieldSelector spec.nodeName=a`},
		{"a node may not watch pods without a selector", nodeA, "GET", "/api/v1/pods?watch=1", nil, 403, `node "a" can only watch pods with fieldSelector spec.nodeName=a`},
		{"a node may not list another node's pods", nodeA, "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Db", nil, 403, "can only list pods with fieldSelector spec.nodeName=a"},
		{"a node lists its pods", nodeA, "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Da", nil, 200, ""},
		{"a node updates the status of a pod bound to it", nodeA, "PUT", pods + "/on-a/status", podStatus("on-a"), 200, ""},
		{"a node may not update the status of a pod bound elsewhere", nodeA, "PUT", pods + "/on-b/status", podStatus("on-b"), 403, `node "a" can only update pod status for pods with spec.nodeName set to itself`},
		{"a node may not patch the status of a pod bound elsewhere", nodeA, "PATCH", pods + "/on-b/status", func() any { return `{"status":{"phase":"Failed"}}` }, 403, "can only update pod status for pods with spec.nodeName set to itself"},
		{"a node may not update a pod", nodeA, "PATCH", pods + "/on-a", func() any { return `{"metadata":{"labels":{"x":"y"}}}` }, 403, `cannot patch resource "pods"`},
		{"a node may not create an ordinary pod", nodeA, "POST", pods, func() any { return testPod("sneaky", "a") }, 403, `pod does not have "kubernetes.io/config.mirror" annotation, node "a" can only create mirror pods`},
		{"a node may not create a mirror pod for another node", nodeA, "POST", pods, mirror(func(p *corev1.Pod) { p.Spec.NodeName = "b" }), 403, `node "a" can only create pods with spec.nodeName set to itself`},
		{"a node may not create a mirror pod that mounts a secret", nodeA, "POST", pods, mirror(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}}}
		}), 403, "can not create pods that reference secrets"},
		{"a node creates its mirror pod", nodeA, "POST", pods, mirror(), 201, ""},
		{"a node may not delete a pod bound elsewhere", nodeA, "DELETE", pods + "/on-b", nil, 403, `node "a" can only delete pods with spec.nodeName set to itself`},
		{"a node may not evict a pod bound elsewhere", nodeA, "POST", pods + "/on-b/eviction", func() any {
			return &policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"}, ObjectMeta: metav1.ObjectMeta{Name: "on-b", Namespace: "default"}}
		}, 403, "can only evict pods with spec.nodeName set to itself"},
		{"a node deletes a pod bound to it", nodeA, "DELETE", pods + "/doomed-a?gracePeriodSeconds=0", nil, 200, ""},
		{"a node may not bind a pod", nodeA, "POST", pods + "/on-b/binding", func() any {
			return &corev1.Binding{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Binding"}, ObjectMeta: metav1.ObjectMeta{Name: "on-b"}, Target: corev1.ObjectReference{Kind: "Node", Name: "a"}}
		}, 403, `cannot create resource "pods/binding"`},
		{"a node may not read pod logs", nodeA, "GET", pods + "/on-a/log", nil, 403, `cannot get resource "pods/log"`},

		{"a node reads a claim its pod uses", nodeA, "GET", claims + "/data-a", nil, 200, ""},
		{"a node may not read a claim of another node's pod", nodeA, "GET", claims + "/data-b", nil, 403, "no relationship found between node 'a' and this object"},
		{"a node patches the capacity of a claim its pod uses", nodeA, "PATCH", claims + "/data-a/status", func() any { return `{"status":{"capacity":{"storage":"2Gi"}}}` }, 200, ""},
		{"a node may not change a claim's phase", nodeA, "PATCH", claims + "/data-a/status", func() any { return `{"status":{"phase":"Lost"}}` }, 403, "is not allowed to update fields other than status.capacity"},
		{"a node may not update a claim", nodeA, "PATCH", claims + "/data-a", func() any { return `{"metadata":{"labels":{"x":"y"}}}` }, 403, `cannot patch resource "persistentvolumeclaims"`},

		{"a node records an event", nodeA, "POST", "/api/v1/namespaces/default/events", func() any {
			return &corev1.Event{
				TypeMeta:       metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
				ObjectMeta:     metav1.ObjectMeta{Name: "a.1", Namespace: "default"},
				InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "a", APIVersion: "v1"},
				Reason:         "Starting", Message: "agent started", Type: corev1.EventTypeNormal,
				Source: corev1.EventSource{Component: "nodeplane-agent", Host: "a"}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
			}
		}, 201, ""},
		{"a node records an events.k8s.io event", nodeA, "POST", "/apis/events.k8s.io/v1/namespaces/default/events", func() any {
			return &eventsv1.Event{
				TypeMeta:   metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"},
				ObjectMeta: metav1.ObjectMeta{Name: "a.2", Namespace: "default"},
				EventTime:  metav1.NewMicroTime(now.Time), ReportingController: "nodeplane.io/agent", ReportingInstance: "agent-a",
				Action: "Start", Reason: "Starting", Type: corev1.EventTypeNormal, Regarding: corev1.ObjectReference{Kind: "Node", Name: "a", APIVersion: "v1"},
			}
		}, 201, ""},
		{"a node may not list events", nodeA, "GET", "/api/v1/events", nil, 403, `cannot list resource "events"`},
		{"a node may not read namespaces", nodeA, "GET", "/api/v1/namespaces/default", nil, 403, `namespaces "default" is forbidden: User "system:node:a" cannot get resource "namespaces"`},
		{"a node may not list namespaces", nodeA, "GET", "/api/v1/namespaces", nil, 403, `cannot list resource "namespaces"`},
		{"a node reads discovery", nodeA, "GET", "/apis", nil, 200, ""},
		{"a node identity that names no node is refused", asNode(""), "GET", nodes + "/a", nil, 403, "could not determine node from user"},
		{"node b reads its own pod", nodeB, "GET", pods + "/on-b", nil, 200, ""},

		{"a plain user may not read pods", plainUser, "GET", pods + "/on-a", nil, 403, `User "alice" cannot get resource "pods"`},
		{"a plain user may not create nodes", plainUser, "POST", nodes, func() any { return testNode("d", nil) }, 403, `User "alice" cannot create resource "nodes"`},
		{"a plain user reads discovery", plainUser, "GET", "/api/v1", nil, 200, ""},
		{"a request without a user is refused", requester{}, "GET", "/api/v1/pods", nil, 403, "no user on the request"},

		{"an administrator lists every pod", admin, "GET", "/api/v1/pods", nil, 200, ""},
		{"an administrator changes a node's taints", admin, "PATCH", nodes + "/a", func() any { return `{"spec":{"taints":null}}` }, 200, ""},
		{"an administrator sets a reserved label", admin, "PATCH", nodes + "/b", func() any { return `{"metadata":{"labels":{"node-role.kubernetes.io/worker":""}}}` }, 200, ""},
		{"the scheduler binds a pod", requester{name: authz.UserScheduler}, "POST", pods, func() any { return testPod("unbound", "") }, 201, ""},
		{"an administrator deletes another node", admin, "DELETE", nodes + "/b", nil, 200, ""},
	}
	for _, st := range steps {
		var body any
		if st.body != nil {
			body = st.body()
		}
		resp := do(t, h, st.user, st.method, st.path, body)
		if resp.code != st.want {
			t.Errorf("%s: %s %s got %d %s, want %d", st.name, st.method, st.path, resp.code, resp.body, st.want)
			continue
		}
		if st.want == http.StatusForbidden {
			s := resp.status(t)
			if s.Reason != metav1.StatusReasonForbidden || !strings.Contains(s.Message, st.wantMsg) {
				t.Errorf("%s: got reason %s message %q, want Forbidden with %q", st.name, s.Reason, s.Message, st.wantMsg)
			}
		}
	}

	t.Run("a node's pod list holds only its pods", func(t *testing.T) {
		list := decode[corev1.PodList](t, mustDo(t, h, nodeA, "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Da", nil, 200))
		var names []string
		for _, p := range list.Items {
			names = append(names, p.Name)
		}
		if got := strings.Join(names, ","); got != "on-a,static-a,uses-data-a" {
			t.Errorf("got pods %s, want on-a,static-a,uses-data-a", got)
		}
	})
	t.Run("the lifted taint and the kept labels are stored", func(t *testing.T) {
		n := decode[corev1.Node](t, mustDo(t, h, admin, "GET", nodes+"/a", nil, 200))
		if len(n.Spec.Taints) != 0 || n.Labels["rack"] != "r1" || n.Labels["node.kubernetes.io/pool"] != "x" {
			t.Errorf("got taints %v labels %v", n.Spec.Taints, n.Labels)
		}
	})
}
