package loadgen

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Result is what a run measured. It is printed by WriteSummary and, with
// --json, encoded as is.
type Result struct {
	Mode     Mode `json:"mode"`
	Clients  int  `json:"clients"`
	Inflight int  `json:"inflightPerClient,omitempty"`
	Objects  int  `json:"objects"`
	// IntervalSeconds is the lease renewal interval used (lease mode).
	IntervalSeconds float64 `json:"intervalSeconds,omitempty"`
	JitterFactor    float64 `json:"jitterFactor,omitempty"`
	// DurationSeconds is the measured phase's length.
	DurationSeconds float64 `json:"durationSeconds"`
	// TargetPerSecond is the request rate asked for (0 = closed loop).
	TargetPerSecond float64 `json:"targetPerSecond"`
	// AchievedPerSecond counts requests started in the measured phase.
	AchievedPerSecond float64 `json:"achievedPerSecond"`
	Requests          int     `json:"requests"`
	// Latency of requests started in the measured phase: from the intended
	// start for open-loop runs, from the send otherwise; in watch mode,
	// from a write's acknowledgement to each watcher's receipt.
	Latency Summary `json:"latency"`
	// Service is open-loop latency from the actual send.
	Service *Summary `json:"serviceLatency,omitempty"`
	// Lag is how late renewals started after they fell due (lease mode):
	// a large lag means the generator, not the server, was the limit.
	Lag *Summary `json:"scheduleLag,omitempty"`

	Errors map[string]int `json:"errors,omitempty"`
	// ErrorExamples holds the first message of each error reason.
	ErrorExamples map[string]string `json:"errorExamples,omitempty"`
	ErrorCount    int               `json:"errorCount"`
	// Conflicts were resolved by a re-read and a retry (lease, update).
	Conflicts int `json:"conflicts"`
	// Throttled counts renewals (lease mode) of which at least one attempt
	// was answered 429; ThrottledSucceeded those of them that client-go's
	// retries then got through. Counted only with Config.Wire.
	Throttled          int `json:"throttled,omitempty"`
	ThrottledSucceeded int `json:"throttledSucceeded,omitempty"`
	// Wire counts the HTTP responses of the measured phase, client-go's
	// retries included (Config.Wire).
	Wire *WireCounts `json:"wire,omitempty"`

	// ObjectJSONBytes and ObjectProtobufBytes are the size of one object
	// of the kind the run writes.
	ObjectJSONBytes     int `json:"objectJSONBytes,omitempty"`
	ObjectProtobufBytes int `json:"objectProtobufBytes,omitempty"`

	Setup []*Setup `json:"setup,omitempty"`
	// NodeConnections describes the per-node connections (lease mode
	// with NodeClients).
	NodeConnections *NodeConnections `json:"nodeConnections,omitempty"`
	Watch           *Watch           `json:"watch,omitempty"`
	// List is the number of items per list (list mode).
	ListItems int `json:"listItems,omitempty"`

	Server    *ProcStats `json:"server,omitempty"`
	Generator ProcStats  `json:"generator"`
	// Host is the whole machine's CPU use over the measured phase: what
	// is neither server nor generator competes with them.
	Host *HostStats `json:"host,omitempty"`
}

// Setup describes the objects prepared before the measured phase.
type Setup struct {
	// Kind is "nodes" or "leases".
	Kind     string  `json:"kind"`
	Created  int     `json:"created"`
	Existing int     `json:"existing"`
	Seconds  float64 `json:"seconds"`
	// CreateLatency is of the creates the setup did.
	CreateLatency Summary `json:"createLatency"`
}

// NodeConnections describes the connections of a run with one connection
// per node.
type NodeConnections struct {
	Connections int `json:"connections"`
	// Watches were opened (two per node with NodeWatches); Events counts
	// what they received; EndedEarly ended before the run did.
	Watches    int   `json:"watches"`
	Events     int64 `json:"events"`
	EndedEarly int   `json:"endedEarly"`
}

// Watch describes watch delivery.
type Watch struct {
	Watchers int `json:"watchers"`
	Writes   int `json:"writes"`
	// Expected is Writes × Watchers; Received counts matched events.
	Expected int `json:"expected"`
	Received int `json:"received"`
	// Early counts events received before the writer had its response:
	// their acknowledgement→receipt latency is recorded as 0.
	Early int `json:"early"`
	// FromSend is latency from the write's send to receipt.
	FromSend Summary `json:"fromSendLatency"`
	// WriteLatency is the writer's update latency.
	WriteLatency Summary `json:"writeLatency"`
	Closed       int     `json:"watchesClosed"`
}

