package h2server

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// block sends fields (name, value, ...) as stream id's header block,
// exactly as given, split after each of the byte offsets in splits into a
// HEADERS frame and CONTINUATION frames.
func (c *rawClient) block(id uint32, end bool, splits []int, fields ...string) {
	c.t.Helper()
	c.hbuf.Reset()
	for i := 0; i < len(fields); i += 2 {
		_ = c.henc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	c.rawBlock(id, end, splits, c.hbuf.Bytes())
}

// rawBlock sends b as stream id's header block, split as block does.
func (c *rawClient) rawBlock(id uint32, end bool, splits []int, b []byte) {
	c.t.Helper()
	var frags [][]byte
	from := 0
	for _, at := range splits {
		frags = append(frags, b[from:at])
		from = at
	}
	frags = append(frags, b[from:])
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: frags[0], EndStream: end, EndHeaders: len(frags) == 1}); err != nil {
		c.t.Fatal(err)
	}
	for i, f := range frags[1:] {
		if err := c.fr.WriteContinuation(id, i == len(frags)-2, f); err != nil {
			c.t.Fatal(err)
		}
	}
}

// continued sends first in a HEADERS frame and then more in a CONTINUATION
// frame, as stream 1's request.
func (c *rawClient) continued(first []string, more ...string) {
	c.t.Helper()
	c.hbuf.Reset()
	for i := 0; i < len(first); i += 2 {
		_ = c.henc.WriteField(hpack.HeaderField{Name: first[i], Value: first[i+1]})
	}
	n := c.hbuf.Len()
	for i := 0; i < len(more); i += 2 {
		_ = c.henc.WriteField(hpack.HeaderField{Name: more[i], Value: more[i+1]})
	}
	c.rawBlock(1, true, []int{n}, c.hbuf.Bytes())
}

// response reads until stream id's response HEADERS or RST_STREAM.
func (c *rawClient) response(id uint32) (status, echo string, reset http2.ErrCode) {
	c.t.Helper()
	f := c.readUntil("the answer of the stream", func(f http2.Frame) bool {
		return f.Header().StreamID == id && (f.Header().Type == http2.FrameHeaders || f.Header().Type == http2.FrameRSTStream)
	})
	if rst, ok := f.(*http2.RSTStreamFrame); ok {
		return "", "", rst.ErrCode
	}
	mh := f.(*http2.MetaHeadersFrame)
	for _, hf := range mh.RegularFields() {
		if hf.Name == "x-echo" {
			echo = hf.Value
		}
	}
	return mh.PseudoValue("status"), echo, 0
}

// echoHeaders answers with what a request's header block became.
var echoHeaders = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Echo", strings.Join([]string{
		r.Method, r.Host, r.URL.Path, r.URL.RawQuery, r.RequestURI,
		strings.Join(r.Header.Values("X-Same"), "+"), strings.Join(r.Header.Values("X-Multi"), "+"),
		r.Header.Get("User-Agent"),
	}, " "))
})

var request = []string{":method", "GET", ":scheme", "https", ":authority", "api.example", ":path", "/p?q=1"}

// with is head followed by more, in a new slice.
func with(head []string, more ...string) []string {
	return append(append([]string{}, head...), more...)
}

func TestHeaderBlocksBecomeRequests(t *testing.T) {
	tests := []struct {
		name   string
		splits []int
		fields []string
		want   string
	}{
		{
			name:   "pseudo-headers give the method, host, path and query; repeated fields keep every value in order",
			fields: with(request, "x-multi", "a", "user-agent", "kubectl", "x-multi", "b", "x-same", "s"),
			want:   "GET api.example /p q=1 /p?q=1 s a+b kubectl",
		},
		{
			name:   "a block split over CONTINUATION frames, even inside a field, is one request",
			splits: []int{3, 10, 11, 30},
			fields: with(request, "x-multi", "a", "x-same", "s", "user-agent", strings.Repeat("u", 40)),
			want:   "GET api.example /p q=1 /p?q=1 s a " + strings.Repeat("u", 40),
		},
		{
			name:   "without :authority the Host field names the host",
			fields: []string{":method", "GET", ":scheme", "https", ":path", "/", "host", "h.example"},
			want:   "GET h.example /  /",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url, _, _ := startServer(t, Config{}, echoHeaders)
			c := dialRaw(t, url)
			c.block(1, true, tc.splits, tc.fields...)
			status, echo, reset := c.response(1)
			if status != "200" || strings.TrimSpace(echo) != strings.TrimSpace(tc.want) {
				t.Fatalf("status %q (reset %v), echo %q; want 200 and %q", status, reset, echo, tc.want)
			}
		})
	}
}

