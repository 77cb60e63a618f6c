package authz

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
)

// fakeObjects is an in-memory Objects.
type fakeObjects struct {
	pods   []*corev1.Pod
	claims []*corev1.PersistentVolumeClaim
	vas    []*storagev1.VolumeAttachment
	err    error
}

func (f *fakeObjects) Pod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	if f.err != nil {
		return nil, f.err
	}
	for _, p := range f.pods {
		if p.Namespace == ns && p.Name == name {
			return p, nil
		}
	}
	return nil, nil
}

func (f *fakeObjects) PodsOnNode(_ context.Context, node string) ([]*corev1.Pod, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []*corev1.Pod
	for _, p := range f.pods {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out, nil
}

func (f *fakeObjects) PersistentVolumeClaim(_ context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	for _, c := range f.claims {
		if c.Namespace == ns && c.Name == name {
			return c, nil
		}
	}
	return nil, nil
}

func (f *fakeObjects) VolumeAttachment(_ context.Context, name string) (*storagev1.VolumeAttachment, error) {
	for _, v := range f.vas {
		if v.Name == name {
			return v, nil
		}
	}
	return nil, nil
}

func nodeUser(name string) *authn.User {
	return &authn.User{Name: NodeUserPrefix + name, Groups: []string{authn.GroupNodes, authn.GroupAuthenticated}}
}

var (
	admin     = &authn.User{Name: "admin", Groups: []string{authn.GroupMasters, authn.GroupAuthenticated}}
	plainUser = &authn.User{Name: "alice", Groups: []string{authn.GroupAuthenticated}}
	nodeA     = nodeUser("a")
)

func res(verb, group, resource, sub, ns, name string) Attributes {
	return Attributes{ResourceRequest: true, Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
}

func withFields(a Attributes, sel string) Attributes {
	a.FieldSelector = sel
	return a
}

func testObjects() *fakeObjects {
	boundPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "on-a", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "a", Volumes: []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
			{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg-a"}}}},
			{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec-a"}}},
		}, Containers: []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "env-a"}}}}}}},
	}
	otherPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "on-b", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "b", Volumes: []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "b-data"}}},
			{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg-b"}}}},
			{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec-b"}}},
		}},
	}
	return &fakeObjects{
		pods: []*corev1.Pod{boundPod, otherPod, {ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "default"}}},
		claims: []*corev1.PersistentVolumeClaim{
			{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-a"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "b-data", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-b"}},
		},
		vas: []*storagev1.VolumeAttachment{
			{ObjectMeta: metav1.ObjectMeta{Name: "va-a"}, Spec: storagev1.VolumeAttachmentSpec{NodeName: "a"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "va-b"}, Spec: storagev1.VolumeAttachmentSpec{NodeName: "b"}},
		},
	}
}

