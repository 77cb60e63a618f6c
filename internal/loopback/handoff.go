package loopback

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// MediaType is the response type of an in-process watch whose events'
// objects are handed to the client as they are, not encoded and decoded
// again: the server's own cached objects, which the client must treat as
// read only, as client-go's informer caches already require of everything
// they hold. The server offers it only to watches that came through a
// Transport; over the network it is not acceptable.
//
// Only streams hand objects over: a client decodes each event as soon as it
// has read its name, while client-go closes a whole response's body before
// decoding it — and closing a body drops what it handed over.
const MediaType = "application/vnd.nodeplane.handoff"

// idSize is the size of the bytes that name a handed object in a response.
const idSize = 8

var errNotHanded = errors.New("loopback: no handed object by that name (its response was closed)")

type handoffKey struct{}

// Handoff hands the objects of one in-process response to its client.
type Handoff struct{ w *responseWriter }

// HandoffFrom returns the Handoff of a request made through a Transport,
// or nil for any other request (one from the network).
func HandoffFrom(ctx context.Context) *Handoff {
	h, _ := ctx.Value(handoffKey{}).(*Handoff)
	return h
}

// Append hands obj to the response's client and appends the bytes that
// name it to b. The client's decoder (Transport.Serializers) takes it back
// by those bytes; objects the client never took are dropped when it closes
// the response.
func (h *Handoff) Append(b []byte, obj runtime.Object) []byte {
	return binary.BigEndian.AppendUint64(b, h.w.handoffs.put(obj, h.w))
}

// Encoder returns an encoder that hands each object it is given over
// (writing its name), for the server's response to this request.
func (h *Handoff) Encoder() runtime.Encoder { return handoffEncoder{h} }

type handoffEncoder struct{ h *Handoff }

func (e handoffEncoder) Encode(obj runtime.Object, w io.Writer) error {
	var b [idSize]byte
	_, err := w.Write(e.h.Append(b[:0], obj))
	return err
}

func (handoffEncoder) Identifier() runtime.Identifier { return "nodeplane-handoff" }

// handoffTable holds the objects handed over and not yet taken, by name.
type handoffTable struct {
	mu   sync.Mutex
	next uint64
	objs map[uint64]handed
}

type handed struct {
	obj runtime.Object
	w   *responseWriter
}

// put keeps obj for the client of w's response and returns its name.
func (t *handoffTable) put(obj runtime.Object, w *responseWriter) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	if w.released {
		// The client has closed the response: the write carrying the
		// name fails, so nothing is kept.
		return t.next
	}
	if t.objs == nil {
		t.objs = map[uint64]handed{}
	}
	t.objs[t.next] = handed{obj: obj, w: w}
	w.handed++
	return t.next
}

// take returns the object named id and forgets it.
func (t *handoffTable) take(id uint64) (runtime.Object, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.objs[id]
	if !ok {
		return nil, false
	}
	delete(t.objs, id)
	e.w.handed--
	return e.obj, true
}

// release forgets the objects of w's response that its client did not
// take; nothing more is kept for it.
func (t *handoffTable) release(w *responseWriter) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w.released = true
	if w.handed == 0 {
		return
	}
	for id, e := range t.objs {
		if e.w == w {
			delete(t.objs, id)
		}
	}
	w.handed = 0
}

// pending is how many handed objects no client has taken yet (tests).
func (t *handoffTable) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.objs)
}

// Serializers returns base with MediaType added, for the client of this
// Transport: a watch of that type is framed as protobuf watch events
// (base's protobuf stream serializer and framer) whose objects are the
// names of handed objects, which its decoder takes back.
func (t *Transport) Serializers(base runtime.NegotiatedSerializer) (runtime.NegotiatedSerializer, error) {
	var stream *runtime.StreamSerializerInfo
	for _, info := range base.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeProtobuf {
			stream = info.StreamSerializer
		}
	}
	if stream == nil {
		return nil, errors.New("loopback: the client's serializers have no protobuf stream serializer for watch events")
	}
	dec := handoffDecoder{t: &t.handoffs}
	infos := append([]runtime.SerializerInfo{{
		MediaType: MediaType, MediaTypeType: "application", MediaTypeSubType: "vnd.nodeplane.handoff",
		Serializer: dec, StreamSerializer: stream,
	}}, base.SupportedMediaTypes()...)
	return negotiated{base: base, infos: infos}, nil
}

// negotiated is a client's serializers with MediaType added.
type negotiated struct {
	base  runtime.NegotiatedSerializer
	infos []runtime.SerializerInfo
}

func (n negotiated) SupportedMediaTypes() []runtime.SerializerInfo { return n.infos }

func (n negotiated) EncoderForVersion(e runtime.Encoder, gv runtime.GroupVersioner) runtime.Encoder {
	return n.base.EncoderForVersion(e, gv)
}

// DecoderToVersion leaves the handoff decoder as it is: the base's
// unversioned decoder would clear each object's kind, writing to an object
// the server shares.
func (n negotiated) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	if _, ok := d.(handoffDecoder); ok {
		return d
	}
	return n.base.DecoderToVersion(d, gv)
}

// handoffDecoder takes handed objects back by their names.
type handoffDecoder struct{ t *handoffTable }

func (d handoffDecoder) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if len(data) != idSize {
		return nil, nil, fmt.Errorf("loopback: a handed object's name is %d bytes, not %d", len(data), idSize)
	}
	obj, ok := d.t.take(binary.BigEndian.Uint64(data))
	if !ok {
		return nil, nil, errNotHanded
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	if into != nil && into != obj {
		return nil, nil, fmt.Errorf("loopback: a handed %T cannot be decoded into a %T: it is the server's object", obj, into)
	}
	return obj, &gvk, nil
}

func (handoffDecoder) Encode(runtime.Object, io.Writer) error {
	return errors.New("loopback: request bodies are not handed over")
}

func (handoffDecoder) Identifier() runtime.Identifier { return "nodeplane-handoff" }
