package loadgen

import (
	"os"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and a parenthesis, as /proc allows.
	stat := "4242 (node plane) x) S 1 4242 4242 0 -1 4194560 5000 0 0 0 250 130 0 0 20 0 12 0 100 0 0\n"
	got, err := parseStatCPU([]byte(stat))
	if err != nil {
		t.Fatal(err)
	}
	if want := 3800 * time.Millisecond; got != want {
		t.Errorf("cpu = %v, want %v (250+130 ticks at 100 Hz)", got, want)
	}
	if _, err := parseStatCPU([]byte("4242 (short) S 1")); err == nil {
		t.Error("a truncated stat line parsed without error")
	}
}

func TestParseStatusMemory(t *testing.T) {
	status := "Name:\tnodeplane\nVmPeak:\t 1000 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nRssAnon:\t   61440 kB\nRssFile:\t   40960 kB\nThreads:\t9\n"
	got := parseStatusMemory([]byte(status))
	want := map[string]int64{"VmRSS": 100 << 20, "VmHWM": 200 << 20, "RssAnon": 60 << 20, "RssFile": 40 << 20}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("parsed %v, want only %v", got, want)
	}
}

func TestReadProcOfThisProcess(t *testing.T) {
	s, err := readProc(os.Getpid())
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	if s.rss <= 0 || s.hwm < s.rss {
		t.Errorf("rss %d, hwm %d: want 0 < rss ≤ hwm", s.rss, s.hwm)
	}
}

func TestParseHostCPU(t *testing.T) {
	start := "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\ncpu1 50 0 25 400 25 0 0 0 0 0\nintr 1\n"
	end := "cpu  250 0 100 900 50 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\ncpu1 0 0 0 0 0 0 0 0 0 0\n"
	h0, err := parseHostCPU([]byte(start))
	if err != nil {
		t.Fatal(err)
	}
	h1, err := parseHostCPU([]byte(end))
	if err != nil {
		t.Fatal(err)
	}
	// 300 ticks passed, 100 of them idle: two cores two-thirds busy.
	got := h1.since(h0)
	if got == nil || got.Cores != 2 || got.BusyCores < 1.333 || got.BusyCores > 1.334 {
		t.Errorf("since = %+v, want 2 cores, 1.33 busy", got)
	}
	if _, err := parseHostCPU([]byte("intr 1\n")); err == nil {
		t.Error("no cpu line parsed without error")
	}
}