func TestAuthorize(t *testing.T) {
	const lease = "coordination.k8s.io"
	tests := []struct {
		name string
		user *authn.User
		a    Attributes
		// wantReason is "" when the request is allowed; otherwise a
		// substring of the Forbidden message.
		wantReason string
	}{
		{"an administrator may delete any node", admin, res("delete", "", "nodes", "", "", "b"), ""},
		{"the controller manager may list every pod", &authn.User{Name: UserControllerManager}, res("list", "", "pods", "", "", ""), ""},
		{"the scheduler may bind pods", &authn.User{Name: UserScheduler}, res("create", "", "pods", "binding", "default", "p"), ""},
		{"a plain user may not list pods", plainUser, res("list", "", "pods", "", "", ""), `User "alice" cannot list resource "pods" in API group "" at the cluster scope`},
		{"a node name without the nodes group is a plain user", &authn.User{Name: "system:node:a"}, res("get", "", "nodes", "", "", "a"), `cannot get resource "nodes"`},
		{"a node identity naming no node is refused", nodeUser(""), res("get", "", "nodes", "", "", "a"), "could not determine node from user"},

		{"a node reads its own node", nodeA, res("get", "", "nodes", "", "", "a"), ""},
		{"a node may not read another node", nodeA, res("get", "", "nodes", "", "", "b"), `nodes "b" is forbidden: User "system:node:a" cannot get resource "nodes" in API group "" at the cluster scope: nodes may not read other nodes`},
		{"a node may not list all nodes", nodeA, res("list", "", "nodes", "", "", ""), `node "a" can only list nodes with fieldSelector metadata.name=a`},
		{"a node lists its own node by name", nodeA, withFields(res("list", "", "nodes", "", "", ""), "metadata.name=a"), ""},
		{"a node watches its own node by name", nodeA, withFields(res("watch", "", "nodes", "", "", ""), "metadata.name==a"), ""},
		{"a node may not watch another node by name", nodeA, withFields(res("watch", "", "nodes", "", "", ""), "metadata.name=b"), "nodes may not read other nodes"},
		{"a node creates a node (admission scopes it)", nodeA, res("create", "", "nodes", "", "", ""), ""},
		{"a node patches node status", nodeA, res("patch", "", "nodes", "status", "", "a"), ""},
		{"a node may not delete a node", nodeA, res("delete", "", "nodes", "", "", "a"), `node "a" may only get, list and watch its own Node`},

		{"a node gets a pod bound to it", nodeA, res("get", "", "pods", "", "default", "on-a"), ""},
		{"a node may not get a pod bound elsewhere", nodeA, res("get", "", "pods", "", "default", "on-b"), "no relationship found between node 'a' and this object"},
		{"a node may not get an unbound pod", nodeA, res("get", "", "pods", "", "default", "pending"), "no relationship found"},
		{"a node may not get a missing pod", nodeA, res("get", "", "pods", "", "default", "gone"), "no relationship found"},
		{"a node may not list pods without a selector", nodeA, res("list", "", "pods", "", "", ""), `node "a" can only list pods with fieldSelector spec.nodeName=a`},
		{"a node may not watch another node's pods", nodeA, withFields(res("watch", "", "pods", "", "", ""), "spec.nodeName=b"), `node "a" can only watch pods with fieldSelector spec.nodeName=a`},
		{"a node lists its pods", nodeA, withFields(res("list", "", "pods", "", "", ""), "spec.nodeName=a"), ""},
		{"a node watches its pods with another requirement too", nodeA, withFields(res("watch", "", "pods", "", "", ""), "status.phase!=Failed,spec.nodeName=a"), ""},
		{"a node watches one bound pod by name", nodeA, withFields(res("watch", "", "pods", "", "default", ""), "metadata.name=on-a"), ""},
		{"a node may not watch one pod bound elsewhere", nodeA, withFields(res("watch", "", "pods", "", "default", ""), "metadata.name=on-b"), "no relationship found"},
		{"a node updates pod status", nodeA, res("update", "", "pods", "status", "default", "on-b"), ""},
		{"a node evicts a pod", nodeA, res("create", "", "pods", "eviction", "default", "on-a"), ""},
		{"a node creates a pod (admission allows mirror pods only)", nodeA, res("create", "", "pods", "", "default", ""), ""},
		{"a node deletes a pod (admission checks the binding)", nodeA, res("delete", "", "pods", "", "default", "on-b"), ""},
		{"a node may not update a pod", nodeA, res("update", "", "pods", "", "default", "on-a"), "may only get, list, watch, create and delete pods"},
		{"a node may not read pod logs", nodeA, res("get", "", "pods", "log", "default", "on-a"), `cannot get resource "pods/log"`},
		{"a node may not bind pods", nodeA, res("create", "", "pods", "binding", "default", "pending"), `cannot create resource "pods/binding"`},

		{"a node renews its lease", nodeA, res("update", lease, "leases", "", "kube-node-lease", "a"), ""},
		{"a node creates a lease (admission checks the name)", nodeA, res("create", lease, "leases", "", "kube-node-lease", ""), ""},
		{"a node may not touch another node's lease", nodeA, res("update", lease, "leases", "", "kube-node-lease", "b"), `leases.coordination.k8s.io "b" is forbidden: User "system:node:a" cannot update resource "leases" in API group "coordination.k8s.io" in the namespace "kube-node-lease": can only access node lease with the same name as the requesting node`},
		{"a node may not use leases elsewhere", nodeA, res("get", lease, "leases", "", "kube-system", "a"), "can only access leases in namespace kube-node-lease"},
		{"a node may not list leases", nodeA, res("list", lease, "leases", "", "kube-node-lease", ""), "can only get, create, update, patch or delete a node lease"},

		{"a node records a core event", nodeA, res("create", "", "events", "", "default", ""), ""},
		{"a node patches an events.k8s.io event", nodeA, res("patch", "events.k8s.io", "events", "", "default", "e"), ""},
		{"a node may not list events", nodeA, res("list", "", "events", "", "", ""), `cannot list resource "events"`},
		{"a node may not read namespaces", nodeA, res("get", "", "namespaces", "", "", "default"), `namespaces "default" is forbidden`},

		{"a node gets a configmap its pod mounts", nodeA, res("get", "", "configmaps", "", "default", "cfg-a"), ""},
		{"a node watches a configmap its pod mounts by name", nodeA, withFields(res("watch", "", "configmaps", "", "default", ""), "metadata.name=cfg-a"), ""},
		{"a node gets a secret its pod mounts", nodeA, res("get", "", "secrets", "", "default", "sec-a"), ""},
		{"a node gets a secret its pod's env comes from", nodeA, res("get", "", "secrets", "", "default", "env-a"), ""},
		{"a node may not get a configmap only another node's pod mounts", nodeA, res("get", "", "configmaps", "", "default", "cfg-b"), "no relationship found between node 'a' and this object"},
		{"a node may not get a secret only another node's pod mounts", nodeA, res("get", "", "secrets", "", "default", "sec-b"), "no relationship found"},
		{"a node may not get a secret of that name in another namespace", nodeA, res("get", "", "secrets", "", "kube-system", "sec-a"), "no relationship found"},
		{"a node may not get a configmap its pod names as a secret", nodeA, res("get", "", "configmaps", "", "default", "sec-a"), "no relationship found"},
		{"a node may not list secrets", nodeA, res("list", "", "secrets", "", "default", ""), "no relationship found"},
		{"a node may not update a configmap its pod mounts", nodeA, res("update", "", "configmaps", "", "default", "cfg-a"), `may only get, list and watch configmaps referenced by its pods`},
		{"a node gets a claim its pod uses", nodeA, res("get", "", "persistentvolumeclaims", "", "default", "data"), ""},
		{"a node gets the claim of its pod's ephemeral volume", nodeA, res("get", "", "persistentvolumeclaims", "", "default", "on-a-scratch"), ""},
		{"a node updates the status of a claim its pod uses", nodeA, res("update", "", "persistentvolumeclaims", "status", "default", "data"), ""},
		{"a node may not get another node's claim", nodeA, res("get", "", "persistentvolumeclaims", "", "default", "b-data"), "no relationship found"},
		{"a node may not update a claim", nodeA, res("update", "", "persistentvolumeclaims", "", "default", "data"), `cannot update resource "persistentvolumeclaims"`},
		{"a node gets the volume of its claim", nodeA, res("get", "", "persistentvolumes", "", "", "pv-a"), ""},
		{"a node may not get another node's volume", nodeA, res("get", "", "persistentvolumes", "", "", "pv-b"), "no relationship found"},
		{"a node gets its volume attachment", nodeA, res("get", "storage.k8s.io", "volumeattachments", "", "", "va-a"), ""},
		{"a node may not get another node's attachment", nodeA, res("get", "storage.k8s.io", "volumeattachments", "", "", "va-b"), "no relationship found"},
		{"a node may not mark its attachment attached (the attacher's job)", nodeA, res("update", "storage.k8s.io", "volumeattachments", "status", "", "va-a"), `cannot update resource "volumeattachments/status"`},
		{"a node may not create a storage class", nodeA, res("create", "storage.k8s.io", "storageclasses", "", "", ""), `cannot create resource "storageclasses"`},
		{"a plain user may not create a storage class", plainUser, res("create", "storage.k8s.io", "storageclasses", "", "", ""), `cannot create resource "storageclasses"`},

		{"anyone reads discovery", plainUser, Attributes{Verb: "get", Path: "/apis/apps/v1"}, ""},
		{"anyone reads the version", nodeA, Attributes{Verb: "get", Path: "/version"}, ""},
		{"anyone reads the openapi documents", plainUser, Attributes{Verb: "get", Path: "/openapi/v3/api/v1"}, ""},
		{"a node may not read metrics", nodeA, Attributes{Verb: "get", Path: "/metrics"}, `forbidden: User "system:node:a" cannot get path "/metrics"`},
		{"a plain user may not post to a public path", plainUser, Attributes{Verb: "post", Path: "/version"}, `cannot post path "/version"`},
		{"an administrator reads metrics", admin, Attributes{Verb: "get", Path: "/metrics"}, ""},
	}
	z := New(Config{})
	objs := testObjects()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := authn.WithUser(context.Background(), tt.user)
			err := z.Authorize(ctx, objs, tt.a)
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("got %v, want allowed", err)
				}
				return
			}
			if !apierrors.IsForbidden(err) {
				t.Fatalf("got %v, want Forbidden", err)
			}
			if !strings.Contains(err.Error(), tt.wantReason) {
				t.Errorf("got %q, want it to contain %q", err.Error(), tt.wantReason)
			}
		})
	}
}

