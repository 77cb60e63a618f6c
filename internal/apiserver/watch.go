package apiserver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/apiserver/store"
)

// initialEventsEndAnnotation marks the bookmark that ends a watch-list's initial events.
const initialEventsEndAnnotation = "k8s.io/initial-events-end"

func (h *resourceHandler) watch(w http.ResponseWriter, r *http.Request, info requestInfo) {
	gr := h.r.GroupResource()
	p, err := h.parseListParams(r, info)
	if err != nil {
		writeError(w, r, err, gr, "")
		return
	}
	if info.Name != "" {
		// GET .../watch/<resource>/<name> (legacy path) watches one object.
		sel, serr := fieldsAnd(p, "metadata.name", info.Name)
		if serr != nil {
			writeError(w, r, serr, gr, "")
			return
		}
		p.pred.Field = sel
	}
	opts := store.WatchOptions{Bookmarks: p.opts.AllowWatchBookmarks, BookmarkEvery: h.s.cfg.BookmarkInterval}
	// parseListParams has refused a resourceVersionMatch other than
	// NotOlderThan, and any match without sendInitialEvents.
	switch {
	case p.opts.SendInitialEvents != nil:
		if !p.opts.AllowWatchBookmarks && *p.opts.SendInitialEvents {
			writeError(w, r, invalidWatch("allowWatchBookmarks", "sendInitialEvents requires allowWatchBookmarks=true"), gr, "")
			return
		}
		if *p.opts.SendInitialEvents {
			opts.InitialState = true
			opts.MinRV = p.rv
			if p.opts.ResourceVersion == "" {
				// A consistent start: at least the store's current revision.
				if opts.MinRV, err = h.st.CurrentRevision(r.Context()); err != nil {
					writeError(w, r, err, gr, "")
					return
				}
			}
		} else {
			opts.FromRV = p.rv
			if p.rv == 0 {
				opts.FromRV = h.st.CacheRV()
			}
		}
	case p.rv == 0:
		opts.InitialState = true
	default:
		opts.FromRV = p.rv
	}

	f, ok := handoffFormat(r)
	if !ok {
		f, ok = negotiate(r, true)
	}
	if !ok {
		writeStatus(w, r, notAcceptable("only application/json and application/vnd.kubernetes.protobuf are supported for watch"))
		return
	}
	if f.handoff == nil && f.info.MediaType != mediaProtobuf {
		// A watch is a stream of JSON lines or of length-prefixed protobuf
		// frames (what client-go asks for with a protobuf content type);
		// YAML has no stream form, so a YAML client gets JSON lines.
		f.info = serializerFor(mediaJSON)
	}
	if err := f.readTableOptions(r); err != nil {
		writeError(w, r, err, gr, "")
		return
	}
	timeout := h.s.cfg.MinWatchTimeout + time.Duration(rand.Int64N(int64(h.s.cfg.MinWatchTimeout)))
	if p.opts.TimeoutSeconds != nil && *p.opts.TimeoutSeconds > 0 {
		timeout = time.Duration(*p.opts.TimeoutSeconds) * time.Second
	}

	initial, snapshotRV, watcher, err := h.st.Watch(r.Context(), p.pred, opts)
	if err != nil {
		if errors.Is(err, store.ErrExpired) {
			// Like kube-apiserver: 200 and an in-stream ERROR event with 410.
			ww := newWatchWriter(w, h, f)
			ww.writeStatusEvent(toStatus(err, gr, ""))
			return
		}
		writeError(w, r, err, gr, "")
		return
	}
	if !h.s.beginWatch() {
		watcher.Stop()
		writeStatus(w, r, statusOf(apierrors.NewServiceUnavailable("the server is shutting down")))
		return
	}
	if h.s.cfg.Metrics != nil {
		h.s.cfg.Metrics.watchStarted(h.r)
	}
	ws := &watchStream{
		h:       h,
		ctx:     r.Context(),
		ww:      newWatchWriter(w, h, f),
		watcher: watcher,
		// The flush delay batches writes; like a connection deadline it is
		// wall-clock I/O pacing, not logic: the real clock, not cfg.Clock,
		// so that a server on a fake clock still delivers its events.
		flushes: flushPacer{delay: h.s.cfg.WatchFlushDelay, clock: clock.RealClock{}},
	}
	if !ws.writeInitial(initial, opts.InitialState && p.opts.SendInitialEvents != nil, snapshotRV) {
		ws.end()
		return
	}
	if parkWatch(w, ws, info, timeout) {
		return
	}
	defer ws.end()
	ws.serve(timeout)
}

