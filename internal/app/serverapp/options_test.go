package serverapp

import (
	"strings"
	"testing"
)

func TestValidateHTTP2Options(t *testing.T) {
	server := func(v string) func(*Options) { return func(o *Options) { o.HTTP2Server = v } }
	streams := func(n int) func(*Options) { return func(o *Options) { o.HTTP2MaxStreamsPerConnection = n } }
	tests := []struct {
		name    string
		set     func(*Options)
		wantErr string
	}{
		{name: "the default, nodeplane's own server, is valid", set: server(HTTP2Nodeplane)},
		{name: "Go's server is valid", set: server(HTTP2Go)},
		{name: "any other server is refused with the flag named", set: server("h2"), wantErr: `--http2-server must be "nodeplane" or "go", got "h2"`},
		{name: "the default stream limit is valid", set: streams(DefaultHTTP2MaxStreams)},
		{name: "one stream per connection is valid", set: streams(1)},
		{name: "a stream limit of zero is refused with the flag named", set: streams(0), wantErr: "--http2-max-streams-per-connection must be between 1 and 10000, got 0"},
		{name: "a negative stream limit is refused", set: streams(-5), wantErr: "--http2-max-streams-per-connection must be between 1 and 10000, got -5"},
		{name: "a stream limit past the bound is refused", set: streams(10001), wantErr: "--http2-max-streams-per-connection must be between 1 and 10000, got 10001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			tt.set(&o)
			err := o.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
