package h2server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// stream is one request and its response: it is the handler's
// http.ResponseWriter. Fields below mu are guarded by the connection's mu.
type stream struct {
	c      *conn
	id     uint32
	req    *http.Request
	cancel context.CancelFunc

	// The handler's side, touched only by the handler's goroutine (after
	// Park, by whoever writes the parked response, one at a time).
	parked        bool
	finish        sync.Once
	header        http.Header
	status        int
	wroteHeader   bool
	head          bool   // a HEAD request: the body is not sent
	buf           []byte // response bytes not yet framed
	bufp          *[]byte
	declaredLen   int64 // the handler's Content-Length, or -1
	contentLength int64 // the request's Content-Length, or -1

	// Guarded by c.mu.
	sentHeader    bool
	sendWindow    int32
	body          *body // nil when the request has no body
	remoteClosed  bool  // END_STREAM received
	reset         bool
	ended         bool   // the stream is released: nothing more is sent
	onReset       func() // set by Park: called when the stream is reset
	readDeadline  time.Time
	writeDeadline time.Time
}

// body is a request body: what the reader goroutine received and the
// handler has not read yet.
type body struct {
	st       *stream
	data     []byte
	off      int
	eof      bool
	err      error // a sticky read error
	discard  bool  // the handler closed the body: later DATA is dropped
	window   int32 // bytes the client may still send on this stream
	unacked  int32 // bytes read but not yet given back to the window
	received int64
}

// resetLocked ends st as seen by its handler: reads and writes fail and
// its context is canceled. c.mu is held.
func (st *stream) resetLocked() {
	if st.reset {
		return
	}
	st.reset = true
	st.cancel()
	if st.onReset != nil {
		st.onReset()
	}
}