func TestMalformedHeaderBlocks(t *testing.T) {
	// Each block below carries x-same, which the client's encoder indexes
	// into the HPACK table; the request after it refers to that entry, so
	// it is answered right only if the server kept decoding the bad block.
	same := []string{"x-same", "kept"}
	streamErrors := []struct {
		name   string
		fields []string
	}{
		{"an upper-case field name resets the stream", with(request, "x-same", "kept", "X-Upper", "v")},
		{"a pseudo-header after a regular field resets the stream", with(same, ":method", "GET", ":scheme", "https", ":path", "/")},
		{"a repeated pseudo-header resets the stream", with(request, ":path", "/again", "x-same", "kept")},
		{"a response's pseudo-header in a request resets the stream", with(request, ":status", "200", "x-same", "kept")},
		{"an unknown pseudo-header resets the stream", with(request, ":custom", "1", "x-same", "kept")},
		{"a field value with a line break resets the stream", with(request, "x-same", "kept", "x-a", "1\r\nx-b: 2")},
		{"an empty field name resets the stream", with(request, "x-same", "kept", "", "v")},
		{"extended CONNECT, which the server does not offer, resets the stream", with([]string{":method", "CONNECT", ":protocol", "websocket", ":scheme", "https", ":path", "/"}, same...)},
		{"CONNECT resets the stream", with([]string{":method", "CONNECT", ":authority", "a:443"}, same...)},
		{"a request without :path resets the stream", with([]string{":method", "GET", ":scheme", "https"}, same...)},
	}
	for _, tc := range streamErrors {
		t.Run(tc.name, func(t *testing.T) {
			url, _, _ := startServer(t, Config{}, echoHeaders)
			c := dialRaw(t, url)
			c.block(1, true, nil, tc.fields...)
			if _, echo, reset := c.response(1); reset != http2.ErrCodeProtocol {
				t.Fatalf("stream 1 answered (echo %q, reset %v), want RST_STREAM PROTOCOL_ERROR", echo, reset)
			}
			c.block(3, true, nil, with(request, same...)...)
			if status, echo, _ := c.response(3); status != "200" || !strings.Contains(echo, " kept ") {
				t.Fatalf("the next request: status %q, echo %q; want 200 with x-same kept", status, echo)
			}
		})
	}

	t.Run("after a header list past the limit, the next request still decodes", func(t *testing.T) {
		url, _, _ := startServer(t, Config{MaxHeaderListSize: 4 << 10}, echoHeaders)
		c := dialRaw(t, url)
		// x-same comes after the limit: decoded only for the table.
		c.block(1, true, nil, with(request, "x-big", strings.Repeat("a", 3000), "x-big-2", strings.Repeat("b", 3000), "x-same", "kept")...)
		if status, _, reset := c.response(1); status != "431" {
			t.Fatalf("status %q (reset %v), want 431", status, reset)
		}
		c.block(3, true, nil, with(request, same...)...)
		if status, echo, _ := c.response(3); status != "200" || !strings.Contains(echo, " kept ") {
			t.Fatalf("the next request: status %q, echo %q; want 200 with x-same kept", status, echo)
		}
	})

	connErrors := []struct {
		name string
		send func(c *rawClient)
		want http2.ErrCode
	}{
		{"a CONTINUATION after a malformed field ends the connection with PROTOCOL_ERROR", func(c *rawClient) {
			c.continued(with(request, "X-Upper", "v"), "x-more", "1")
		}, http2.ErrCodeProtocol},
		{"a CONTINUATION after the list went past the limit ends the connection with PROTOCOL_ERROR", func(c *rawClient) {
			c.continued(with(request, "x-big", strings.Repeat("a", 3000), "x-big-2", strings.Repeat("b", 3000)), "x-more", "1")
		}, http2.ErrCodeProtocol},
		{"an index past the table ends the connection with COMPRESSION_ERROR", func(c *rawClient) {
			c.rawBlock(1, true, nil, []byte{0xff, 0xff, 0xff, 0x7f})
		}, http2.ErrCodeCompression},
		{"a block that ends inside a field ends the connection with COMPRESSION_ERROR", func(c *rawClient) {
			c.hbuf.Reset()
			_ = c.henc.WriteField(hpack.HeaderField{Name: "x-cut", Value: strings.Repeat("v", 100)})
			c.rawBlock(1, true, nil, c.hbuf.Bytes()[:20])
		}, http2.ErrCodeCompression},
	}
	for _, tc := range connErrors {
		t.Run(tc.name, func(t *testing.T) {
			url, _, _ := startServer(t, Config{MaxHeaderListSize: 4 << 10}, echoHeaders)
			c := dialRaw(t, url)
			tc.send(c)
			c.wantGoAway(tc.want)
		})
	}
}