// WriteSummary prints r for people.
func (r *Result) WriteSummary(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "mode %s: %d objects, %d clients", r.Mode, r.Objects, r.Clients)
	if r.Inflight > 1 {
		fmt.Fprintf(&b, " × %d in flight", r.Inflight)
	}
	if r.IntervalSeconds > 0 {
		fmt.Fprintf(&b, ", interval %.3gs (+%g%% jitter)", r.IntervalSeconds, r.JitterFactor*100)
	}
	b.WriteString("\n")
	for _, s := range r.Setup {
		fmt.Fprintf(&b, "setup %s: %d created, %d existing in %.1fs", s.Kind, s.Created, s.Existing, s.Seconds)
		if s.Created > 0 {
			fmt.Fprintf(&b, " (create p50 %s p99 %s)", fmtMs(s.CreateLatency.P50Ms), fmtMs(s.CreateLatency.P99Ms))
		}
		b.WriteString("\n")
	}
	if nc := r.NodeConnections; nc != nil {
		fmt.Fprintf(&b, "node connections: %d, watches %d (%d events, %d ended early)\n", nc.Connections, nc.Watches, nc.Events, nc.EndedEarly)
	}
	if r.ObjectJSONBytes > 0 {
		fmt.Fprintf(&b, "object size: %d B JSON, %d B protobuf\n", r.ObjectJSONBytes, r.ObjectProtobufBytes)
	}
	target := "closed loop"
	if r.TargetPerSecond > 0 {
		target = fmt.Sprintf("target %.0f/s", r.TargetPerSecond)
	}
	fmt.Fprintf(&b, "throughput: %.0f/s achieved (%s), %d requests in %.1fs\n", r.AchievedPerSecond, target, r.Requests, r.DurationSeconds)
	label := "latency"
	if r.Mode == ModeWatch {
		label = "ack→event"
	}
	writeSummaryLine(&b, label, r.Latency)
	if r.Service != nil {
		writeSummaryLine(&b, "service", *r.Service)
	}
	if r.Lag != nil {
		writeSummaryLine(&b, "sched lag", *r.Lag)
	}
	if wt := r.Watch; wt != nil {
		writeSummaryLine(&b, "send→event", wt.FromSend)
		writeSummaryLine(&b, "write", wt.WriteLatency)
		fmt.Fprintf(&b, "watch: %d watchers, %d writes, %d/%d events received (%d before the write's response), %d watches closed\n",
			wt.Watchers, wt.Writes, wt.Received, wt.Expected, wt.Early, wt.Closed)
	}
	if r.ListItems > 0 {
		fmt.Fprintf(&b, "list: %d items per list\n", r.ListItems)
	}
	fmt.Fprintf(&b, "errors: %d", r.ErrorCount)
	if len(r.Errors) > 0 {
		keys := make([]string, 0, len(r.Errors))
		for k := range r.Errors {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			sep := ", "
			if i == 0 {
				sep = " ("
			}
			fmt.Fprintf(&b, "%s%s %d", sep, k, r.Errors[k])
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, "; conflicts retried: %d\n", r.Conflicts)
	if wc := r.Wire; wc != nil {
		fmt.Fprintf(&b, "on the wire: %d responses, %d × 429 (client-go waits Retry-After and retries), %d × 5xx\n",
			wc.Responses, wc.TooManyRequests, wc.ServerErrors)
		if r.Mode == ModeLease {
			fmt.Fprintf(&b, "throttled renewals: %d got a 429 at least once, %d of them then succeeded\n", r.Throttled, r.ThrottledSucceeded)
		}
	}
	if s := r.Server; s != nil {
		fmt.Fprintf(&b, "server pid %d: %.2f cores, RSS %s at start, %s at end (%s anon, %s file), %s max sampled (%s peak since start)\n",
			s.PID, s.CPUCores, mib(s.RSSStartBytes), mib(s.RSSEndBytes), mib(s.RSSAnonEndBytes), mib(s.RSSFileEndBytes), mib(s.RSSMaxBytes), mib(s.HWMBytes))
	}
	fmt.Fprintf(&b, "generator: %.2f cores", r.Generator.CPUCores)
	if h := r.Host; h != nil {
		others := h.BusyCores - r.Generator.CPUCores
		if r.Server != nil {
			others -= r.Server.CPUCores
		}
		fmt.Fprintf(&b, "; host: %.2f of %d cores busy (%.2f by other processes)", h.BusyCores, h.Cores, max(0, others))
	}
	b.WriteString("\n")
	for _, k := range slices.Sorted(maps.Keys(r.ErrorExamples)) {
		fmt.Fprintf(&b, "error example %s: %s\n", k, r.ErrorExamples[k])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeSummaryLine(b *strings.Builder, label string, s Summary) {
	fmt.Fprintf(b, "%-10s p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (n=%d)\n", label+":",
		fmtMs(s.P50Ms), fmtMs(s.P90Ms), fmtMs(s.P99Ms), fmtMs(s.P999Ms), fmtMs(s.MaxMs), s.Count)
}

func fmtMs(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.2fs", v/1000)
	case v >= 10:
		return fmt.Sprintf("%.1fms", v)
	default:
		return fmt.Sprintf("%.2fms", v)
	}
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
