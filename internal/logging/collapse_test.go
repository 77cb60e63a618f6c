package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// lines decodes the JSON records written to buf.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("record %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestAFloodingMessageIsLoggedOncePerWindowWithTheNumberHeldBack(t *testing.T) {
	var buf bytes.Buffer
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 27, 17, 0, 0, 0, time.UTC))
	flood := "Unable to record event: too many queued events, dropped event"
	log := slog.New(newCollapser(slog.NewJSONHandler(&buf, nil), []string{flood}, 10*time.Second, clk))
	// The recorder's logger carries its own attributes: a derived handler
	// shares the windows.
	derived := log.With("component", "events")

	log.Error(flood, "event", "first")
	for i := range 4 {
		derived.Error(flood, "event", i)
	}
	log.Info("another message")
	got := lines(t, &buf)
	if len(got) != 2 || got[0]["event"] != "first" || got[1]["msg"] != "another message" {
		t.Fatalf("within the window: %v, want the first flood record and the other message", got)
	}

	clk.Step(10 * time.Second)
	got = lines(t, &buf)
	if len(got) != 3 {
		t.Fatalf("after the window: %d records, want a third one with the count", len(got))
	}
	sum := got[2]
	if sum["msg"] != flood || sum["level"] != "ERROR" || sum["repeated"] != float64(4) || sum["since"] != "2026-11-27T17:00:00Z" {
		t.Errorf("the window's record is %v, want the message at ERROR with repeated=4 since 17:00:00", sum)
	}

	// The next one opens a new window and is logged as it came.
	derived.Error(flood, "event", "later")
	got = lines(t, &buf)
	if len(got) != 4 || got[3]["event"] != "later" || got[3]["component"] != "events" {
		t.Fatalf("after the window: %v, want the new record in full", got[3:])
	}
	// A window in which nothing repeated ends without a record.
	clk.Step(10 * time.Second)
	if got := lines(t, &buf); len(got) != 4 {
		t.Errorf("a window without repeats logged %v", got[4:])
	}
}
