package h2server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// initialPeerWindow and defaultMaxFrame are HTTP/2's defaults until the
// client's SETTINGS say otherwise.
const (
	initialPeerWindow = 65535
	defaultMaxFrame   = 16384
	// maxPending bounds the unwritten bytes of a connection: a handler that
	// would add more waits for the socket (a client that does not read
	// cannot make the server buffer without bound).
	maxPending = 256 << 10
)

var (
	errConnClosed   = errors.New("h2server: connection closed")
	errStreamReset  = errors.New("h2server: stream reset")
	errBodyTooLarge = errors.New("h2server: request body beyond its content-length")
	// errDeadline is the error of a read or write past its deadline; like
	// os.ErrDeadlineExceeded it reports Timeout.
	errDeadline error = deadlineExceeded{}
)

// deadlineExceeded is errDeadline's type.
type deadlineExceeded struct{}

func (deadlineExceeded) Error() string   { return "i/o timeout" }
func (deadlineExceeded) Timeout() bool   { return true }
func (deadlineExceeded) Temporary() bool { return true }

// conn is one HTTP/2 connection. Its goroutine (serve) reads frames; all
// other state is under mu, shared with the handlers of its streams, which
// wait on cond for flow-control window, socket progress or body data.
type conn struct {
	srv     *Server
	nc      *tls.Conn
	handler http.Handler
	baseCtx context.Context
	tls     *tls.ConnectionState
	remote  string
	fr      *http2.Framer
	hdec    *hpack.Decoder
	head    requestHead // the header block being read (the read loop's own)

	lastFrame atomic.Int64 // unix nanos of the last frame read

	mu   sync.Mutex
	cond sync.Cond

	streams     map[uint32]*stream
	running     int    // handlers not yet returned
	maxStreamID uint32 // highest client stream seen
	goingAway   bool   // GOAWAY sent: no new streams, close when running is 0
	closed      bool   // the socket is closed or failed
	closeErr    error

	out      []byte // frames not yet written
	flushing bool   // a goroutine is writing out (it takes what is added meanwhile)

	henc *hpack.Encoder
	hbuf bytes.Buffer

	peerMaxFrame   int
	peerInitWindow int32
	sendWindow     int32 // the connection's send window
	recvWindow     int32 // bytes the client may still send on the connection
	recvUnacked    int32 // consumed bytes not yet given back to the connection's window
}

func newConn(s *Server, tc *tls.Conn, h http.Handler, ctx context.Context) *conn {
	st := tc.ConnectionState()
	c := &conn{
		srv:            s,
		nc:             tc,
		handler:        h,
		baseCtx:        ctx,
		tls:            &st,
		remote:         remoteAddr(tc),
		streams:        map[uint32]*stream{},
		peerMaxFrame:   defaultMaxFrame,
		peerInitWindow: initialPeerWindow,
		sendWindow:     initialPeerWindow,
		recvWindow:     int32(s.cfg.ConnWindow),
	}
	c.cond.L = &c.mu
	c.henc = hpack.NewEncoder(&c.hbuf)
	// No dynamic table for responses: their headers are few and differ
	// per response (audit IDs), so indexing would only churn the table,
	// and the table would be kept per connection.
	c.henc.SetMaxDynamicTableSizeLimit(0)
	c.fr = http2.NewFramer(nil, tc)
	// Header blocks are decoded here (requestHead), not by the framer:
	// its MetaHeadersFrame would collect every field into a new slice.
	c.hdec = newHeadDecoder(&c.head, s.cfg.MaxHeaderListSize)
	c.fr.SetReuseFrames()
	// The framer would otherwise read frames up to 16 MiB; the server
	// announces no larger SETTINGS_MAX_FRAME_SIZE than the default.
	c.fr.SetMaxReadFrameSize(defaultMaxFrame)
	c.lastFrame.Store(s.cfg.Clock.Now().UnixNano())
	return c
}

