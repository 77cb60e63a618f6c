// Package scraper collects the resource usage that the API server serves as
// metrics.k8s.io/v1beta1 (NodeMetrics, PodMetrics: `kubectl top`). Every
// Config.Resolution (--metric-resolution, 15 s by default as
// metrics-server) it asks each node's agent for GET /metrics/resource,
// keeps the last two answers per node and turns them into CPU rates
// (Rates, a pure function) and memory working sets.
//
// It runs on every API server, leader or not: it only reads agents and
// keeps its results in memory, so each server answers from its own view.
// It reaches agents as pods/log does: the address a Node reports and the
// server's kubelet-client certificate, accepting only that node's serving
// certificate, never following a redirect.
package scraper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Target is one agent to scrape: the node's name and the agent's host:port.
type Target struct {
	Node string
	Host string
}

// Config configures a Scraper.
type Config struct {
	// Resolution is the interval between scrapes (default 15 s).
	Resolution time.Duration
	// Timeout bounds one node's scrape (default: Resolution, at most 10 s).
	Timeout time.Duration
	// Targets lists the agents to scrape now.
	Targets func(ctx context.Context) ([]Target, error)
	// Client returns the HTTP client that reaches node's agent. It is
	// called once per node and pass; each scrape closes the idle
	// connections of the client it used (http.Client.CloseIdleConnections).
	Client func(node string) *http.Client
	// Parallelism bounds the scrapes in flight (default 64), so a pass
	// over 100,000 nodes does not start 100,000 connections at once.
	Parallelism int
	// Rate bounds the scrapes started per second (default 200; negative:
	// no bound), on average over a pass: the n-th scrape of a pass starts
	// no earlier than n/Rate seconds after the pass began, so after a stall
	// (Parallelism scrapes waiting for their time-outs) up to Parallelism
	// may start at once to catch up. Each scrape opens a TLS connection to
	// its agent, about 0.5 ms of the server's CPU (docs/performance.md), so
	// the pass over a fleet larger than Rate × Resolution takes longer than
	// Resolution instead of taking more CPU: at 100,000 nodes and 200/s a
	// node's usage is 500 s old at worst, where unbounded passes would
	// cost about 3 cores.
	Rate   float64
	Clock  clock.WithTicker
	Logger *slog.Logger
}

// DefaultRate is Config.Rate's default: scrapes started per second.
const DefaultRate = 200

// maxBackoffPasses is the most passes a failing node is skipped for: a node
// whose scrapes keep failing (an agent that is down, a simulated node with
// no agent) is tried after 1, 2, 4 and then every 8 passes (2 min at the
// default resolution), not every pass.
const maxBackoffPasses = 8

// failure is a node's current streak of failed scrapes.
type failure struct {
	streak int // consecutive failed attempts
	skip   int // passes still to skip before the next attempt
}

// Scraper keeps the latest usage of every node and pod.
type Scraper struct {
	cfg Config

	mu    sync.RWMutex
	last  map[string]Scrape // by node
	nodes map[string]Usage
	pods  map[PodRef]PodUsage

	// failing is only touched by ScrapeOnce, one pass at a time.
	failing map[string]failure
}

