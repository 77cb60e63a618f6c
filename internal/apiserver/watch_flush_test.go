package apiserver

import (
	"testing"
	"time"
)

func TestFlushPacer(t *testing.T) {
	t.Run("the first flush and one after a quiet spell go out at once", func(t *testing.T) {
		p := flushPacer{delay: time.Hour}
		defer p.stop()
		if !p.now() {
			t.Fatal("first flush delayed")
		}
		p.last = time.Now().Add(-2 * time.Hour)
		if !p.now() {
			t.Fatal("flush after a quiet spell delayed")
		}
	})

	t.Run("a flush soon after another waits, and later ones join it", func(t *testing.T) {
		p := flushPacer{delay: time.Hour}
		defer p.stop()
		p.now()
		if p.now() || p.due() == nil {
			t.Fatal("second flush within the delay went out at once")
		}
		if p.now() {
			t.Fatal("a third flush went out while one is pending")
		}
		p.fired()
		if p.due() != nil || p.now() {
			t.Error("after the delayed flush: want nothing pending and the next flush delayed again")
		}
	})

	t.Run("the delayed flush comes due", func(t *testing.T) {
		// The last flush 5 ms short of the delay ago: the next waits about
		// 5 ms (tried again should the machine stall past that between two calls).
		for attempt := 0; ; attempt++ {
			p := flushPacer{delay: time.Hour, last: time.Now().Add(-time.Hour + 5*time.Millisecond)}
			if p.now() {
				if attempt == 100 {
					t.Fatal("never delayed a flush")
				}
				continue
			}
			select {
			case <-p.due():
			case <-time.After(10 * time.Second):
				t.Fatal("the delayed flush never came due")
			}
			p.stop()
			return
		}
	})

	t.Run("no delay flushes every time", func(t *testing.T) {
		p := flushPacer{delay: -1}
		for range 3 {
			if !p.now() {
				t.Fatal("delayed")
			}
		}
		if p.due() != nil {
			t.Error("a flush is pending")
		}
	})
}
