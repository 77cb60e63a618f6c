package apiserver

import (
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"
)

func TestFlushPacer(t *testing.T) {
	newPacer := func(delay time.Duration) (*flushPacer, *testclock.FakeClock) {
		clk := testclock.NewFakeClock(time.Unix(1_000_000, 0))
		return &flushPacer{delay: delay, clock: clk}, clk
	}

	t.Run("the first flush and one after a quiet spell go out at once", func(t *testing.T) {
		p, clk := newPacer(5 * time.Millisecond)
		if !p.now() {
			t.Fatal("first flush delayed")
		}
		clk.Step(5 * time.Millisecond)
		if !p.now() {
			t.Fatal("flush a whole delay after the last delayed")
		}
	})

	t.Run("a flush soon after another waits, later ones join it, and it comes due at the delay", func(t *testing.T) {
		p, clk := newPacer(5 * time.Millisecond)
		p.now()
		clk.Step(2 * time.Millisecond)
		if p.now() {
			t.Fatal("second flush 2 ms after the first went out at once")
		}
		if p.now() {
			t.Fatal("a third flush went out while one is pending")
		}
		clk.Step(2 * time.Millisecond)
		select {
		case <-p.due():
			t.Fatal("the delayed flush came due 1 ms early")
		default:
		}
		clk.Step(time.Millisecond)
		select {
		case <-p.due():
		default:
			t.Fatal("the delayed flush did not come due 5 ms after the last flush")
		}
		p.fired()
		if p.due() != nil || p.now() {
			t.Error("after the delayed flush: want nothing pending and the next flush delayed again")
		}
	})

	t.Run("no delay flushes every time", func(t *testing.T) {
		p, _ := newPacer(-1)
		for range 3 {
			if !p.now() {
				t.Fatal("delayed")
			}
		}
		if p.due() != nil {
			t.Error("a flush is pending")
		}
	})

	t.Run("with onDue a delayed flush calls it at the delay and never fires due()", func(t *testing.T) {
		p, clk := newPacer(5 * time.Millisecond)
		calls := 0
		p.onDue = func() { calls++ }
		p.now()
		clk.Step(time.Millisecond)
		if p.now() {
			t.Fatal("second flush 1 ms after the first went out at once")
		}
		if p.due() != nil {
			t.Fatal("due() is armed although onDue is set")
		}
		clk.Step(3 * time.Millisecond)
		if calls != 0 {
			t.Fatal("onDue called 1 ms early")
		}
		clk.Step(time.Millisecond)
		if calls != 1 {
			t.Fatalf("onDue called %d times at the delay, want once", calls)
		}
		p.fired()
		clk.Step(time.Millisecond)
		if p.now() || calls != 1 {
			t.Fatal("after the delayed flush: want the next flush delayed again and no call yet")
		}
		clk.Step(4 * time.Millisecond)
		if calls != 2 {
			t.Fatalf("onDue called %d times in all, want the re-armed timer to call it again", calls)
		}
	})
}