// waitLocked waits on the connection's cond, at most until deadline when it
// is set. c.mu is held.
func (st *stream) waitLocked(deadline time.Time) {
	c := st.c
	if deadline.IsZero() {
		c.cond.Wait()
		return
	}
	d := time.Until(deadline)
	if d <= 0 {
		return
	}
	t := time.AfterFunc(d, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	c.cond.Wait()
	t.Stop()
}

// writableLocked reports why st can no longer be written to, if it cannot.
// A write deadline that has passed resets the stream. c.mu is held.
func (st *stream) writableLocked() error {
	switch {
	case st.reset, st.ended:
		return errStreamReset
	case st.c.closed:
		return errConnClosed
	case !st.writeDeadline.IsZero() && !time.Now().Before(st.writeDeadline):
		st.c.resetLocked(st, http2.ErrCodeCancel)
		return errDeadline
	}
	return nil
}

// onHeaderFragment decodes a piece of the header block under way; at its
// end the block starts a request or ends a request body.
func (c *conn) onHeaderFragment(frag []byte, ended bool) error {
	h := &c.head
	err := h.fragment(c.hdec, frag)
	if err == nil && ended {
		err = h.finish(c.hdec)
	}
	if err != nil {
		var ce http2.ConnectionError
		errors.As(err, &ce)
		return c.fail(http2.ErrCode(ce), err)
	}
	if !ended {
		return nil
	}
	defer h.release()
	if h.invalid != nil {
		c.resetStream(h.streamID, http2.ErrCodeProtocol)
		return nil
	}
	return c.onHeaders(h)
}

// onHeaders starts a request, or ends a request body with trailers.
func (c *conn) onHeaders(f *requestHead) error {
	id := f.streamID
	c.mu.Lock()
	if st := c.streams[id]; st != nil {
		// Trailers: they end the body; their fields are not passed on.
		if !f.endStream {
			c.resetLocked(st, http2.ErrCodeProtocol)
		} else if st.body != nil {
			st.body.eof = true
			st.remoteClosed = true
			c.cond.Broadcast()
		}
		c.flushLocked()
		c.mu.Unlock()
		return nil
	}
	if id%2 == 0 {
		c.mu.Unlock()
		return c.fail(http2.ErrCodeProtocol, fmt.Errorf("HEADERS on stream %d, not a client stream", id))
	}
	if id <= c.maxStreamID {
		// A stream that has ended here (answered early, reset, refused):
		// its late trailers are dropped, as its late DATA is.
		c.mu.Unlock()
		return nil
	}
	c.maxStreamID = id
	if c.goingAway {
		c.mu.Unlock()
		return nil
	}
	if c.running >= int(c.srv.cfg.MaxConcurrentStreams) {
		c.out = appendRST(c.buf(), id, http2.ErrCodeRefusedStream)
		c.flushLocked()
		c.mu.Unlock()
		return nil
	}
	if f.truncated {
		// The header list is over MaxHeaderListSize: 431, as net/http.
		c.hbuf.Reset()
		_ = c.henc.WriteField(hpack.HeaderField{Name: ":status", Value: "431"})
		c.out = appendHeaders(c.buf(), id, c.hbuf.Bytes(), true, c.peerMaxFrame)
		if !f.endStream {
			c.out = appendRST(c.buf(), id, http2.ErrCodeNo)
		}
		c.flushLocked()
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()

	// The request is built here and copied once, with its context, to
	// the heap (WithContext): built on the heap it would be two.
	base, err := f.request(c)
	if err != nil {
		c.resetStream(id, http2.ErrCodeProtocol)
		return nil //nolint:nilerr // a bad request ends its stream, not the connection
	}
	ctx, cancel := c.streamContext(base.Method, base.URL)
	req := base.WithContext(ctx)
	st := &stream{
		c: c, id: id, req: req, cancel: cancel,
		head:          req.Method == http.MethodHead,
		declaredLen:   -1,
		contentLength: req.ContentLength,
	}
	if f.endStream {
		req.Body = http.NoBody
		st.remoteClosed = true
	} else {
		st.body = &body{st: st, window: int32(c.srv.cfg.StreamWindow)}
		req.Body = st.body
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cancel()
		return errConnClosed
	}
	st.sendWindow = c.peerInitWindow
	c.streams[id] = st
	c.running++
	c.mu.Unlock()
	c.srv.cfg.Go(req, st.run)
	return nil
}

// streamContext is the context of a request's stream: it ends with the
// stream, or at the deadline Config.Deadline gives the request.
func (c *conn) streamContext(method string, u *url.URL) (context.Context, context.CancelFunc) {
	if d := c.srv.cfg.Deadline; d != nil {
		if t := d(method, u); t > 0 {
			return context.WithTimeout(c.baseCtx, t)
		}
	}
	return context.WithCancel(c.baseCtx)
}

// run serves the request and ends the stream, unless the handler parked it.
func (st *stream) run() {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler { //nolint:errorlint // compared by identity, as net/http does
				st.c.srv.cfg.Logger.Error("panic serving a request", "remote", st.c.remote,
					"method", st.req.Method, "path", st.req.URL.Path, "panic", v, "stack", string(debug.Stack()))
			}
			st.end(true)
			return
		}
		if !st.parked {
			st.end(false)
			return
		}
		// A parked response goes on without its handler: the request is
		// not needed any more (its context lives on in whoever parked it).
		st.req = nil
	}()
	st.c.handler.ServeHTTP(st, st.req)
}

// Park lets the handler return before its response is complete, so that a
// long, mostly idle response (a watch) holds no goroutine while it waits.
// It must be the handler's last use of the writer. After Park the response
// goes on: its writer is used from any goroutine, one at a time, and finish
// must be called when it is complete (aborted: the stream is reset instead
// of ended cleanly; later calls do nothing). The request's context stays
// live until then, and is canceled, as for a running handler, when the
// client resets the stream or the connection closes — onReset, if not nil,
// is called then too (it must not block: it runs with the connection
// locked), which spares the owner a context.AfterFunc per stream. The
// stream keeps counting against MaxConcurrentStreams until finished.
func (st *stream) Park(onReset func()) (finish func(aborted bool)) {
	st.c.mu.Lock()
	st.parked = true
	st.onReset = onReset
	reset := st.reset
	st.c.mu.Unlock()
	if reset && onReset != nil {
		onReset()
	}
	return st.end
}

// end finishes the response (or, aborted, resets the stream) and releases
// the stream. Only the first call counts: a handler that panics after
// parking ends its stream then, and the parked finish does nothing.
func (st *stream) end(aborted bool) {
	st.finish.Do(func() { st.endOnce(aborted) })
}

