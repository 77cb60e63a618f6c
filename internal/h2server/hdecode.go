package h2server

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// requestHead is the header block of one request (or of a request's
// trailers), decoded fragment by fragment as its HEADERS and CONTINUATION
// frames arrive, each regular field straight into the request's header
// map. The connection reuses it; between blocks it keeps nothing (an idle
// connection is most of a fleet's).
type requestHead struct {
	streamID  uint32
	endStream bool
	// truncated: the decoded list went past MaxHeaderListSize; the rest of
	// the block is still decoded (the HPACK table must stay in step) but
	// not kept.
	truncated bool
	// invalid is the first malformed field: the stream is reset, and a
	// CONTINUATION frame after it ends the connection.
	invalid error
	remain  uint32 // bytes of decoded fields still allowed (RFC 7541 sizes)

	method, path, scheme, authority string
	pseudo                          uint8 // pseudo-header fields seen (bits)
	// header holds the regular fields; it is made at the first one, so a
	// pseudo-header field after it is out of order.
	header http.Header
	// values backs the header's first value of each key, a few at a time.
	values []string
}

// valuesChunk is how many header values one allocation holds: a client-go
// request carries five to eight fields.
const valuesChunk = 8

// Pseudo-header fields a request may carry, as bits of requestHead.pseudo.
const (
	pseudoMethod = 1 << iota
	pseudoPath
	pseudoScheme
	pseudoAuthority
	pseudoProtocol
)

var errPseudoAfterRegular = errors.New("pseudo-header field after a regular one")

// newHeadDecoder is the connection's HPACK decoder; every field it emits
// goes into h.
func newHeadDecoder(h *requestHead, maxList uint32) *hpack.Decoder {
	d := hpack.NewDecoder(4096, h.add)
	d.SetMaxStringLength(int(min(maxList, 1<<30)))
	return d
}

// start begins a new header block.
func (h *requestHead) start(f *http2.HeadersFrame, maxList uint32) {
	*h = requestHead{
		streamID:  f.StreamID,
		endStream: f.StreamEnded(),
		remain:    maxList,
	}
}

// add is the decoder's emit function: it checks one field and keeps it.
func (h *requestHead) add(f hpack.HeaderField) {
	if h.invalid != nil || h.truncated {
		return
	}
	if !httpguts.ValidHeaderFieldValue(f.Value) {
		// The value may be a secret: only the name goes into the error.
		h.invalid = fmt.Errorf("invalid value of header field %q", f.Name)
		return
	}
	size := f.Size()
	if size > h.remain {
		h.truncated = true
		h.remain = 0
		return
	}
	h.remain -= size
	if name, ok := strings.CutPrefix(f.Name, ":"); ok {
		if h.header != nil {
			h.invalid = errPseudoAfterRegular
			return
		}
		var bit uint8
		var dst *string
		switch name {
		case "method":
			bit, dst = pseudoMethod, &h.method
		case "path":
			bit, dst = pseudoPath, &h.path
		case "scheme":
			bit, dst = pseudoScheme, &h.scheme
		case "authority":
			bit, dst = pseudoAuthority, &h.authority
		case "protocol":
			bit = pseudoProtocol // extended CONNECT, refused with CONNECT itself
		default:
			h.invalid = fmt.Errorf("pseudo-header field %q is not a request's", f.Name)
			return
		}
		if h.pseudo&bit != 0 {
			h.invalid = fmt.Errorf("duplicate pseudo-header field %q", f.Name)
			return
		}
		h.pseudo |= bit
		if dst != nil {
			*dst = f.Value
		}
		return
	}
	if !validFieldName(f.Name) {
		h.invalid = fmt.Errorf("invalid header field name %q", f.Name)
		return
	}
	if h.header == nil {
		h.header = make(http.Header, valuesChunk)
	}
	key := canonicalHeader(f.Name)
	if v, ok := h.header[key]; ok {
		h.header[key] = append(v, f.Value)
		return
	}
	if len(h.values) == cap(h.values) {
		h.values = make([]string, 0, valuesChunk)
	}
	h.values = append(h.values, f.Value)
	h.header[key] = h.values[len(h.values)-1 : len(h.values) : len(h.values)]
}

// release drops what the block decoded, once it is handed on or refused.
func (h *requestHead) release() {
	h.header, h.values = nil, nil
	h.method, h.path, h.scheme, h.authority = "", "", "", ""
}

// validFieldName reports whether name is a token in lower case, as HTTP/2
// requires of a field name.
func validFieldName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if !httpguts.IsTokenRune(r) || 'A' <= r && r <= 'Z' {
			return false
		}
	}
	return true
}

// fragment decodes the next piece of the block. A connection error ends
// the connection: a block far beyond the size limit (not worth decoding),
// a CONTINUATION after a malformed field, or HPACK the decoder rejects.
func (h *requestHead) fragment(d *hpack.Decoder, frag []byte) error {
	if uint64(len(frag)) > 2*uint64(h.remain) {
		return fmt.Errorf("header block of stream %d far past the size limit: %w", h.streamID, http2.ConnectionError(http2.ErrCodeProtocol))
	}
	if h.invalid != nil {
		return fmt.Errorf("CONTINUATION after a malformed field (%w): %w", h.invalid, http2.ConnectionError(http2.ErrCodeProtocol))
	}
	// Past the limit the rest is decoded only to keep the table in step.
	d.SetEmitEnabled(!h.truncated)
	if _, err := d.Write(frag); err != nil {
		return fmt.Errorf("%w: %w", err, http2.ConnectionError(http2.ErrCodeCompression))
	}
	return nil
}

// finish ends the block: the decoder must hold no partial field.
func (h *requestHead) finish(d *hpack.Decoder) error {
	if err := d.Close(); err != nil {
		return fmt.Errorf("%w: %w", err, http2.ConnectionError(http2.ErrCodeCompression))
	}
	return nil
}

// request is the http.Request of a complete, valid block.
func (h *requestHead) request(c *conn) (http.Request, error) {
	if h.method == "" || h.path == "" || h.scheme == "" || h.method == http.MethodConnect || h.pseudo&pseudoProtocol != 0 {
		return http.Request{}, errors.New("missing or unsupported pseudo-header")
	}
	u, err := url.ParseRequestURI(h.path)
	if err != nil {
		return http.Request{}, fmt.Errorf("path: %w", err)
	}
	header := h.header
	if header == nil {
		header = http.Header{}
	}
	host := h.authority
	if host == "" {
		host = header.Get("Host")
	}
	cl := int64(-1)
	if h.endStream {
		cl = 0
	} else if v := header["Content-Length"]; len(v) == 1 {
		if n, err := strconv.ParseInt(v[0], 10, 64); err == nil && n >= 0 {
			cl = n
		}
	}
	return http.Request{
		Method:        h.method,
		URL:           u,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        header,
		ContentLength: cl,
		Host:          host,
		RemoteAddr:    c.remote,
		RequestURI:    h.path,
		TLS:           c.tls,
	}, nil
}