func TestAuthorizeReportsLookupErrors(t *testing.T) {
	boom := errors.New("storage down")
	ctx := authn.WithUser(context.Background(), nodeA)
	err := New(Config{}).Authorize(ctx, &fakeObjects{err: boom}, res("get", "", "pods", "", "default", "p"))
	if !errors.Is(err, boom) || apierrors.IsForbidden(err) {
		t.Fatalf("got %v, want the lookup error, not a denial", err)
	}
}

func TestAuthorizeWithoutUserIsForbidden(t *testing.T) {
	err := New(Config{}).Authorize(context.Background(), nil, Attributes{Verb: "get", Path: "/version"})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("got %v, want Forbidden", err)
	}
}

func TestNonResourceMiddleware(t *testing.T) {
	z := New(Config{})
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := z.NonResource(next)
	tests := []struct {
		name string
		user *authn.User
		path string
		want int
	}{
		{"API paths pass to the API server unchecked", plainUser, "/api/v1/pods", http.StatusTeapot},
		{"group discovery passes", plainUser, "/apis", http.StatusTeapot},
		{"metrics are refused to a node", nodeA, "/metrics", http.StatusForbidden},
		{"metrics are served to an administrator", admin, "/metrics", http.StatusTeapot},
		{"openapi is served to a node", nodeA, "/openapi/v2", http.StatusTeapot},
		{"an unknown path is refused to a plain user", plainUser, "/debug/pprof/", http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, tt.path, nil)
			req = req.WithContext(authn.WithUser(req.Context(), tt.user))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("got %d (%s), want %d", rec.Code, rec.Body, tt.want)
			}
			if rec.Code == http.StatusForbidden && !strings.Contains(rec.Body.String(), `"reason":"Forbidden"`) {
				t.Errorf("body %s is not a Forbidden Status", rec.Body)
			}
		})
	}
}

func TestNodeName(t *testing.T) {
	tests := []struct {
		name     string
		user     *authn.User
		wantName string
		wantNode bool
	}{
		{"a node certificate names its node", nodeUser("worker-1"), "worker-1", true},
		{"the prefix alone is a node with no name", nodeUser(""), "", true},
		{"the nodes group without the prefix is not a node", &authn.User{Name: "bob", Groups: []string{authn.GroupNodes}}, "", false},
		{"the prefix without the group is not a node", &authn.User{Name: "system:node:x"}, "", false},
		{"no user is not a node", nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, ok := NodeName(tt.user)
			if name != tt.wantName || ok != tt.wantNode {
				t.Errorf("got (%q, %v), want (%q, %v)", name, ok, tt.wantName, tt.wantNode)
			}
		})
	}
}