func (st *stream) endOnce(aborted bool) {
	if !aborted && !st.wroteHeader {
		st.WriteHeader(http.StatusOK)
	}
	c := st.c
	c.mu.Lock()
	if aborted {
		if !st.reset && !c.closed {
			c.resetLocked(st, http2.ErrCodeInternal)
		}
	} else if st.writableLocked() == nil {
		if err := st.sendLocked(true); err == nil && !st.remoteClosed {
			// Answered before the client finished its body: tell it to
			// stop sending.
			c.out = appendRST(c.buf(), st.id, http2.ErrCodeNo)
		}
	}
	if st.body != nil && !st.body.discard {
		st.body.closeLocked()
	}
	if c.streams[st.id] == st {
		delete(c.streams, st.id)
	}
	st.ended = true
	c.running--
	if c.goingAway && c.running == 0 {
		c.drainCloseLocked()
	} else {
		c.flushLocked()
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	st.cancel()
	st.releaseBuf()
}

// Header implements http.ResponseWriter.
func (st *stream) Header() http.Header {
	if st.header == nil {
		st.header = make(http.Header, 4)
	}
	return st.header
}

// WriteHeader implements http.ResponseWriter. Informational codes are not
// sent.
func (st *stream) WriteHeader(code int) {
	if st.wroteHeader || code < 200 {
		return
	}
	st.wroteHeader = true
	st.status = code
	if v := st.header.Get("Content-Length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			st.declaredLen = n
		}
	}
}

// bodyAllowed reports whether the status admits a body.
func (st *stream) bodyAllowed() bool {
	return st.status != http.StatusNoContent && st.status != http.StatusNotModified
}

