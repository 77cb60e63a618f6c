package apiserver

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

func TestParseAccept(t *testing.T) {
	proto, json := acceptedType{Type: mediaProtobuf}, acceptedType{Type: mediaJSON}
	tests := []struct {
		name   string
		header string
		want   []acceptedType
	}{
		{"agents accept protobuf, then JSON", mediaProtobuf + ",application/json", []acceptedType{proto, json}},
		{"protobuf alone", mediaProtobuf, []acceptedType{proto}},
		{"client-go's default accepts JSON, then anything", "application/json, */*", []acceptedType{json, {Type: "*/*"}}},
		{"an uncommon header is parsed", "application/JSON;q=0.9 , application/yaml", []acceptedType{json, {Type: mediaYAML}}},
		{"a table request keeps its parameters", "application/json;as=Table;v=v1;g=meta.k8s.io", []acceptedType{{Type: mediaJSON, As: "Table", Group: "meta.k8s.io", Ver: "v1"}}},
		{"no header accepts anything", "", []acceptedType{{Type: "*/*"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseAccept(tt.header); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("parseAccept(%q) = %+v, want %+v", tt.header, got, tt.want)
			}
			if got := parseAcceptHeader(tt.header); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("parseAcceptHeader(%q) = %+v, want %+v", tt.header, got, tt.want)
			}
		})
	}
}

func TestBodySerializer(t *testing.T) {
	tests := []struct {
		name, contentType, wantType string
		wantOK                      bool
	}{
		{"protobuf is read as protobuf", mediaProtobuf, mediaProtobuf, true},
		{"JSON is read as JSON", mediaJSON, mediaJSON, true},
		{"no content type is JSON", "", mediaJSON, true},
		{"parameters are allowed", "application/json; charset=utf-8", mediaJSON, true},
		{"YAML aliases are YAML", "text/yaml", mediaYAML, true},
		{"other types are refused", "text/plain", "text/plain", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPut, "/api/v1/nodes/n", nil)
			r.Header.Set("Content-Type", tt.contentType)
			info, got, ok := bodySerializer(r)
			if got != tt.wantType || ok != tt.wantOK {
				t.Fatalf("got %q, %v; want %q, %v", got, ok, tt.wantType, tt.wantOK)
			}
			if ok && info.MediaType != tt.wantType {
				t.Fatalf("serializer for %q, want %q", info.MediaType, tt.wantType)
			}
		})
	}
}

func TestReadBodyFromTheInFlightBuffer(t *testing.T) {
	tests := []struct {
		name    string
		size    int
		wantErr error
	}{
		{"a lease-sized body is read whole", 200, nil},
		{"an empty body is empty", 0, nil},
		{"a body at the limit is read", maxBodyBytes, nil},
		{"a body over the limit is refused", maxBodyBytes + 10, errBodyTooLarge{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := bytes.Repeat([]byte("x"), tt.size)
			r := httptest.NewRequest(http.MethodPut, "/", bytes.NewReader(body))
			r.ContentLength = -1 // unknown, so the limit is found by reading
			buffered, err := readBodyBuffered(r)
			if err != nil {
				t.Fatal(err)
			}
			defer buffered.free()
			r.Body = buffered
			got, err := readBody(r)
			plain, plainErr := readBody(httptest.NewRequest(http.MethodPut, "/", strings.NewReader(string(body))))
			if !errors.Is(err, tt.wantErr) || !errors.Is(plainErr, tt.wantErr) {
				t.Fatalf("errors %v (buffered), %v (plain), want %v", err, plainErr, tt.wantErr)
			}
			if err == nil && (!bytes.Equal(got, body) || !bytes.Equal(plain, body)) {
				t.Fatalf("read %d bytes (buffered), %d (plain), want %d", len(got), len(plain), len(body))
			}
			if err == nil && buffered.Len() != 0 {
				t.Fatalf("%d bytes left unread", buffered.Len())
			}
		})
	}
}