// serve runs the connection until it ends, then waits for its handlers.
func (c *conn) serve() {
	err := c.readLoop()
	c.mu.Lock()
	if c.closeErr == nil {
		c.closeErr = err
	}
	c.closeLocked()
	for c.running > 0 {
		c.cond.Wait()
	}
	c.mu.Unlock()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, errConnClosed) {
		c.srv.cfg.Logger.Debug("http2 connection ended", "remote", c.remote, "err", err)
	}
}

// drainCloseLocked writes what is pending (waiting for a write another
// goroutine has under way) and then closes. mu is held.
func (c *conn) drainCloseLocked() {
	for c.flushing && !c.closed {
		c.cond.Wait()
	}
	c.flushLocked()
	c.closeLocked()
}

// closeLocked closes the socket and ends every stream. mu is held.
func (c *conn) closeLocked() {
	if c.closed {
		return
	}
	c.closed = true
	// Not under mu: tls.Conn.Close writes a close_notify alert, which
	// can wait up to 5 s on a client that does not read.
	go func() { _ = c.nc.Close() }()
	for id, st := range c.streams {
		st.resetLocked()
		delete(c.streams, id)
	}
	c.cond.Broadcast()
}

// idleSince reports whether the connection has no stream and has read no
// frame since cutoff (unix nanos).
func (c *conn) idleSince(cutoff int64) bool {
	if c.lastFrame.Load() > cutoff {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running == 0 && !c.closed
}

// goAway tells the client to open no new stream here; the connection
// closes once its running handlers have returned.
func (c *conn) goAway() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.goingAway || c.closed {
		return
	}
	c.goingAway = true
	c.out = appendGoAway(c.buf(), c.maxStreamID, http2.ErrCodeNo)
	if c.running == 0 {
		c.drainCloseLocked()
		return
	}
	c.flushLocked()
}

// fail ends the connection for a protocol error: GOAWAY with code, then
// close.
func (c *conn) fail(code http2.ErrCode, err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.goingAway = true
		c.out = appendGoAway(c.buf(), c.maxStreamID, code)
		c.closeErr = err
		c.drainCloseLocked()
	}
	return err
}

// readLoop reads the preface and then frames until the connection ends.
func (c *conn) readLoop() error {
	cfg := &c.srv.cfg
	_ = c.nc.SetReadDeadline(time.Now().Add(cfg.PrefaceTimeout))
	var preface [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(c.nc, preface[:]); err != nil {
		return fmt.Errorf("read preface: %w", err)
	}
	if string(preface[:]) != http2.ClientPreface {
		return c.fail(http2.ErrCodeProtocol, errors.New("bad client preface"))
	}
	c.mu.Lock()
	c.out = appendSettings(c.buf(),
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: cfg.MaxConcurrentStreams},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: cfg.StreamWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: cfg.MaxHeaderListSize},
	)
	if cfg.ConnWindow > initialPeerWindow {
		c.out = appendWindowUpdate(c.buf(), 0, cfg.ConnWindow-initialPeerWindow)
		c.recvWindow = int32(cfg.ConnWindow)
	} else {
		c.recvWindow = initialPeerWindow
	}
	c.flushLocked()
	c.mu.Unlock()

	first := true
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				c.resetStream(se.StreamID, se.Code)
				continue
			}
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				return c.fail(http2.ErrCode(ce), err)
			}
			if errors.Is(err, http2.ErrFrameTooLarge) {
				return c.fail(http2.ErrCodeFrameSize, err)
			}
			return err
		}
		c.lastFrame.Store(cfg.Clock.Now().UnixNano())
		if first {
			sf, ok := f.(*http2.SettingsFrame)
			if !ok || sf.IsAck() {
				return c.fail(http2.ErrCodeProtocol, errors.New("first frame is not SETTINGS"))
			}
			_ = c.nc.SetReadDeadline(time.Time{})
			first = false
		}
		if err := c.handleFrame(f); err != nil {
			return err
		}
	}
}

