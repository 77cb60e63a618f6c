package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// rawResponse is one raw HTTP exchange with the server.
type rawResponse struct {
	code   int
	header http.Header
	body   []byte
}

func (r rawResponse) String() string {
	return fmt.Sprintf("HTTP %d: %s", r.code, truncate(string(r.body), 2000))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// httpClient returns an HTTP client with the admin client certificate.
func (s *serverProc) httpClient() *http.Client {
	s.t.Helper()
	hc, err := rest.HTTPClientFor(s.restConfig())
	if err != nil {
		s.t.Fatal(err)
	}
	return hc
}

// do sends one request with hc to the server and reads the whole answer.
// headers are name, value pairs.
func (s *serverProc) do(t *testing.T, hc *http.Client, method, path string, body []byte, headers ...string) rawResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.restConfig().Host+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return rawResponse{code: resp.StatusCode, header: resp.Header, body: data}
}

// wantStatus checks that resp is a metav1.Status with the code and reason
// and returns it.
func wantStatus(t *testing.T, resp rawResponse, code int, reason metav1.StatusReason) metav1.Status {
	t.Helper()
	if resp.code != code {
		t.Fatalf("got %v, want HTTP %d", resp, code)
	}
	var st metav1.Status
	if err := json.Unmarshal(resp.body, &st); err != nil {
		t.Fatalf("body is not a Status: %v\n%s", err, resp.body)
	}
	if st.Kind != "Status" || st.APIVersion != "v1" {
		t.Errorf("got kind %q apiVersion %q, want Status v1", st.Kind, st.APIVersion)
	}
	if st.Status != metav1.StatusFailure {
		t.Errorf("got status %q, want Failure", st.Status)
	}
	if int(st.Code) != code {
		t.Errorf("got Status.code %d, want %d", st.Code, code)
	}
	if st.Reason != reason {
		t.Errorf("got reason %q, want %q (message %q)", st.Reason, reason, st.Message)
	}
	return st
}

// storageRevision returns the current revision of the main etcd member
// (everything but leases, which have their own member), read with a
// consistent (quorum) list. A request that wrote nothing leaves it as is.
func (s *serverProc) storageRevision(t *testing.T, hc *http.Client) int64 {
	t.Helper()
	resp := s.do(t, hc, http.MethodGet, "/api/v1/namespaces?limit=1", nil)
	if resp.code != http.StatusOK {
		t.Fatalf("list namespaces: %v", resp)
	}
	var list metav1.List
	if err := json.Unmarshal(resp.body, &list); err != nil {
		t.Fatal(err)
	}
	rv, err := strconv.ParseInt(list.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("list resourceVersion %q: %v", list.ResourceVersion, err)
	}
	return rv
}

// loggedRequest is one request a client sent.
type loggedRequest struct {
	Method      string
	Path        string
	Query       string
	ContentType string
}

func (r loggedRequest) String() string {
	return fmt.Sprintf("%s %s?%s ct=%s", r.Method, r.Path, r.Query, r.ContentType)
}

// requestLog records the requests of the clients built from a config it wraps.
type requestLog struct {
	mu   sync.Mutex
	reqs []loggedRequest
}

// wrap makes cfg's transport record every request.
func (l *requestLog) wrap(cfg *rest.Config) *rest.Config {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			l.mu.Lock()
			l.reqs = append(l.reqs, loggedRequest{Method: req.Method, Path: req.URL.Path, Query: req.URL.RawQuery, ContentType: req.Header.Get("Content-Type")})
			l.mu.Unlock()
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

func (l *requestLog) all() []loggedRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs)
}

func (l *requestLog) dump() string {
	var b strings.Builder
	for _, r := range l.all() {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// rawEvent is one line of a JSON watch stream.
type rawEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// eventObject is the part of a watch event's object the tests look at.
type eventObject struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	// Status fields, for ERROR events.
	Code   int32               `json:"code"`
	Reason metav1.StatusReason `json:"reason"`
}

func (e rawEvent) object(t *testing.T) eventObject {
	t.Helper()
	var o eventObject
	if err := json.Unmarshal(e.Object, &o); err != nil {
		t.Fatalf("decode %s event object: %v\n%s", e.Type, err, e.Object)
	}
	return o
}

// rawWatch opens a JSON watch stream on path (with the admin credentials)
// and delivers its events until the stream ends or the test ends. It fails
// the test unless the server answers 200.
func (s *serverProc) rawWatch(t *testing.T, path string) <-chan rawEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.restConfig().Host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.httpClient().Do(req)
	if err != nil {
		t.Fatalf("watch %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("watch %s: HTTP %d: %s", path, resp.StatusCode, data)
	}
	ch := make(chan rawEvent, 1000)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for {
			var ev rawEvent
			if err := dec.Decode(&ev); err != nil {
				return
			}
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// nextEvent returns the next event of a raw watch, failing the test after timeout.
func nextEvent(t *testing.T, ch <-chan rawEvent, timeout time.Duration) rawEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch stream ended")
		}
		return ev
	case <-time.After(timeout):
		t.Fatalf("no watch event within %v", timeout)
	}
	return rawEvent{}
}

// eventRecorder collects informer notifications as "ADD name", "UPDATE
// name", "DELETE name".
type eventRecorder struct {
	mu     sync.Mutex
	events []string
}

func (r *eventRecorder) add(kind string, obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	name := "?"
	if o, ok := obj.(metav1.Object); ok {
		name = o.GetName()
	}
	r.mu.Lock()
	r.events = append(r.events, kind+" "+name)
	r.mu.Unlock()
}

func (r *eventRecorder) handler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.add("ADD", obj) },
		UpdateFunc: func(_, obj any) { r.add("UPDATE", obj) },
		DeleteFunc: func(obj any) { r.add("DELETE", obj) },
	}
}

func (r *eventRecorder) has(event string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.events, event)
}

// waitFor polls until the recorder saw event.
func (r *eventRecorder) waitFor(t *testing.T, timeout time.Duration, event string) {
	t.Helper()
	eventually(t, timeout, "informer notification "+event, func() error {
		if r.has(event) {
			return nil
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		return fmt.Errorf("seen %v", r.events)
	})
}

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