// BenchmarkRenewalRequest is one lease renewal's request and answer over a
// TLS connection as client-go sends it (the header block mostly HPACK
// table references after the first), server and raw client in process:
// allocs/op includes the client's reading of the answer.
func BenchmarkRenewalRequest(b *testing.B) {
	body := make([]byte, 180)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		w.Header().Set("Audit-Id", "3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b")
		_, _ = w.Write(body)
	})
	url, _, _ := startServer(b, Config{}, h)
	c := dialRaw(b, url)
	// The answers' bytes come back in the connection's window.
	if err := c.fr.WriteWindowUpdate(0, 1<<30); err != nil {
		b.Fatal(err)
	}
	fields := []string{
		":method", "PUT", ":scheme", "https", ":authority", "10.0.0.1:6443",
		":path", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-000123?timeout=10s",
		"content-type", "application/vnd.kubernetes.protobuf", "accept", "application/vnd.kubernetes.protobuf, */*",
		"user-agent", "nodeplane/v0.1.0 (linux/amd64) kubernetes/abcdef0", "content-length", "180", "accept-encoding", "gzip",
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := uint32(2*i + 1)
		c.block(id, false, nil, fields...)
		if err := c.fr.WriteData(id, true, body); err != nil {
			b.Fatal(err)
		}
		for {
			f, err := c.fr.ReadFrame()
			if err != nil {
				b.Fatal(err)
			}
			if f.Header().StreamID == id && f.Header().Flags.Has(http2.FlagDataEndStream) {
				break
			}
		}
	}
}

func TestARequestHeadKeepsNothingOnceHandedOn(t *testing.T) {
	var wire bytes.Buffer
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for i := 0; i < len(request); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: request[i], Value: request[i+1]})
	}
	for i := range 10 { // more values than one chunk holds
		_ = enc.WriteField(hpack.HeaderField{Name: fmt.Sprintf("x-f%d", i), Value: "v"})
	}
	_ = enc.WriteField(hpack.HeaderField{Name: "x-f3", Value: "again"})
	if err := http2.NewFramer(&wire, nil).WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	f, err := http2.NewFramer(nil, &wire).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	var h requestHead
	d := newHeadDecoder(&h, 1<<20)
	h.start(f.(*http2.HeadersFrame), 1<<20)
	if err := h.fragment(d, f.(*http2.HeadersFrame).HeaderBlockFragment()); err != nil {
		t.Fatal(err)
	}
	if err := h.finish(d); err != nil {
		t.Fatal(err)
	}
	req, err := h.request(&conn{remote: "192.0.2.1:5000"})
	if err != nil {
		t.Fatal(err)
	}
	h.release()
	if h.header != nil || h.values != nil || h.path != "" {
		t.Fatalf("the head still holds the request's fields: %+v", h)
	}
	if got := strings.Join(req.Header.Values("X-F3"), ","); got != "v,again" || len(req.Header) != 10 || req.Header.Get("X-F9") != "v" {
		t.Fatalf("header %v", req.Header)
	}
	if req.Method != "GET" || req.Host != "api.example" || req.URL.RawQuery != "q=1" || req.ContentLength != 0 {
		t.Fatalf("request %s %s %s %d", req.Method, req.Host, req.URL, req.ContentLength)
	}
}