// handleFrame acts on one frame; an error ends the connection.
func (c *conn) handleFrame(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.HeadersFrame:
		c.head.start(f, c.srv.cfg.MaxHeaderListSize)
		return c.onHeaderFragment(f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.ContinuationFrame:
		// The framer lets through only a CONTINUATION of the block under way.
		return c.onHeaderFragment(f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.RSTStreamFrame:
		c.mu.Lock()
		if st := c.streams[f.StreamID]; st != nil {
			st.resetLocked()
			delete(c.streams, f.StreamID)
			c.cond.Broadcast()
		}
		c.mu.Unlock()
	case *http2.SettingsFrame:
		return c.onSettings(f)
	case *http2.PingFrame:
		if !f.IsAck() {
			c.mu.Lock()
			c.out = appendPingAck(c.buf(), f.Data)
			c.flushLocked()
			c.mu.Unlock()
		}
	case *http2.GoAwayFrame:
		c.goAway()
	case *http2.PushPromiseFrame:
		return c.fail(http2.ErrCodeProtocol, errors.New("PUSH_PROMISE from a client"))
	default:
		// PRIORITY and unknown frame types are ignored.
	}
	return nil
}

func (c *conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			if s.Val > 1<<31-1 {
				return http2.ConnectionError(http2.ErrCodeFlowControl)
			}
			delta := int32(s.Val) - c.peerInitWindow
			c.peerInitWindow = int32(s.Val)
			for _, st := range c.streams {
				st.sendWindow += delta
			}
			c.cond.Broadcast()
		case http2.SettingMaxFrameSize:
			c.peerMaxFrame = int(s.Val)
		}
		return nil
	})
	if err != nil {
		var ce http2.ConnectionError
		if errors.As(err, &ce) {
			c.mu.Unlock()
			e := c.fail(http2.ErrCode(ce), err)
			c.mu.Lock()
			return e
		}
		return err
	}
	c.out = appendSettingsAck(c.buf())
	c.flushLocked()
	return nil
}

func (c *conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	incr := int64(f.Increment)
	if f.StreamID == 0 {
		if int64(c.sendWindow)+incr > 1<<31-1 {
			c.mu.Unlock()
			err := c.fail(http2.ErrCodeFlowControl, errors.New("connection window overflow"))
			c.mu.Lock()
			return err
		}
		c.sendWindow += int32(incr)
	} else if st := c.streams[f.StreamID]; st != nil {
		if int64(st.sendWindow)+incr > 1<<31-1 {
			c.resetLocked(st, http2.ErrCodeFlowControl)
		} else {
			st.sendWindow += int32(incr)
		}
	}
	c.cond.Broadcast()
	return nil
}

// onData delivers a DATA frame to its stream's body.
func (c *conn) onData(f *http2.DataFrame) error {
	n := int32(f.Header().Length) // padding included: it counts against the windows
	c.mu.Lock()
	if n > c.recvWindow {
		c.mu.Unlock()
		return c.fail(http2.ErrCodeFlowControl, errors.New("connection receive window exceeded"))
	}
	c.recvWindow -= n
	st := c.streams[f.StreamID]
	if st == nil || st.body == nil || st.body.eof || st.body.discard {
		// A stream already ended (reset, or answered before its body was
		// read), or a body the handler closed: the bytes go back to the
		// connection's window at once.
		c.giveBackLocked(nil, n)
		if st != nil && f.StreamEnded() {
			st.remoteClosed = true
		}
		if st == nil && f.StreamID > c.maxStreamID {
			c.mu.Unlock()
			return c.fail(http2.ErrCodeProtocol, errors.New("DATA on an idle stream"))
		}
		c.flushLocked()
		c.mu.Unlock()
		return nil
	}
	b := st.body
	if n > b.window {
		c.resetLocked(st, http2.ErrCodeFlowControl)
		c.giveBackLocked(nil, n)
		c.flushLocked()
		c.mu.Unlock()
		return nil
	}
	b.window -= n
	data := f.Data()
	if pad := n - int32(len(data)); pad > 0 {
		c.giveBackLocked(st, pad)
	}
	b.received += int64(len(data))
	if st.contentLength >= 0 && b.received > st.contentLength {
		b.err = errBodyTooLarge
		c.resetLocked(st, http2.ErrCodeProtocol)
		c.flushLocked()
		c.mu.Unlock()
		return nil
	}
	b.data = append(b.data, data...)
	if f.StreamEnded() {
		b.eof = true
		st.remoteClosed = true
	}
	c.cond.Broadcast()
	c.flushLocked()
	c.mu.Unlock()
	return nil
}

