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
