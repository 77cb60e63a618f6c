package apiserver

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeplane/nodeplane/internal/apiserver/scheme"
	"github.com/nodeplane/nodeplane/internal/loopback"
)

// maxBodyBytes is the largest request body accepted (kube-apiserver's 3 MiB).
const maxBodyBytes = 3 << 20

const (
	mediaJSON     = "application/json"
	mediaYAML     = "application/yaml"
	mediaProtobuf = "application/vnd.kubernetes.protobuf"
)

// acceptedType is one entry of an Accept header.
type acceptedType struct {
	Type   string // "application/json"
	As     string // "Table", "PartialObjectMetadata", "PartialObjectMetadataList", "APIGroupDiscoveryList"
	Group  string
	Ver    string
	Stream string
}

// commonAccept are the parsed Accept headers that client-go, agents and
// kubectl send most, so that the heartbeat path does not parse them on
// every request. Read only.
var commonAccept = func() map[string][]acceptedType {
	m := map[string][]acceptedType{}
	for _, h := range []string{
		mediaProtobuf + ",application/json",                            // agents, controllers
		loopback.MediaType + "," + mediaProtobuf + ",application/json", // the controllers' core and coordination clients
		mediaProtobuf,
		mediaJSON,
		mediaJSON + ", */*", // client-go's default
	} {
		m[h] = parseAcceptHeader(h)
	}
	return m
}()

// parseAccept returns the Accept entries in the client's order of
// preference. The result is shared: callers must not modify it.
func parseAccept(header string) []acceptedType {
	if parsed, ok := commonAccept[header]; ok {
		return parsed
	}
	return parseAcceptHeader(header)
}

// parseAcceptHeader parses an Accept header.
func parseAcceptHeader(header string) []acceptedType {
	if strings.TrimSpace(header) == "" {
		return []acceptedType{{Type: "*/*"}}
	}
	var out []acceptedType
	for _, part := range strings.Split(header, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if q, ok := params["q"]; ok && q == "0" {
			continue
		}
		out = append(out, acceptedType{Type: mt, As: params["as"], Group: params["g"], Ver: params["v"], Stream: params["stream"]})
	}
	return out
}

// outputKind is how a response object is rendered.
type outputKind int

const (
	outputObject outputKind = iota
	outputTable
	outputMetadata // PartialObjectMetadata(List)
)

// responseFormat is the negotiated rendering of a response.
type responseFormat struct {
	info runtime.SerializerInfo
	kind outputKind
	// tableVersion is "v1" or "v1beta1" for Table output.
	metaVersion string
	// table is the request's table options (includeObject), for Table
	// output: read once, so that a long watch keeps no request.
	table metav1.TableOptions
	// handoff, when set, hands a watch's objects to an in-process client
	// instead of encoding them (handoffFormat).
	handoff runtime.Encoder
}

// handoffFormat is the format of a watch for an in-process client (package
// loopback) whose first choice is to be handed the objects: its events are
// then the server's own objects, which the client must not modify. Any
// other request — every request from the network — gets false; other verbs
// never ask (their responses are encoded: a client may modify what it got
// or listed).
func handoffFormat(r *http.Request) (responseFormat, bool) {
	h := loopback.HandoffFrom(r.Context())
	if h == nil {
		return responseFormat{}, false
	}
	accept := parseAccept(r.Header.Get("Accept"))
	if len(accept) == 0 || accept[0].Type != loopback.MediaType || accept[0].As != "" {
		return responseFormat{}, false
	}
	return responseFormat{info: runtime.SerializerInfo{MediaType: loopback.MediaType}, handoff: h.Encoder()}, true
}

// negotiate picks the response format for an object response. Tables and
// partial metadata are offered only when allowTransform is true.
func negotiate(r *http.Request, allowTransform bool) (responseFormat, bool) {
	for _, a := range parseAccept(r.Header.Get("Accept")) {
		if a.As != "" {
			if !allowTransform || a.Group != "meta.k8s.io" || (a.Ver != "v1" && a.Ver != "v1beta1") {
				continue
			}
			switch a.As {
			case "Table":
				if a.Type == mediaJSON || a.Type == "*/*" || a.Type == "application/*" {
					return responseFormat{info: serializerFor(mediaJSON), kind: outputTable, metaVersion: a.Ver}, true
				}
			case "PartialObjectMetadata", "PartialObjectMetadataList":
				if info, ok := serializerForAccept(a.Type); ok {
					return responseFormat{info: info, kind: outputMetadata, metaVersion: a.Ver}, true
				}
			}
			continue
		}
		if info, ok := serializerForAccept(a.Type); ok {
			return responseFormat{info: info}, true
		}
	}
	return responseFormat{}, false
}

func serializerForAccept(t string) (runtime.SerializerInfo, bool) {
	switch t {
	case "*/*", "application/*", mediaJSON:
		return serializerFor(mediaJSON), true
	case mediaYAML:
		return serializerFor(mediaYAML), true
	case mediaProtobuf:
		return serializerFor(mediaProtobuf), true
	}
	return runtime.SerializerInfo{}, false
}

func serializerFor(mediaType string) runtime.SerializerInfo {
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		panic("no serializer for " + mediaType)
	}
	return info
}

// bodySerializer returns the serializer for a request's Content-Type, or
// false when the type is not supported (415).
func bodySerializer(r *http.Request) (runtime.SerializerInfo, string, bool) {
	ct := r.Header.Get("Content-Type")
	switch ct {
	case "":
		return serializerFor(mediaJSON), mediaJSON, true
	case mediaJSON, mediaProtobuf: // the common bodies need no parsing
		return serializerFor(ct), ct, true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return runtime.SerializerInfo{}, ct, false
	}
	switch mt {
	case mediaJSON, mediaYAML, mediaProtobuf, "application/x-yaml", "text/yaml":
		if mt == "application/x-yaml" || mt == "text/yaml" {
			mt = mediaYAML
		}
		return serializerFor(mt), mt, true
	}
	return runtime.SerializerInfo{}, ct, false
}

// errBodyTooLarge reports a body over maxBodyBytes.
type errBodyTooLarge struct{}

func (errBodyTooLarge) Error() string { return "request body too large" }

// readBodyLent is readBody without a copy of a body LimitInFlight has read
// already: the bytes are its pooled buffer's, lent until the handler
// returns, so the caller must keep nothing of them — as a decoder does,
// which copies every string and byte slice it keeps
// (TestADecodedBodyKeepsNothingOfTheBuffer).
func readBodyLent(r *http.Request) ([]byte, error) {
	b, ok := r.Body.(*bufferedBody)
	if !ok {
		return readBody(r)
	}
	if b.Len() > maxBodyBytes {
		return nil, errBodyTooLarge{}
	}
	data := b.buf[len(b.buf)-b.Len():]
	_, _ = b.Seek(0, io.SeekEnd)
	return data, nil
}

// readBody reads the whole body, refusing bodies over maxBodyBytes.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	if r.ContentLength > maxBodyBytes {
		return nil, errBodyTooLarge{}
	}
	// LimitInFlight has read the body already: copy what is left of it
	// at its size, instead of growing a buffer.
	if _, ok := r.Body.(*bufferedBody); ok {
		lent, err := readBodyLent(r)
		if err != nil {
			return nil, err
		}
		return bytes.Clone(lent), nil
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	if len(data) > maxBodyBytes {
		return nil, errBodyTooLarge{}
	}
	return data, nil
}
