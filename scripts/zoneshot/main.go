// Command zoneshot opens the zone view (/ui/) in headless Chromium, signs in
// with a bearer token and watches one zone's row: it prints when the row
// first shows -state with -unhealthy nodes, how long the page took to answer
// each probe (responsiveness while the view updates), and then saves a
// screenshot. scripts/zonebench.sh runs it during a zone outage; it is a
// measuring tool, not a test.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

func main() {
	url := flag.String("url", "", "server URL (https://HOST:PORT)")
	token := flag.String("token", "", "bearer token of a user allowed to get /ui/*")
	zone := flag.String("zone", "a", "zone to watch (the row whose zone ends in this)")
	state := flag.String("state", "FullDisruption", "state to wait for")
	unhealthy := flag.String("unhealthy", "", "unhealthy count to wait for (empty: any)")
	settle := flag.Duration("settle", 20*time.Second, "time to keep watching after the state shows, before the screenshot")
	timeout := flag.Duration("timeout", 15*time.Minute, "give up after this long")
	out := flag.String("out", "zone-view.png", "screenshot file")
	chromium := flag.String("chromium", "/usr/bin/chromium", "Chromium binary")
	flag.Parse()
	if err := run(*url, *token, *zone, *state, *unhealthy, *settle, *timeout, *out, *chromium); err != nil {
		fmt.Fprintln(os.Stderr, "zoneshot:", err)
		os.Exit(1)
	}
}

func run(url, token, zone, state, unhealthy string, settle, timeout time.Duration, out, chromium string) error {
	if url == "" || token == "" {
		return fmt.Errorf("-url and -token are required")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.Flag("ignore-certificate-errors", true), chromedp.WindowSize(1400, 1100), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	bctx, cancel := context.WithTimeout(bctx, timeout)
	defer cancel()
	if err := chromedp.Do(bctx,
		chromedp.Navigate(url+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#login-form")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS(`#login-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#zones")),
	); err != nil {
		return fmt.Errorf("sign in: %w", err)
	}
	fmt.Printf("signed in %.3f\n", unix(time.Now()))
	js := fmt.Sprintf(`(() => { const r = [...document.querySelectorAll("#zones tbody tr")].find(r => r.dataset.zone.endsWith(%q));
		return r ? r.querySelector(".state").textContent + " " + r.querySelector(".unhealthy").textContent : "missing"; })()`, zone)
	var rtts []time.Duration
	var shown time.Time
	last := ""
	probe := time.NewTicker(250 * time.Millisecond)
	defer probe.Stop()
	for {
		t0 := time.Now()
		got, err := chromedp.Run(bctx, chromedp.Evaluate[string](js))
		if err != nil {
			return fmt.Errorf("read the page: %w", err)
		}
		rtts = append(rtts, time.Since(t0))
		// The page groups digits ("3,334"); -unhealthy is a plain number.
		if got != last {
			fmt.Printf("zone %s: %q at %.3f\n", zone, got, unix(time.Now()))
			last = got
		}
		if shown.IsZero() && (strings.ReplaceAll(got, ",", "") == state+" "+unhealthy || (unhealthy == "" && len(got) > len(state) && got[:len(state)] == state)) {
			shown = time.Now()
			fmt.Printf("shown %.3f\n", unix(shown))
		}
		if !shown.IsZero() && time.Since(shown) >= settle {
			break
		}
		select {
		case <-probe.C:
		case <-bctx.Done():
			return fmt.Errorf("zone %s never showed %q %s: %w", zone, state, unhealthy, bctx.Err())
		}
	}
	sort.Slice(rtts, func(i, j int) bool { return rtts[i] < rtts[j] })
	fmt.Printf("page probes: %d, p50 %v, p99 %v, max %v\n", len(rtts), rtts[len(rtts)/2].Round(time.Millisecond),
		rtts[len(rtts)*99/100].Round(time.Millisecond), rtts[len(rtts)-1].Round(time.Millisecond))
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	return os.WriteFile(out, png, 0o644)
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
