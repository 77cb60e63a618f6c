package loadgen

import (
	"context"
	"net/http"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// Wire counts the server's answers as they come off the wire, before
// client-go acts on them. client-go retries a 429 (and a 5xx) that carries
// Retry-After — up to 10 times, after waiting the seconds it names — so a
// throttled request usually ends in success and the run's error counts
// never see the 429: Wire does. Install it with Wrap before NewClients.
type Wire struct {
	tooMany, serverErrors, responses atomic.Int64
}

// WireCounts is a snapshot of a Wire.
type WireCounts struct {
	// Responses counts every HTTP response, retried attempts included.
	Responses int64 `json:"responses"`
	// TooManyRequests counts 429 responses: first answers and answers to
	// client-go's retries alike.
	TooManyRequests int64 `json:"tooManyRequests"`
	// ServerErrors counts 5xx responses.
	ServerErrors int64 `json:"serverErrors"`
}

// Wrap makes every transport built from cfg count its responses in w.
func (w *Wire) Wrap(cfg *rest.Config) {
	prev := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return wireRoundTripper{rt: rt, w: w}
	}
}

// Counts returns the counts so far.
func (w *Wire) Counts() WireCounts {
	return WireCounts{Responses: w.responses.Load(), TooManyRequests: w.tooMany.Load(), ServerErrors: w.serverErrors.Load()}
}

func (c WireCounts) sub(o WireCounts) WireCounts {
	return WireCounts{Responses: c.Responses - o.Responses, TooManyRequests: c.TooManyRequests - o.TooManyRequests, ServerErrors: c.ServerErrors - o.ServerErrors}
}

type wireRoundTripper struct {
	rt http.RoundTripper
	w  *Wire
}

func (t wireRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	t.w.responses.Add(1)
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		t.w.tooMany.Add(1)
		if a, ok := req.Context().Value(attemptsKey{}).(*attempts); ok {
			a.tooMany.Add(1)
		}
	case resp.StatusCode >= 500:
		t.w.serverErrors.Add(1)
	}
	return resp, nil
}

// attempts counts what happened to the attempts of one logical request
// (a renewal with client-go's retries), when its context carries it.
type attempts struct{ tooMany atomic.Int32 }

type attemptsKey struct{}

// withAttempts returns ctx carrying a fresh attempts counter.
func withAttempts(ctx context.Context) (context.Context, *attempts) {
	a := &attempts{}
	return context.WithValue(ctx, attemptsKey{}, a), a
}
