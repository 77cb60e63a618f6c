package serverapp

import (
	"math"
	"strings"
	"testing"
)

func TestValidateServingOptions(t *testing.T) {
	server := func(v string) func(*Options) { return func(o *Options) { o.HTTP2Server = v } }
	streams := func(n int) func(*Options) { return func(o *Options) { o.HTTP2MaxStreamsPerConnection = n } }
	scrapes := func(v float64) func(*Options) { return func(o *Options) { o.MetricScrapesPerSecond = v } }
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
		{name: "the default scrape rate is valid", set: scrapes(200)},
		{name: "no bound on scrapes is valid", set: scrapes(0)},
		{name: "a fractional scrape rate is valid", set: scrapes(0.5)},
		{name: "a negative scrape rate is refused with the flag named", set: scrapes(-1), wantErr: "--metric-scrapes-per-second must be a finite number >= 0, got -1"},
		{name: "a scrape rate that is not a number is refused", set: scrapes(math.NaN()), wantErr: "--metric-scrapes-per-second must be a finite number >= 0, got NaN"},
		{name: "an infinite scrape rate is refused", set: scrapes(math.Inf(1)), wantErr: "--metric-scrapes-per-second must be a finite number >= 0, got +Inf"},
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
