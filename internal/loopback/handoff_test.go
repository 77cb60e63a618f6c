package loopback

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// handingHandler hands each object of objs over, writing their names one
// after the other, and reports its Handoff on seen.
func handingHandler(objs []runtime.Object, seen chan<- *Handoff) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := HandoffFrom(r.Context())
		seen <- h
		if h == nil {
			return
		}
		w.Header().Set("Content-Type", MediaType)
		for _, obj := range objs {
			if err := h.Encoder().Encode(obj, w); err != nil {
				return
			}
		}
	})
}

func serializers(t *testing.T, tr *Transport) runtime.NegotiatedSerializer {
	t.Helper()
	ns, err := tr.Serializers(scheme.Codecs.WithoutConversion())
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// handoffDecoderOf is the client's decoder for MediaType, as client-go's
// negotiator picks it.
func handoffDecoderOf(t *testing.T, ns runtime.NegotiatedSerializer) runtime.Decoder {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), MediaType)
	if !ok || info.StreamSerializer == nil {
		t.Fatalf("the client's serializers offer no %s stream: %+v", MediaType, ns.SupportedMediaTypes())
	}
	return ns.DecoderToVersion(info.Serializer, corev1.SchemeGroupVersion)
}

func TestTheClientTakesBackTheVeryObjectsTheHandlerHandedOver(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}}}
	node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	list := &corev1.NodeList{Items: []corev1.Node{*node}}
	seen := make(chan *Handoff, 1)
	tr := newTransport(t, handingHandler([]runtime.Object{node, list}, seen), 0)
	resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, "http://server/api/v1/nodes", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if h := within(t, seen, "the handler"); h == nil {
		t.Fatal("an in-process request has no Handoff")
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 2*idSize {
		t.Fatalf("the response is %d bytes, want two names of %d", len(data), idSize)
	}
	dec := handoffDecoderOf(t, serializers(t, tr))

	got, gvk, err := dec.Decode(data[:idSize], nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != node {
		t.Errorf("decoded %p, want the handed object %p", got, node)
	}
	if gvk.Kind != "Node" || node.Kind != "Node" {
		t.Errorf("kind %v, object's kind %q: the decoder must leave the handed object as it was", gvk, node.Kind)
	}

	// A decoder asked to decode the second into an object of its own
	// refuses (the handed object is the server's); it is taken all the same.
	if _, _, err := dec.Decode(data[idSize:], nil, &corev1.NodeList{}); err == nil {
		t.Error("a handed object was decoded into another object")
	}
	if n := tr.handoffs.pending(); n != 0 {
		t.Errorf("%d objects still kept after the client took both", n)
	}
	if _, _, err := dec.Decode(data[:idSize], nil, nil); err == nil {
		t.Error("an object was taken twice")
	}
}

func TestObjectsTheClientDidNotTakeAreDroppedWhenItClosesTheResponse(t *testing.T) {
	objs := []runtime.Object{&corev1.Node{}, &corev1.Node{}, &corev1.Node{}}
	seen := make(chan *Handoff, 1)
	tr := newTransport(t, handingHandler(objs, seen), 0)
	resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, "http://server/api/v1/nodes", nil))
	if err != nil {
		t.Fatal(err)
	}
	h := within(t, seen, "the handler")
	if _, err := io.ReadFull(resp.Body, make([]byte, idSize)); err != nil {
		t.Fatal(err)
	}
	if n := tr.handoffs.pending(); n != len(objs) {
		t.Fatalf("%d objects kept before the client took any, want %d", n, len(objs))
	}
	resp.Body.Close()
	if n := tr.handoffs.pending(); n != 0 {
		t.Errorf("%d objects still kept after the client closed the response", n)
	}
	// A handler that goes on handing objects to a closed response keeps
	// nothing either.
	h.Append(nil, &corev1.Node{})
	if n := tr.handoffs.pending(); n != 0 {
		t.Errorf("%d objects kept for a closed response", n)
	}
}

func TestARequestFromTheNetworkHasNoHandoff(t *testing.T) {
	seen := make(chan *Handoff, 1)
	srv := httptest.NewServer(handingHandler([]runtime.Object{&corev1.Node{}}, seen))
	defer srv.Close()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", MediaType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h := within(t, seen, "the handler"); h != nil {
		t.Fatal("a request from the network has a Handoff")
	}
}

func TestTheDecoderRefusesNamesItDidNotHandOut(t *testing.T) {
	tr := newTransport(t, http.NotFoundHandler(), 0)
	dec := handoffDecoderOf(t, serializers(t, tr))
	for _, data := range [][]byte{nil, []byte("short"), make([]byte, idSize), []byte("123456789")} {
		if obj, _, err := dec.Decode(data, nil, nil); err == nil {
			t.Errorf("decoding %q gave %v and no error", data, obj)
		}
	}
}