// giveBackLocked returns n consumed bytes to the connection's window and,
// with st, to the stream's, sending WINDOW_UPDATE once half a window has
// been consumed. mu is held; the caller flushes.
func (c *conn) giveBackLocked(st *stream, n int32) {
	c.recvUnacked += n
	if c.recvUnacked >= int32(c.srv.cfg.ConnWindow/2) {
		c.out = appendWindowUpdate(c.buf(), 0, uint32(c.recvUnacked))
		c.recvWindow += c.recvUnacked
		c.recvUnacked = 0
	}
	if st == nil || st.body == nil || st.remoteClosed {
		return
	}
	b := st.body
	b.unacked += n
	if b.unacked >= int32(c.srv.cfg.StreamWindow/2) {
		c.out = appendWindowUpdate(c.buf(), st.id, uint32(b.unacked))
		b.window += b.unacked
		b.unacked = 0
	}
}

// resetStream answers a stream error from the framer.
func (c *conn) resetStream(id uint32, code http2.ErrCode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.streams[id]; st != nil {
		c.resetLocked(st, code)
	} else {
		c.out = appendRST(c.buf(), id, code)
	}
	c.flushLocked()
}

// resetLocked sends RST_STREAM for st and ends it. mu is held; the caller
// flushes.
func (c *conn) resetLocked(st *stream, code http2.ErrCode) {
	c.out = appendRST(c.buf(), st.id, code)
	st.resetLocked()
	delete(c.streams, st.id)
	c.cond.Broadcast()
}

// flushLocked writes out to the socket unless another goroutine is doing
// so already (it will take these bytes too). mu is held on entry and on
// return; it is released during the write, which is when other streams'
// frames pile up behind it and go out in the next write together. Once
// nothing is pending the buffer goes back to a pool: a connection whose
// streams are idle watches holds none.
func (c *conn) flushLocked() {
	if c.flushing || len(c.out) == 0 {
		return
	}
	c.flushing = true
	for len(c.out) > 0 && !c.closed {
		buf := c.out
		c.out = nil
		c.mu.Unlock()
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.srv.cfg.WriteTimeout))
		_, err := c.nc.Write(buf)
		c.mu.Lock()
		if c.out == nil {
			c.out = buf[:0]
		} else {
			putOut(buf)
		}
		if err != nil {
			c.closeErr = fmt.Errorf("write: %w", err)
			c.closeLocked()
		}
	}
	putOut(c.out)
	c.out = nil
	c.flushing = false
	c.cond.Broadcast()
}

// buf is the outgoing buffer to append frames to, taken from the pool
// when the connection has none. mu is held.
func (c *conn) buf() []byte {
	if c.out == nil {
		c.out = (*outPool.Get().(*[]byte))[:0]
	}
	return c.out
}

// outPool holds outgoing buffers; one above maxPooledOut is dropped.
var outPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

const maxPooledOut = 64 << 10

func putOut(b []byte) {
	if b == nil || cap(b) > maxPooledOut {
		return
	}
	b = b[:0]
	outPool.Put(&b)
}

// waitRoomLocked waits until the outgoing buffer has room, the connection
// closed, or st ended or passed its write deadline. mu is held.
func (c *conn) waitRoomLocked(st *stream) error {
	for len(c.out) >= maxPending {
		if err := st.writableLocked(); err != nil {
			return err
		}
		if !c.flushing {
			c.flushLocked()
			continue
		}
		st.waitLocked(st.writeDeadline)
	}
	return st.writableLocked()
}
