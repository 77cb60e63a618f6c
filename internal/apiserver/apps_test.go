package apiserver

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodeplane/nodeplane/internal/apiserver/openapi"
	"github.com/nodeplane/nodeplane/internal/apiserver/registry"
	"github.com/nodeplane/nodeplane/internal/apiserver/scheme"
)

const (
	deploymentsPath = "/apis/apps/v1/namespaces/default/deployments"
	replicaSetsPath = "/apis/apps/v1/namespaces/default/replicasets"
	daemonSetsPath  = "/apis/apps/v1/namespaces/default/daemonsets"
)

func podTemplate(app, image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}},
	}
}

func testDeployment(name string) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name, "sleep"),
		},
	}
}

func testReplicaSet(name string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name, "sleep"),
		},
	}
}

func testDaemonSet(name string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name, "sleep"),
		},
	}
}

// doRaw sends body with the given content type and accept headers as the
// administrator.
func doRaw(t *testing.T, h http.Handler, method, path, contentType, accept, body string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	req.Header.Set(headerUser, admin.name)
	req.Header.Set(headerGroups, strings.Join(admin.groups, ","))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return response{code: rec.Code, body: rec.Body.Bytes()}
}

// TestDeployments runs a deployment through the real handler: create
// with defaults, spec and annotation changes bumping the generation,
// status writes through /status only, the scale subresource, field
// selectors and Table output. Steps build on each other.
func TestDeployments(t *testing.T) {
	_, h := newTestServer(t, Config{})
	item := deploymentsPath + "/web"

	in := testDeployment("web")
	in.Status.Replicas = 7 // a client may not set status on create
	d := decode[appsv1.Deployment](t, mustDo(t, h, admin, http.MethodPost, deploymentsPath, in, http.StatusCreated))
	t.Run("a new deployment is defaulted, at generation 1, without status", func(t *testing.T) {
		if d.Generation != 1 {
			t.Errorf("generation: got %d, want 1", d.Generation)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
			t.Errorf("spec.replicas: got %v, want 1", d.Spec.Replicas)
		}
		want25 := intstr.FromString("25%")
		if ru := d.Spec.Strategy.RollingUpdate; d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil || *ru.MaxSurge != want25 || *ru.MaxUnavailable != want25 {
			t.Errorf("strategy: got %+v, want RollingUpdate 25%%/25%%", d.Spec.Strategy)
		}
		if d.Status.Replicas != 0 {
			t.Errorf("status.replicas: got %d, want 0 (cleared on create)", d.Status.Replicas)
		}
	})

	t.Run("a deployment whose selector misses its template labels is refused", func(t *testing.T) {
		bad := testDeployment("bad")
		bad.Spec.Template.Labels = map[string]string{"app": "other"}
		st := mustDo(t, h, admin, http.MethodPost, deploymentsPath, bad, http.StatusUnprocessableEntity).status(t)
		if st.Details == nil || st.Details.Kind != "Deployment" || st.Details.Group != "apps" {
			t.Errorf("details: got %+v, want kind Deployment in group apps", st.Details)
		}
	})

	t.Run("a spec change bumps the generation and keeps the status", func(t *testing.T) {
		cur := decode[appsv1.Deployment](t, mustDo(t, h, admin, http.MethodGet, item, nil, http.StatusOK))
		cur.Spec.Template.Spec.Containers[0].Image = "sleep2"
		cur.Status.Replicas = 9
		got := decode[appsv1.Deployment](t, mustDo(t, h, admin, http.MethodPut, item, cur, http.StatusOK))
		if got.Generation != 2 || got.Status.Replicas != 0 {
			t.Errorf("got generation %d status.replicas %d, want 2 and 0", got.Generation, got.Status.Replicas)
		}
	})

	t.Run("an annotation change bumps a deployment's generation", func(t *testing.T) {
		got := decode[appsv1.Deployment](t, mustDo(t, h, admin, http.MethodPatch, item,
			map[string]any{"metadata": map[string]any{"annotations": map[string]string{"note": "x"}}}, http.StatusOK))
		if got.Generation != 3 {
			t.Errorf("generation: got %d, want 3", got.Generation)
		}
	})

	t.Run("a label change does not bump the generation", func(t *testing.T) {
		got := decode[appsv1.Deployment](t, mustDo(t, h, admin, http.MethodPatch, item,
			map[string]any{"metadata": map[string]any{"labels": map[string]string{"tier": "web"}}}, http.StatusOK))
		if got.Generation != 3 {
			t.Errorf("generation: got %d, want 3", got.Generation)
		}
	})

	t.Run("status is written through /status, which keeps spec and labels", func(t *testing.T) {
		cur := decode[appsv1.Deployment](t, mustDo(t, h, admin, http.MethodGet, item, nil, http.StatusOK))
		cur.Spec.Paused = true
		cur.Labels = map[string]string{"tier": "changed"}
		cur.Status = appsv1.DeploymentStatus{
			ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 2, UnavailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{
				Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
				Message: `ReplicaSet "web-abc" has successfully progressed.`,
			}},
		}
		got := decode[appsv1.Deployment](t, mustDo(t, h, admin, http.MethodPut, item+"/status", cur, http.StatusOK))
		if got.Status.Replicas != 3 || got.Status.ObservedGeneration != 3 || len(got.Status.Conditions) != 1 {
			t.Errorf("status: got %+v, want the written status", got.Status)
		}
		if got.Spec.Paused || got.Labels["tier"] != "web" || got.Generation != 3 {
			t.Errorf("got paused %v labels %v generation %d, want the stored spec and labels at generation 3", got.Spec.Paused, got.Labels, got.Generation)
		}
	})

	t.Run("an inconsistent status is refused", func(t *testing.T) {
		mustDo(t, h, admin, http.MethodPatch, item+"/status",
			map[string]any{"status": map[string]any{"updatedReplicas": 10}}, http.StatusUnprocessableEntity)
	})

	t.Run("the scale subresource reads spec and status replicas and the selector", func(t *testing.T) {
		s := decode[autoscalingv1.Scale](t, mustDo(t, h, admin, http.MethodGet, item+"/scale", nil, http.StatusOK))
		if s.Kind != "Scale" || s.APIVersion != "autoscaling/v1" {
			t.Errorf("kind: got %s %s, want autoscaling/v1 Scale", s.APIVersion, s.Kind)
		}
		if s.Name != "web" || s.Namespace != "default" || s.UID != d.UID || s.ResourceVersion == "" {
			t.Errorf("metadata: got %+v, want the deployment's name, namespace, uid and resourceVersion", s.ObjectMeta)
		}
		if s.Spec.Replicas != 1 || s.Status.Replicas != 3 || s.Status.Selector != "app=web" {
			t.Errorf("got spec %d status %d selector %q, want 1, 3, app=web", s.Spec.Replicas, s.Status.Replicas, s.Status.Selector)
		}
	})

	t.Run("kubectl scale's merge patch of the scale changes spec.replicas", func(t *testing.T) {
		s := decode[autoscalingv1.Scale](t, mustDo(t, h, admin, http.MethodPatch, item+"/scale",
			map[string]any{"spec": map[string]any{"replicas": 5}}, http.StatusOK))
		if s.Spec.Replicas != 5 {
			t.Errorf("scale spec.replicas: got %d, want 5", s.Spec.Replicas)
		}
		got := decode[appsv1.Deployment](t, mustDo(t, h, admin, http.MethodGet, item, nil, http.StatusOK))
		if *got.Spec.Replicas != 5 || got.Generation != 4 || got.Status.Replicas != 3 {
			t.Errorf("got replicas %d generation %d status.replicas %d, want 5, 4, 3", *got.Spec.Replicas, got.Generation, got.Status.Replicas)
		}
	})

	t.Run("a scale update with the current resourceVersion is applied", func(t *testing.T) {
		s := decode[autoscalingv1.Scale](t, mustDo(t, h, admin, http.MethodGet, item+"/scale", nil, http.StatusOK))
		s.Spec.Replicas = 2
		got := decode[autoscalingv1.Scale](t, mustDo(t, h, admin, http.MethodPut, item+"/scale", s, http.StatusOK))
		if got.Spec.Replicas != 2 || got.ResourceVersion == s.ResourceVersion {
			t.Errorf("got replicas %d at %s, want 2 at a new resourceVersion", got.Spec.Replicas, got.ResourceVersion)
		}
		t.Run("and one with a stale resourceVersion conflicts", func(t *testing.T) {
			s.Spec.Replicas = 8
			mustDo(t, h, admin, http.MethodPut, item+"/scale", s, http.StatusConflict)
		})
	})

	t.Run("a negative scale is invalid", func(t *testing.T) {
		st := mustDo(t, h, admin, http.MethodPatch, item+"/scale",
			map[string]any{"spec": map[string]any{"replicas": -1}}, http.StatusUnprocessableEntity).status(t)
		if st.Details == nil || st.Details.Kind != "Scale" || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "spec.replicas" {
			t.Errorf("details: got %+v, want one cause at spec.replicas of a Scale", st.Details)
		}
	})

	t.Run("a JSON patch of the scale is applied", func(t *testing.T) {
		resp := doRaw(t, h, http.MethodPatch, item+"/scale", "application/json-patch+json", "", `[{"op":"replace","path":"/spec/replicas","value":3}]`)
		if resp.code != http.StatusOK {
			t.Fatalf("got %d %s, want 200", resp.code, resp.body)
		}
		if s := decode[autoscalingv1.Scale](t, resp); s.Spec.Replicas != 3 {
			t.Errorf("spec.replicas: got %d, want 3", s.Spec.Replicas)
		}
	})

	t.Run("the scale of a missing deployment is not found", func(t *testing.T) {
		st := mustDo(t, h, admin, http.MethodGet, deploymentsPath+"/nope/scale", nil, http.StatusNotFound).status(t)
		if !strings.Contains(st.Message, `deployments.apps "nope" not found`) {
			t.Errorf("message: got %q", st.Message)
		}
	})

	t.Run("field selectors on metadata.name and metadata.namespace", func(t *testing.T) {
		mustDo(t, h, admin, http.MethodPost, deploymentsPath, testDeployment("api"), http.StatusCreated)
		for _, tc := range []struct {
			query string
			want  []string
		}{
			{"?fieldSelector=metadata.name%3Dweb", []string{"web"}},
			{"?fieldSelector=metadata.namespace%3Ddefault", []string{"api", "web"}},
			{"?fieldSelector=metadata.namespace%3Dother", nil},
		} {
			list := decode[appsv1.DeploymentList](t, mustDo(t, h, admin, http.MethodGet, "/apis/apps/v1/deployments"+tc.query, nil, http.StatusOK))
			var names []string
			for _, it := range list.Items {
				names = append(names, it.Name)
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("%s: got %v, want %v", tc.query, names, tc.want)
			}
		}
	})

	t.Run("kubectl get shows the deployment columns", func(t *testing.T) {
		resp := doRaw(t, h, http.MethodGet, item, "", "application/json;as=Table;v=v1;g=meta.k8s.io", "")
		table := decode[metav1.Table](t, resp)
		var cols []string
		for _, c := range table.ColumnDefinitions {
			if c.Priority == 0 {
				cols = append(cols, c.Name)
			}
		}
		if want := []string{"Name", "Ready", "Up-to-date", "Available", "Age"}; !slices.Equal(cols, want) {
			t.Errorf("columns: got %v, want %v", cols, want)
		}
		if len(table.Rows) != 1 || table.Rows[0].Cells[1] != "2/3" {
			t.Errorf("rows: got %+v, want one row READY 2/3", table.Rows)
		}
	})
}