// flushPacer spaces a watch stream's flushes at least delay apart. Written
// events wait in the response buffer for the next flush, at most delay.
type flushPacer struct {
	delay   time.Duration
	clock   clock.WithDelayedExecution
	last    time.Time   // the last flush
	timer   clock.Timer // armed while written events wait for a flush
	pending bool
	// onDue, when set, is called when a delayed flush is due, instead of
	// due() firing (a parked watch has no goroutine to wait on a channel).
	onDue func()
}

// now says whether to flush at once; if not, a flush is due by due().
func (p *flushPacer) now() bool {
	if p.delay <= 0 {
		return true
	}
	if p.pending {
		return false
	}
	t := p.clock.Now()
	if wait := p.delay - t.Sub(p.last); wait > 0 {
		p.pending = true
		switch {
		case p.timer == nil && p.onDue != nil:
			p.timer = p.clock.AfterFunc(wait, p.onDue)
		case p.timer == nil:
			p.timer = p.clock.NewTimer(wait)
		default:
			p.timer.Reset(wait)
		}
		return false
	}
	p.last = t
	return true
}

// due fires when a delayed flush is due (never while none is pending).
func (p *flushPacer) due() <-chan time.Time {
	if !p.pending || p.onDue != nil {
		return nil
	}
	return p.timer.C()
}

// fired records the delayed flush.
func (p *flushPacer) fired() {
	p.pending = false
	p.last = p.clock.Now()
	if p.onDue != nil {
		// A fired AfterFunc timer is not reset but replaced: fake clocks
		// cannot fire one twice.
		p.timer = nil
	}
}

func (p *flushPacer) stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
}

// fieldsAnd adds name=value to the predicate's field selector.
func fieldsAnd(p listParams, name, value string) (fields.Selector, error) {
	extra, err := fields.ParseSelector(name + "=" + value)
	if err != nil {
		return nil, err
	}
	if p.pred.Field == nil || p.pred.Field.Empty() {
		return extra, nil
	}
	return fields.AndSelectors(p.pred.Field, extra), nil
}

// watchWriter encodes watch events as JSON lines, or as protobuf frames
// (kube-apiserver's "application/vnd.kubernetes.protobuf;stream=watch": each
// event a 4-byte big-endian length, then a metav1.WatchEvent whose object is
// the object's own protobuf encoding, envelope included).
type watchWriter struct {
	w       http.ResponseWriter
	h       *resourceHandler
	f       responseFormat
	started bool
	first   bool
}

func newWatchWriter(w http.ResponseWriter, h *resourceHandler, f responseFormat) *watchWriter {
	return &watchWriter{w: w, h: h, f: f, first: true}
}

func (ww *watchWriter) start() {
	if ww.started {
		return
	}
	ww.started = true
	if ww.f.handoff != nil || ww.f.info.MediaType == mediaProtobuf {
		ww.w.Header().Set("Content-Type", ww.f.info.MediaType+";stream=watch")
	} else {
		ww.w.Header().Set("Content-Type", mediaJSON)
	}
	ww.w.Header().Set("Transfer-Encoding", "chunked")
	ww.w.WriteHeader(http.StatusOK)
}