// New returns a Scraper; Run starts it.
func New(cfg Config) (*Scraper, error) {
	if cfg.Targets == nil || cfg.Client == nil {
		return nil, errors.New("scraper: Targets and Client are required")
	}
	if cfg.Resolution <= 0 {
		cfg.Resolution = 15 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = min(cfg.Resolution, 10*time.Second)
	}
	if cfg.Parallelism <= 0 {
		cfg.Parallelism = 64
	}
	if cfg.Rate == 0 {
		cfg.Rate = DefaultRate
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Scraper{cfg: cfg, last: map[string]Scrape{}, nodes: map[string]Usage{}, pods: map[PodRef]PodUsage{}, failing: map[string]failure{}}, nil
}

// Run scrapes at once and then every Resolution until ctx ends.
func (s *Scraper) Run(ctx context.Context) {
	t := s.cfg.Clock.NewTicker(s.cfg.Resolution)
	defer t.Stop()
	for {
		s.ScrapeOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// ScrapeOnce scrapes every target once, at most Config.Parallelism at a
// time and Config.Rate a second, and updates the results. A node that is
// not a target any more, or whose scrape failed, loses its results (stale
// numbers are worse than none). A node whose scrapes keep failing is
// skipped for a growing number of passes (maxBackoffPasses at most), and
// only the first failure of a streak is logged. No connection stays open
// after the pass, whether or not the clients keep connections alive.
func (s *Scraper) ScrapeOnce(ctx context.Context) {
	targets, err := s.cfg.Targets(ctx)
	if err != nil {
		s.cfg.Logger.Warn("resource metrics: cannot list nodes", "err", err)
		return
	}
	results := make([]*Scrape, len(targets))
	errs := make([]error, len(targets))
	tried := make([]bool, len(targets))
	sem := make(chan struct{}, s.cfg.Parallelism)
	var wg sync.WaitGroup
	var gap time.Duration // between two scrapes' starts
	if s.cfg.Rate > 0 {
		gap = time.Duration(float64(time.Second) / s.cfg.Rate)
	}
	start, started := s.cfg.Clock.Now(), 0
	for i, t := range targets {
		if f, ok := s.failing[t.Node]; ok && f.skip > 0 {
			f.skip--
			s.failing[t.Node] = f
			continue
		}
		if gap > 0 && !s.waitUntil(ctx, start.Add(time.Duration(started)*gap)) {
			break // ending: the rest are not tried
		}
		started++
		tried[i] = true
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			sc, err := s.scrape(ctx, t)
			if err != nil {
				errs[i] = err
				return
			}
			results[i] = &sc
		}()
	}
	wg.Wait()
	s.noteFailures(targets, tried, errs)

	s.mu.Lock()
	defer s.mu.Unlock()
	last := map[string]Scrape{}
	nodes := map[string]Usage{}
	pods := map[PodRef]PodUsage{}
	for i, t := range targets {
		cur := results[i]
		if cur == nil {
			continue
		}
		last[t.Node] = *cur
		prev, ok := s.last[t.Node]
		if !ok {
			continue
		}
		node, podUsage := Rates(prev, *cur)
		if node != nil {
			nodes[t.Node] = *node
		}
		for ref, u := range podUsage {
			pods[ref] = u
		}
	}
	s.last, s.nodes, s.pods = last, nodes, pods
}

// waitUntil waits on the clock until t, or reports false when ctx ends
// first.
func (s *Scraper) waitUntil(ctx context.Context, t time.Time) bool {
	d := t.Sub(s.cfg.Clock.Now())
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-s.cfg.Clock.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// noteFailures updates the failure streaks after a pass: a success ends a
// node's streak, a failure lengthens it and sets how many passes to skip;
// nodes that are no longer targets are forgotten.
//
// Each node's change is logged at debug level; at info level a pass logs
// one line for the nodes whose streak began and one for those whose streak
// ended, with their number and the first few names: a fleet whose nodes
// serve no metrics (a sim of 100,000 nodes) logged a line per node.
func (s *Scraper) noteFailures(targets []Target, tried []bool, errs []error) {
	current := make(map[string]bool, len(targets))
	var began, ended streakNews
	for i, t := range targets {
		current[t.Node] = true
		if !tried[i] {
			continue
		}
		if errs[i] == nil {
			if f, ok := s.failing[t.Node]; ok {
				s.cfg.Logger.Debug("resource metrics: scrape works again", "node", t.Node, "failedAttempts", f.streak)
				ended.add(t.Node, nil)
				delete(s.failing, t.Node)
			}
			continue
		}
		f := s.failing[t.Node]
		if f.streak == 0 {
			s.cfg.Logger.Debug("resource metrics: scrape failed; retrying less often while it fails", "node", t.Node, "err", errs[i])
			began.add(t.Node, errs[i])
		}
		f.streak++
		f.skip = min(1<<(f.streak-1), maxBackoffPasses) - 1
		s.failing[t.Node] = f
	}
	for node := range s.failing {
		if !current[node] {
			delete(s.failing, node)
		}
	}
	if began.count > 0 {
		s.cfg.Logger.Info("resource metrics: scrape failed; retrying less often while it fails", "nodes", began.count, "first", began.first, "err", began.err)
	}
	if ended.count > 0 {
		s.cfg.Logger.Info("resource metrics: scrape works again", "nodes", ended.count, "first", ended.first)
	}
}

// streakNews gathers the nodes of one pass whose failure streak began or
// ended, for one log line.
type streakNews struct {
	count int
	first []string // at most maxNamed
	err   error    // the first node's error
}

// maxNamed is how many nodes a pass's line names.
const maxNamed = 5

func (n *streakNews) add(node string, err error) {
	if n.count == 0 {
		n.err = err
	}
	n.count++
	if len(n.first) < maxNamed {
		n.first = append(n.first, node)
	}
}

func (s *Scraper) scrape(ctx context.Context, t Target) (Scrape, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	u := url.URL{Scheme: "https", Host: t.Host, Path: "/metrics/resource"}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Scrape{}, err
	}
	c := *s.cfg.Client(t.Node)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	// A node is asked once per pass, so a connection kept for reuse would
	// only sit idle until the next one, holding its TLS state (~8 KB; 80 MB
	// at 10,000 nodes). Deferred first, this runs after the body is closed,
	// when a connection read to its end is back in the idle pool; it closes
	// the idle connections of the client just used, allocating nothing.
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		return Scrape{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return Scrape{}, fmt.Errorf("agent answered %s: %s", resp.Status, body)
	}
	return Parse(io.LimitReader(resp.Body, 16<<20), s.cfg.Clock.Now())
}

// Node returns the usage of node, if known.
func (s *Scraper) Node(node string) (Usage, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u, ok := s.nodes[node]
	return u, ok
}

// Pod returns the usage of a pod, if known.
func (s *Scraper) Pod(namespace, name string) (PodUsage, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u, ok := s.pods[PodRef{Namespace: namespace, Name: name}]
	return u, ok
}
