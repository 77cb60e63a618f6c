package serverapp

import (
	"strings"
	"testing"
)

func TestValidateHTTP2Server(t *testing.T) {
	tests := []struct {
		name, value string
		wantErr     string
	}{
		{name: "the default, nodeplane's own server, is valid", value: HTTP2Nodeplane},
		{name: "Go's server is valid", value: HTTP2Go},
		{name: "anything else is refused with the flag named", value: "h2", wantErr: `--http2-server must be "nodeplane" or "go", got "h2"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			o.HTTP2Server = tt.value
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

func TestValidateHTTP2MaxStreams(t *testing.T) {
	tests := []struct {
		name    string
		value   int
		wantErr string
	}{
		{name: "the default is valid", value: DefaultHTTP2MaxStreams},
		{name: "one stream per connection is valid", value: 1},
		{name: "zero is refused with the flag named", value: 0, wantErr: "--http2-max-streams-per-connection must be between 1 and 10000, got 0"},
		{name: "a negative value is refused", value: -5, wantErr: "--http2-max-streams-per-connection must be between 1 and 10000, got -5"},
		{name: "more than the bound is refused", value: 10001, wantErr: "--http2-max-streams-per-connection must be between 1 and 10000, got 10001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			o.HTTP2MaxStreamsPerConnection = tt.value
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