func (ww *watchWriter) flush() {
	ww.start()
	if f, ok := ww.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (ww *watchWriter) write(ev store.Event) error {
	if ev.Type == watch.Bookmark {
		return ww.writeBookmark(ev.RV, false)
	}
	obj, err := ww.h.fromStorage(ev.Object)
	if err != nil {
		return err
	}
	if ww.f.handoff != nil {
		// The object as the cache holds it (the client reads it only).
		return ww.writeEvent(ev.Type, obj)
	}
	if ww.f.kind == outputObject && obj.GetObjectKind().GroupVersionKind().Empty() {
		obj = obj.DeepCopyObject()
		obj.GetObjectKind().SetGroupVersionKind(ww.h.r.GVK())
	}
	out, err := ww.h.transform(obj, ww.f, ww.first)
	if err != nil {
		return err
	}
	ww.first = false
	return ww.writeEvent(ev.Type, out)
}

func (ww *watchWriter) writeBookmark(rv int64, initialEnd bool) error {
	obj := ww.h.r.New()
	obj.GetObjectKind().SetGroupVersionKind(ww.h.r.GVK())
	a, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	a.SetResourceVersion(strconv.FormatInt(rv, 10))
	if initialEnd {
		a.SetAnnotations(map[string]string{initialEventsEndAnnotation: "true"})
	}
	var out runtime.Object = obj
	if ww.f.kind == outputMetadata {
		if out, err = toPartialMetadata(obj, ww.f.metaVersion); err != nil {
			return err
		}
	}
	return ww.writeEvent(watch.Bookmark, out)
}

func (ww *watchWriter) writeStatusEvent(st *metav1.Status) {
	st.APIVersion, st.Kind = "v1", "Status"
	_ = ww.writeEvent(watch.Error, st)
	ww.flush()
}

func (ww *watchWriter) writeEvent(t watch.EventType, obj runtime.Object) error {
	ww.start()
	// The encoding buffer is pooled, not kept per watch: most watches are
	// idle most of the time, and a kept buffer would hold the largest
	// event each one ever sent.
	buf := eventBuffers.Get().(*bytes.Buffer)
	defer putEventBuffer(buf)
	buf.Reset()
	if ww.f.handoff != nil {
		return ww.writeProtobufEvent(t, obj, ww.f.handoff, buf)
	}
	if ww.f.info.MediaType == mediaProtobuf {
		return ww.writeProtobufEvent(t, obj, ww.f.info.Serializer, buf)
	}
	buf.WriteString(`{"type":"`)
	buf.WriteString(string(t))
	buf.WriteString(`","object":`)
	if err := ww.f.info.Serializer.Encode(obj, buf); err != nil {
		return err
	}
	// The JSON serializer ends with a newline; keep one event per line.
	b := bytes.TrimRight(buf.Bytes(), "\n")
	b = append(b, "}\n"...)
	_, err := ww.w.Write(b)
	return err
}

// writeProtobufEvent writes one length-prefixed protobuf frame. The object
// is encoded by enc first (into the head of buf), then the event around it
// (into the tail), so one buffer serves both. A handed-over object's
// "encoding" is its name (package loopback).
func (ww *watchWriter) writeProtobufEvent(t watch.EventType, obj runtime.Object, enc runtime.Encoder, buf *bytes.Buffer) error {
	if err := enc.Encode(obj, buf); err != nil {
		return err
	}
	ev := metav1.WatchEvent{Type: string(t), Object: runtime.RawExtension{Raw: buf.Bytes()}}
	size := ev.Size()
	buf.Grow(4 + size)
	ev.Object.Raw = buf.Bytes() // Grow may have moved the bytes
	frame := buf.AvailableBuffer()[:4+size]
	binary.BigEndian.PutUint32(frame, uint32(size))
	if _, err := ev.MarshalToSizedBuffer(frame[4:]); err != nil {
		return err
	}
	_, err := ww.w.Write(frame)
	return err
}

// eventBuffers holds encoding buffers of watch events.
var eventBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledEventBuffer bounds the buffers kept in eventBuffers, so one
// huge event does not stay pinned.
const maxPooledEventBuffer = 64 << 10

func putEventBuffer(b *bytes.Buffer) {
	if b.Cap() <= maxPooledEventBuffer {
		eventBuffers.Put(b)
	}
}