// Write implements http.ResponseWriter: it buffers, and frames the buffer
// once it holds 32 KiB.
func (st *stream) Write(p []byte) (int, error) {
	if !st.wroteHeader {
		st.WriteHeader(http.StatusOK)
	}
	if !st.bodyAllowed() {
		return 0, http.ErrBodyNotAllowed
	}
	if st.head {
		return len(p), nil
	}
	if st.buf == nil {
		st.bufp = bufPool.Get().(*[]byte)
		st.buf = (*st.bufp)[:0]
	}
	st.buf = append(st.buf, p...)
	if len(st.buf) >= 32<<10 {
		c := st.c
		c.mu.Lock()
		err := st.sendLocked(false)
		c.flushLocked()
		c.mu.Unlock()
		if err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// WriteString is Write for a string.
func (st *stream) WriteString(s string) (int, error) {
	return st.Write([]byte(s))
}

// Flush implements http.Flusher.
func (st *stream) Flush() { _ = st.FlushError() }

// FlushError sends what the handler has written (http.ResponseController).
func (st *stream) FlushError() error {
	if !st.wroteHeader {
		st.WriteHeader(http.StatusOK)
	}
	c := st.c
	c.mu.Lock()
	err := st.writableLocked()
	if err == nil {
		err = st.sendLocked(false)
		c.flushLocked()
	}
	c.mu.Unlock()
	// A streaming response (a watch) keeps no buffer between its writes.
	st.releaseBuf()
	return err
}

// SetReadDeadline bounds the reads of the request body
// (http.ResponseController).
func (st *stream) SetReadDeadline(t time.Time) error { return st.setDeadline(&st.readDeadline, t) }

// SetWriteDeadline bounds the writes of the response
// (http.ResponseController); a write past it resets the stream.
func (st *stream) SetWriteDeadline(t time.Time) error { return st.setDeadline(&st.writeDeadline, t) }

// setDeadline sets one of the stream's deadlines and wakes its waiters to
// look at it.
func (st *stream) setDeadline(d *time.Time, t time.Time) error {
	st.c.mu.Lock()
	*d = t
	st.c.cond.Broadcast()
	st.c.mu.Unlock()
	return nil
}

// sendLocked frames the response's headers (once) and the buffered body,
// with END_STREAM when end; it waits for flow-control window and for room
// in the connection's buffer. c.mu is held.
func (st *stream) sendLocked(end bool) error {
	c := st.c
	if !st.sentHeader {
		if err := c.waitRoomLocked(st); err != nil {
			return err
		}
		if end && st.declaredLen < 0 && st.bodyAllowed() && !st.head {
			st.Header().Set("Content-Length", strconv.Itoa(len(st.buf)))
		}
		if len(st.buf) > 0 && st.header.Get("Content-Type") == "" {
			st.Header().Set("Content-Type", http.DetectContentType(st.buf))
		}
		c.appendResponseHeadersLocked(st, end && len(st.buf) == 0)
		st.sentHeader = true
		// Sent headers cannot change: a long response (a parked watch)
		// need not keep their map.
		st.header = nil
		if end && len(st.buf) == 0 {
			return nil
		}
	}
	p := st.buf
	defer func() { st.buf = st.buf[:0] }()
	for len(p) > 0 || end {
		if err := st.writableLocked(); err != nil {
			return err
		}
		n := 0
		if len(p) > 0 {
			n = min(len(p), int(st.sendWindow), int(c.sendWindow), c.peerMaxFrame)
		}
		if len(p) > 0 && n <= 0 {
			if !c.flushing && len(c.out) > 0 {
				c.flushLocked()
				continue
			}
			st.waitLocked(st.writeDeadline)
			continue
		}
		if len(c.out) >= maxPending {
			if err := c.waitRoomLocked(st); err != nil {
				return err
			}
			continue
		}
		last := end && n == len(p)
		c.out = appendData(c.buf(), st.id, p[:n], last)
		st.sendWindow -= int32(n)
		c.sendWindow -= int32(n)
		p = p[n:]
		if last {
			break
		}
	}
	return nil
}

// appendResponseHeadersLocked frames the status and header fields.
func (c *conn) appendResponseHeadersLocked(st *stream, end bool) {
	c.hbuf.Reset()
	_ = c.henc.WriteField(hpack.HeaderField{Name: ":status", Value: statusString(st.status)})
	for k, vv := range st.header {
		name, ok := lowerHeader(k)
		if !ok {
			continue
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				continue
			}
			_ = c.henc.WriteField(hpack.HeaderField{Name: name, Value: v})
		}
	}
	if _, ok := st.header["Date"]; !ok {
		_ = c.henc.WriteField(hpack.HeaderField{Name: "date", Value: httpDate()})
	}
	c.out = appendHeaders(c.buf(), st.id, c.hbuf.Bytes(), end, c.peerMaxFrame)
}

// releaseBuf returns the response buffer to the pool.
func (st *stream) releaseBuf() {
	if st.bufp == nil {
		return
	}
	if cap(st.buf) <= 64<<10 {
		*st.bufp = st.buf[:0]
		bufPool.Put(st.bufp)
	}
	st.buf, st.bufp = nil, nil
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// Read implements io.Reader for the request body.
func (b *body) Read(p []byte) (int, error) {
	st := b.st
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for b.off == len(b.data) {
		switch {
		case b.err != nil:
			return 0, b.err
		case b.eof:
			return 0, io.EOF
		case st.reset:
			return 0, errStreamReset
		case c.closed:
			return 0, errConnClosed
		case !st.readDeadline.IsZero() && !time.Now().Before(st.readDeadline):
			return 0, errDeadline
		}
		st.waitLocked(st.readDeadline)
	}
	n := copy(p, b.data[b.off:])
	b.off += n
	if b.off == len(b.data) {
		b.data, b.off = b.data[:0], 0
	}
	c.giveBackLocked(st, int32(n))
	c.flushLocked()
	return n, nil
}

// Close implements io.Closer: what is buffered and what still comes is
// dropped (its window given back).
func (b *body) Close() error {
	c := b.st.c
	c.mu.Lock()
	b.closeLocked()
	c.flushLocked()
	c.mu.Unlock()
	return nil
}

func (b *body) closeLocked() {
	if b.discard {
		return
	}
	b.discard = true
	if b.err == nil {
		b.err = http.ErrBodyReadAfterClose
	}
	if n := len(b.data) - b.off; n > 0 {
		b.st.c.giveBackLocked(nil, int32(n))
	}
	b.data, b.off = nil, 0
}