// TestReplicaSetsAndDaemonSets covers what differs from deployments: the
// replica set's status.replicas field selector and strategic-merge scale,
// and the daemon set's template generation and missing scale.
func TestReplicaSetsAndDaemonSets(t *testing.T) {
	_, h := newTestServer(t, Config{})

	rs := decode[appsv1.ReplicaSet](t, mustDo(t, h, admin, http.MethodPost, replicaSetsPath, testReplicaSet("web-1"), http.StatusCreated))
	t.Run("a replica set is defaulted to one replica at generation 1", func(t *testing.T) {
		if rs.Generation != 1 || rs.Spec.Replicas == nil || *rs.Spec.Replicas != 1 {
			t.Errorf("got generation %d replicas %v, want 1 and 1", rs.Generation, rs.Spec.Replicas)
		}
	})

	t.Run("a strategic merge patch of a replica set's scale changes spec.replicas", func(t *testing.T) {
		resp := doRaw(t, h, http.MethodPatch, replicaSetsPath+"/web-1/scale", "application/strategic-merge-patch+json", "", `{"spec":{"replicas":4}}`)
		if resp.code != http.StatusOK {
			t.Fatalf("got %d %s, want 200", resp.code, resp.body)
		}
		s := decode[autoscalingv1.Scale](t, resp)
		if s.Spec.Replicas != 4 || s.Status.Selector != "app=web-1" {
			t.Errorf("got replicas %d selector %q, want 4 and app=web-1", s.Spec.Replicas, s.Status.Selector)
		}
		got := decode[appsv1.ReplicaSet](t, mustDo(t, h, admin, http.MethodGet, replicaSetsPath+"/web-1", nil, http.StatusOK))
		if got.Generation != 2 {
			t.Errorf("generation: got %d, want 2", got.Generation)
		}
	})

	t.Run("a replica set's status.replicas is a field selector", func(t *testing.T) {
		mustDo(t, h, admin, http.MethodPatch, replicaSetsPath+"/web-1/status",
			map[string]any{"status": map[string]any{"replicas": 4}}, http.StatusOK)
		mustDo(t, h, admin, http.MethodPost, replicaSetsPath, testReplicaSet("web-2"), http.StatusCreated)
		list := decode[appsv1.ReplicaSetList](t, mustDo(t, h, admin, http.MethodGet, replicaSetsPath+"?fieldSelector=status.replicas%3D4", nil, http.StatusOK))
		if len(list.Items) != 1 || list.Items[0].Name != "web-1" {
			t.Errorf("got %d items, want only web-1", len(list.Items))
		}
	})

	ds := decode[appsv1.DaemonSet](t, mustDo(t, h, admin, http.MethodPost, daemonSetsPath, testDaemonSet("agent"), http.StatusCreated))
	t.Run("a new daemon set is defaulted with template generation 1", func(t *testing.T) {
		if ds.Generation != 1 || ds.Annotations[registry.DaemonSetTemplateGenerationAnnotation] != "1" {
			t.Errorf("got generation %d annotations %v, want 1 and template generation 1", ds.Generation, ds.Annotations)
		}
		if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ds.Spec.RevisionHistoryLimit == nil || *ds.Spec.RevisionHistoryLimit != 10 {
			t.Errorf("got strategy %+v history %v, want RollingUpdate and 10", ds.Spec.UpdateStrategy, ds.Spec.RevisionHistoryLimit)
		}
	})

	t.Run("another spec change bumps only the generation, a template change also the template generation", func(t *testing.T) {
		got := decode[appsv1.DaemonSet](t, mustDo(t, h, admin, http.MethodPatch, daemonSetsPath+"/agent",
			map[string]any{"spec": map[string]any{"minReadySeconds": 5}}, http.StatusOK))
		if got.Generation != 2 || got.Annotations[registry.DaemonSetTemplateGenerationAnnotation] != "1" {
			t.Errorf("got generation %d template generation %q, want 2 and 1", got.Generation, got.Annotations[registry.DaemonSetTemplateGenerationAnnotation])
		}
		got = decode[appsv1.DaemonSet](t, mustDo(t, h, admin, http.MethodPatch, daemonSetsPath+"/agent",
			map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": map[string]string{"v": "2"}}}}}, http.StatusOK))
		if got.Generation != 3 || got.Annotations[registry.DaemonSetTemplateGenerationAnnotation] != "2" {
			t.Errorf("got generation %d template generation %q, want 3 and 2", got.Generation, got.Annotations[registry.DaemonSetTemplateGenerationAnnotation])
		}
	})

	t.Run("a changed selector is refused", func(t *testing.T) {
		mustDo(t, h, admin, http.MethodPatch, daemonSetsPath+"/agent",
			map[string]any{"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]string{"app": "agent", "x": "y"}}}}, http.StatusUnprocessableEntity)
	})

	t.Run("a daemon set has no scale", func(t *testing.T) {
		mustDo(t, h, admin, http.MethodGet, daemonSetsPath+"/agent/scale", nil, http.StatusNotFound)
	})
}

// TestAppsDiscovery: kubectl finds the apps resources, their short names
// and the scale subresource's autoscaling/v1 kind (the scale client
// resolves the kind from discovery).
func TestAppsDiscovery(t *testing.T) {
	_, h := newTestServer(t, Config{})
	list := decode[metav1.APIResourceList](t, mustDo(t, h, admin, http.MethodGet, "/apis/apps/v1", nil, http.StatusOK))
	byName := map[string]metav1.APIResource{}
	for _, r := range list.APIResources {
		byName[r.Name] = r
	}
	for _, tc := range []struct{ name, kind, short string }{
		{"deployments", "Deployment", "deploy"}, {"replicasets", "ReplicaSet", "rs"}, {"daemonsets", "DaemonSet", "ds"},
	} {
		r, ok := byName[tc.name]
		if !ok || r.Kind != tc.kind || !r.Namespaced || !slices.Equal(r.ShortNames, []string{tc.short}) || !slices.Contains(r.Categories, "all") {
			t.Errorf("%s: got %+v, want kind %s, namespaced, short name %s, category all", tc.name, r, tc.kind, tc.short)
		}
		if _, ok := byName[tc.name+"/status"]; !ok {
			t.Errorf("%s/status missing", tc.name)
		}
	}
	for _, name := range []string{"deployments/scale", "replicasets/scale"} {
		r := byName[name]
		if r.Group != "autoscaling" || r.Version != "v1" || r.Kind != "Scale" || !slices.Equal(r.Verbs, []string{"get", "patch", "update"}) {
			t.Errorf("%s: got %+v, want autoscaling/v1 Scale with get, patch, update", name, r)
		}
	}
	if _, ok := byName["daemonsets/scale"]; ok {
		t.Error("daemonsets/scale is served, want none")
	}
	groups := decode[metav1.APIGroupList](t, mustDo(t, h, admin, http.MethodGet, "/apis", nil, http.StatusOK))
	found := false
	for _, g := range groups.Groups {
		found = found || g.Name == "apps" && g.PreferredVersion.Version == "v1"
	}
	if !found {
		t.Errorf("/apis: group apps/v1 missing from %+v", groups.Groups)
	}
}

// TestAppsOpenAPI builds the OpenAPI documents from the registry the way
// the server does and checks the apps/v1 document holds the workloads and
// the scale path (kubectl explain, apply and create need them).
func TestAppsOpenAPI(t *testing.T) {
	var resources []openapi.Resource
	for _, r := range registry.All() {
		res := openapi.Resource{GVK: r.GVK(), ListGVK: r.ListGVK(), Resource: r.Resource, Namespaced: r.Namespaced,
			Object: r.New(), List: r.NewList(), Verbs: r.Verbs()}
		for _, s := range r.Subresources {
			sub := openapi.Subresource{Name: s.Name, GVK: s.GVK, Verbs: s.Verbs}
			if s.GVK.Empty() {
				sub.Object = r.New()
			} else if obj, err := scheme.Scheme.New(s.GVK); err == nil {
				sub.Object = obj
			}
			res.Subresources = append(res.Subresources, sub)
		}
		resources = append(resources, res)
	}
	docs, err := openapi.New(resources, openapi.Info{Version: "v1.33.0"})
	if err != nil {
		t.Fatalf("openapi: %v", err)
	}
	rec := httptest.NewRecorder()
	docs.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi/v3/apis/apps/v1", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /openapi/v3/apis/apps/v1: got %d", rec.Code)
	}
	var doc struct {
		Paths      map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale",
		"/apis/apps/v1/namespaces/{namespace}/replicasets/{name}/scale",
		"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}/status",
	} {
		if _, ok := doc.Paths[p]; !ok {
			t.Errorf("path %s missing", p)
		}
	}
	for _, s := range []string{"io.k8s.api.apps.v1.Deployment", "io.k8s.api.apps.v1.DaemonSet", "io.k8s.api.autoscaling.v1.Scale"} {
		if _, ok := doc.Components.Schemas[s]; !ok {
			t.Errorf("schema %s missing", s)
		}
	}
}
