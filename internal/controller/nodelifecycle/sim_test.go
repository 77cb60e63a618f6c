package nodelifecycle

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The simulation runs the core against a few hundred fake agents in five
// zones on one fake clock, with seeded faults: agents dying and coming back,
// agents reporting NotReady, whole zones and the whole cluster going dark,
// the controller's view going stale (a storage stall), leadership moving,
// and writes failing. After every simulated second it checks the
// invariants the controller promises.
//
// Run other seeds with NODEPLANE_SIM_SEEDS=7,8,9 go test -run Simulation.
func TestSimulation(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if env := os.Getenv("NODEPLANE_SIM_SEEDS"); env != "" {
		seeds = nil
		for _, f := range strings.Split(env, ",") {
			s, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil {
				t.Fatalf("NODEPLANE_SIM_SEEDS: %v", err)
			}
			seeds = append(seeds, s)
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			newSim(t, seed).run()
		})
	}
}

// simAgent is one fake node agent.
type simAgent struct {
	name     string
	zone     string // zone name as labelled ("" none)
	excluded bool
	ghost    bool // a Node created by hand: no agent ever runs
	useLease bool // heartbeats by lease (else by posting Ready)
	phase    int  // second within the 10 s renew interval
	skew     time.Duration
	dead     bool // the agent process is stopped
	sick     bool // the agent reports Ready=False
	lastBeat time.Time
}

type sim struct {
	t    *testing.T
	seed uint64
	rng  *rand.Rand
	cl   *cluster
	cfg  Config

	agents []*simAgent
	byName map[string]*simAgent
	zones  []string // zone names

	// faults in progress (end times; zero when none)
	zoneDown    string
	zoneDownEnd time.Time
	allDownAt   time.Time
	allDownEnd  time.Time
	staleEnd    time.Time
	frozen      []Observation
	gapEnd      time.Time
	stallAt     time.Time // a stall and a failover that always happen
	failoverAt  time.Time

	// invariant state
	lastEviction  map[string]time.Time // zone key → last limiter taint
	tokenUsed     map[string]time.Time // zone key → last token spent (written or failed)
	rateSince     map[string]time.Time // zone key → when its rate last changed
	rate          map[string]float64
	skipped       map[string]time.Time // node → when the shell last skipped its taint
	maxRateSince  map[string]float64   // zone key → highest rate since then
	statusAtPass  map[string]corev1.ConditionStatus
	allDownAtPass bool

	// coverage counters, to make sure the run exercised what it claims
	seen map[string]int
}

const (
	simDuration = 40 * time.Minute
	simQuiet    = 6 * time.Minute
)

func newSim(t *testing.T, seed uint64) *sim {
	cfg := DefaultConfig()
	s := &sim{
		t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)),
		cl: newCluster(t, cfg), cfg: cfg, byName: map[string]*simAgent{},
		zones:        []string{"a", "b", "c", "d", ""},
		lastEviction: map[string]time.Time{}, maxRateSince: map[string]float64{},
		tokenUsed: map[string]time.Time{}, rateSince: map[string]time.Time{}, rate: map[string]float64{},
		skipped:      map[string]time.Time{},
		statusAtPass: map[string]corev1.ConditionStatus{}, seen: map[string]int{},
	}
	sizes := map[string]int{"a": 120, "b": 90, "c": 60, "d": 30, "": 10}
	for _, z := range s.zones {
		for i := 0; i < sizes[z]; i++ {
			a := &simAgent{
				name:     fmt.Sprintf("node-%s-%03d", or(z, "none"), i),
				zone:     z,
				useLease: s.rng.IntN(4) != 0,
				phase:    s.rng.IntN(10),
				skew:     time.Duration(s.rng.Int64N(int64(4*time.Hour))) - 2*time.Hour,
				lastBeat: t0,
				excluded: z == "a" && i < 5,
				ghost:    z == "d" && i < 2,
			}
			s.agents = append(s.agents, a)
			s.byName[a.name] = a
			var opts []nodeOpt
			if z != "" {
				opts = append(opts, inZone("r", z))
			}
			if a.excluded {
				opts = append(opts, excluded())
			}
			if a.ghost {
				// Made by hand an hour ago: past its startup grace period
				// at the first pass.
				a.lastBeat = t0.Add(-time.Hour)
				s.cl.add(a.name, append(opts, createdAgo(time.Hour))...)
				continue
			}
			s.cl.add(a.name, opts...)
			s.cl.postAt(a.name, corev1.ConditionTrue, t0.Add(a.skew))
			if a.useLease {
				s.cl.renewAt(a.name, t0.Add(a.skew))
			}
		}
	}
	// One whole-cluster outage somewhere in the middle, and at least one
	// stall before it and one failover after it.
	s.allDownAt = t0.Add(time.Duration(10+s.rng.IntN(15)) * time.Minute)
	s.allDownEnd = s.allDownAt.Add(time.Duration(90+s.rng.IntN(120)) * time.Second)
	s.stallAt = t0.Add(time.Duration(120+s.rng.IntN(180)) * time.Second)
	s.failoverAt = t0.Add(time.Duration(30*60+s.rng.IntN(8*60)) * time.Second)
	// Renewals count from when they happen, as the shell's watch delivers
	// them, so grace periods end between passes as well as on them.
	s.cl.leaseSeen = true
	return s
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (s *sim) fail(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("seed %d, t=+%v: %s", s.seed, s.cl.now.Sub(t0), fmt.Sprintf(format, args...))
}

func (s *sim) run() {
	end := t0.Add(simDuration)
	for s.cl.now.Before(end) {
		s.faults()
		s.tick()
		s.cl.step(time.Second)
	}
	s.quietPhase()
	for _, what := range []string{"unknown", "eviction", "swap", "disrupted", "stale", "failover", "removal", "first taint at once", "unknown between passes"} {
		if s.seen[what] == 0 {
			s.t.Errorf("seed %d: the run never saw a %s; the simulation does not exercise it", s.seed, what)
		}
	}
	s.t.Logf("seed %d: %v", s.seed, s.seen)
}

// faults starts and ends random faults for this second.
func (s *sim) faults() {
	now := s.cl.now
	r := s.rng
	pick := func() *simAgent { return s.agents[r.IntN(len(s.agents))] }
	if r.Float64() < 0.03 {
		if a := pick(); !a.ghost {
			a.dead = true
		}
	}
	if r.Float64() < 0.03 {
		pick().dead = false
	}
	if r.Float64() < 0.005 {
		a := pick()
		a.sick = !a.sick
	}
	if s.zoneDown == "" && r.Float64() < 0.002 {
		s.zoneDown = s.zones[r.IntN(len(s.zones))]
		s.zoneDownEnd = now.Add(time.Duration(60+r.IntN(240)) * time.Second)
	}
	if s.zoneDown != "" && !now.Before(s.zoneDownEnd) {
		s.zoneDown = ""
	}
	// Stalls and failovers keep clear of the whole-cluster outage, so that
	// every run sees master disruption mode entered.
	calm := now.Before(s.allDownAt.Add(-3*time.Minute)) || now.After(s.allDownEnd)
	if calm && s.staleEnd.IsZero() && s.gapEnd.IsZero() && (r.Float64() < 0.002 || !now.Before(s.stallAt) && s.seen["stale"] == 0) {
		s.staleEnd = now.Add(time.Duration(10+r.IntN(80)) * time.Second)
		s.frozen = s.cl.observations()
		s.cl.fresh = false
		s.seen["stale"]++
	}
	if !s.staleEnd.IsZero() && !now.Before(s.staleEnd) {
		s.staleEnd, s.frozen, s.cl.fresh = time.Time{}, nil, true
	}
	if calm && s.gapEnd.IsZero() && s.staleEnd.IsZero() && (r.Float64() < 0.002 || !now.Before(s.failoverAt) && s.seen["failover"] == 0) {
		// Leadership moves: nothing runs for up to 15 s, then the new
		// leader starts from scratch.
		s.gapEnd = now.Add(time.Duration(r.IntN(16)) * time.Second)
		s.cl.core.Reset()
		s.seen["failover"]++
		s.afterFailover()
	}
	if !s.gapEnd.IsZero() && !now.Before(s.gapEnd) {
		s.gapEnd = time.Time{}
	}
}

func (s *sim) down(a *simAgent) bool {
	now := s.cl.now
	return a.ghost || a.dead || (s.zoneDown != "" && a.zone == s.zoneDown) ||
		(!now.Before(s.allDownAt) && now.Before(s.allDownEnd))
}

// tick runs one simulated second: agents, then the controller.
func (s *sim) tick() {
	cl := s.cl
	now := cl.now
	sec := int(now.Sub(t0) / time.Second)
	for _, a := range s.agents {
		if s.down(a) || (sec+a.phase)%10 != 0 {
			continue
		}
		want := corev1.ConditionTrue
		if a.sick {
			want = corev1.ConditionFalse
		}
		if a.useLease {
			cl.renewAt(a.name, now.Add(a.skew))
		}
		if !a.useLease || cl.ready(a.name) != want {
			cl.postAt(a.name, want, now.Add(a.skew))
		}
		a.lastBeat = now
	}
	if !s.gapEnd.IsZero() {
		return
	}
	s.due()
	if sec%5 == 0 {
		s.monitor()
	}
	s.taint()
	s.checkPace()
	s.checkState()
}

// failures makes about 5% of writes fail.
func (s *sim) failures() {
	for _, a := range s.agents {
		name := a.name
		if s.rng.Float64() < 0.05 {
			s.cl.failStatus[name] = true
		}
		if s.rng.Float64() < 0.05 {
			s.cl.failTaint[name] = true
		}
		if s.rng.Float64() < 0.05 {
			s.cl.failPods[name] = true
		}
	}
}

func (s *sim) monitor() {
	cl := s.cl
	fresh := cl.fresh
	before := map[string]*corev1.Node{}
	for k, v := range cl.nodes {
		before[k] = v
	}
	clear(cl.failStatus)
	clear(cl.failTaint)
	clear(cl.failPods)
	clear(cl.failed)
	s.failures()
	nUpdates := len(cl.statusUpdates)
	// The shell's 100 ms tainting step runs beside the pass's status
	// writes, on a cache that does not show them yet.
	cl.duringWrites = s.taintDuringWrites
	defer func() { cl.duringWrites = nil }()
	var res PassResult
	if fresh {
		res = cl.monitor()
	} else {
		res = cl.monitorWith(s.frozen)
	}
	// Stale view: nothing marked, nothing added.
	if !fresh && len(res.StatusUpdates) > 0 {
		s.fail("marked %s Unknown on a stale view", res.StatusUpdates[0].Node.Name)
	}
	s.checkMarked(before, nUpdates, "unknown")
	if res.Disruption == DisruptionEntered {
		s.seen["disrupted"]++
	}
	for k, v := range cl.nodes {
		s.statusAtPass[k] = readyStatus(v)
	}
	for _, u := range res.TaintUpdates {
		if len(u.Add) > 0 {
			if !fresh {
				s.fail("swapped %s's taint on a stale view", u.Node)
			}
			// A swap decided on an Unknown write that then failed is
			// skipped by the shell (the node's Ready moved on).
			if !cl.failed[u.Node] {
				s.checkAdd(u, before[u.Node])
			}
			s.seen["swap"]++
		} else {
			s.seen["removal"]++
		}
	}
	// Track each zone's rate for the spacing check.
	for _, z := range cl.core.View(cl.now).Zones {
		if z.TaintRate > s.maxRateSince[z.Zone] {
			s.maxRateSince[z.Zone] = z.TaintRate
		}
	}
	s.allDownAtPass = false
	if fresh {
		s.noteAllDown()
	}
}

// checkMarked checks the Unknown writes since the first from of the
// recorded status updates: no node whose agent beat within its grace
// period is marked. before is the view the writes were decided on.
func (s *sim) checkMarked(before map[string]*corev1.Node, from int, count string) {
	cl := s.cl
	for _, u := range cl.statusUpdates[from:] {
		a := s.byName[u.Node.Name]
		grace := s.cfg.NodeMonitorGracePeriod
		if readyCondition(before[a.name]) == nil {
			grace = s.cfg.NodeStartupGracePeriod
		}
		if age := cl.now.Sub(a.lastBeat); age <= grace {
			s.fail("%s marked Unknown %v after its agent's last heartbeat (grace %v)", a.name, age, grace)
		}
		s.seen[count]++
	}
}

// taintDuringWrites is the shell's 100 ms tainting step running beside a
// pass's (or a check's) status writes, on a cache that does not show them
// yet.
func (s *sim) taintDuringWrites() {
	for k, v := range s.cl.nodes {
		s.statusAtPass[k] = readyStatus(v)
	}
	s.taint()
}

// due runs the shell's check for nodes whose grace period ended since the
// last pass (every 100 ms in the shell, every simulated second here) and
// checks what it did as a pass's.
func (s *sim) due() {
	cl := s.cl
	fresh := cl.fresh
	before := maps.Clone(cl.nodes)
	nUpdates := len(cl.statusUpdates)
	cl.duringWrites = s.taintDuringWrites
	res, judged := cl.due()
	cl.duringWrites = nil
	if (!fresh || !cl.core.fresh) && (len(res.StatusUpdates) > 0 || len(res.TaintUpdates) > 0) {
		s.fail("the check between passes wrote on a stale view: %d statuses, %d taints", len(res.StatusUpdates), len(res.TaintUpdates))
	}
	s.checkMarked(before, nUpdates, "unknown between passes")
	if res.Disruption == DisruptionEntered {
		s.seen["disrupted"]++
	}
	for _, name := range judged {
		if n, ok := cl.nodes[name]; ok {
			s.statusAtPass[name] = readyStatus(n)
		}
	}
	for _, u := range res.TaintUpdates {
		if len(u.Add) > 0 {
			if !cl.failed[u.Node] {
				s.checkAdd(u, before[u.Node])
			}
			s.seen["swap"]++
		} else {
			s.seen["removal"]++
		}
	}
	if len(judged) > 0 && fresh {
		s.noteAllDown()
	}
}

// noteAllDown records whether every counted node is not Ready after a
// fresh pass or check.
func (s *sim) noteAllDown() {
	counted, ready := 0, 0
	for name, n := range s.cl.nodes {
		if !s.byName[name].excluded {
			counted++
			if readyStatus(n) == corev1.ConditionTrue {
				ready++
			}
		}
	}
	s.allDownAtPass = counted > 0 && ready == 0
}

// checkAdd checks a NoExecute taint the core asked to add: explained by the
// Ready status the controller saw at its last pass, and not already there.
func (s *sim) checkAdd(u TaintUpdate, node *corev1.Node) {
	if u.Ready != corev1.ConditionFalse && u.Ready != corev1.ConditionUnknown {
		s.fail("taint %+v stands for Ready=%q", u.Add, u.Ready)
	}
	if got := s.statusAtPass[u.Node]; got != u.Ready {
		s.fail("%s tainted for Ready=%s but the last pass left it %q", u.Node, u.Ready, got)
	}
	if len(u.Add) != 1 || noExecuteFor(u.Ready).key() != u.Add[0].Key {
		s.fail("%s: taint %v does not match Ready=%s", u.Node, u.Add, u.Ready)
	}
	if node != nil {
		if have, _ := noExecuteOf(node); have&noExecuteFor(u.Ready) != 0 {
			s.fail("%s already has %s: the taint would be doubled", u.Node, u.Add[0].Key)
		}
	}
	if s.allDownAtPass {
		s.fail("%s tainted while every zone is fully disrupted", u.Node)
	}
}

func (s *sim) taint() {
	cl := s.cl
	for _, u := range cl.core.Taint(cl.now, cl.fresh) {
		if !cl.fresh {
			s.fail("tainted %s on a stale view", u.Node)
		}
		before := cl.nodes[u.Node]
		if before != nil && readyStatus(before) != u.Ready {
			// The shell skips it: the cache does not show the status the
			// taint stands for (yet). The token is not spent.
			cl.applyTaint(u, true)
			s.skipped[u.Node] = cl.now
			continue
		}
		s.checkAdd(u, before)
		s.tokenUsed[u.Zone] = cl.now
		if !cl.applyTaint(u, true) {
			continue
		}
		if s.skipped[u.Node].Equal(cl.now) {
			// Skipped while the pass that marked it was writing, tainted
			// right after.
			s.seen["first taint at once"]++
		}
		s.seen["eviction"]++
		last, ok := s.lastEviction[u.Zone]
		if ok {
			rate := s.maxRateSince[u.Zone]
			if rate <= 0 {
				s.fail("zone %q tainted %s at rate 0", ZoneName(u.Zone), u.Node)
			}
			if gap := cl.now.Sub(last); gap < interval(rate) {
				s.fail("zone %q tainted %s %v after the previous one; the rate %v allows one every %v",
					ZoneName(u.Zone), u.Node, gap, rate, interval(rate))
			}
		}
		s.lastEviction[u.Zone] = cl.now
		s.maxRateSince[u.Zone] = s.cl.core.zones[u.Zone].bucket.rate
	}
}

// afterFailover restarts the spacing bookkeeping from what survives on the
// nodes: the latest timeAdded of a controller NoExecute taint per zone. The
// new leader must not taint faster than that evidence allows.
func (s *sim) afterFailover() {
	last := map[string]time.Time{}
	for _, n := range s.cl.nodes {
		if set, at := noExecuteOf(n); set != 0 && at.After(last[ZoneKey(n)]) {
			last[ZoneKey(n)] = at
		}
	}
	s.lastEviction = last
	s.tokenUsed = map[string]time.Time{}
	for k, v := range last {
		s.tokenUsed[k] = v
	}
	s.rateSince = map[string]time.Time{}
}

// checkPace checks the other side of the rate limit: a zone whose limiter
// has had a token for a while (no token spent and no rate change for one
// interval) taints the head of its queue at once when the cache shows the
// node needs it — upstream's limiter holds one token while unused, so a
// zone's first taint is not delayed.
func (s *sim) checkPace() {
	cl := s.cl
	now := cl.now
	for key, z := range cl.core.zones {
		r := z.bucket.rate
		if r != s.rate[key] || s.rateSince[key].IsZero() {
			s.rate[key], s.rateSince[key] = r, now
			continue
		}
		if r <= 0 || !cl.fresh || !cl.core.fresh || cl.core.disrupted || !s.gapEnd.IsZero() || !z.seeded {
			continue
		}
		iv := interval(r)
		if now.Sub(s.rateSince[key]) < iv || now.Sub(s.tokenUsed[key]) < iv {
			continue
		}
		head, ok := z.queue.head()
		if !ok {
			continue
		}
		n := cl.nodes[head]
		if n == nil || ZoneKey(n) != key {
			continue
		}
		want := noExecuteFor(readyStatus(n))
		if have, _ := noExecuteOf(n); want == 0 || have&want != 0 || cl.core.nodes[head].status != readyStatus(n) {
			continue
		}
		s.fail("zone %q has had a token for %v but %s (Ready=%s) waits untainted at the head of its queue",
			ZoneName(key), now.Sub(maxTime(s.tokenUsed[key], s.rateSince[key])), head, readyStatus(n))
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// checkState checks what must hold after every second.
func (s *sim) checkState() {
	cl := s.cl
	if s.allDownAtPass {
		for name, n := range cl.nodes {
			// (A removal that failed is retried at the next pass.)
			if set, _ := noExecuteOf(n); set != 0 && !cl.failed[name] {
				s.fail("%s has a NoExecute taint while every zone is fully disrupted", name)
			}
		}
	}
	for name, n := range cl.nodes {
		if readyStatus(n) != corev1.ConditionUnknown {
			continue
		}
		a := s.byName[name]
		grace := s.cfg.NodeMonitorGracePeriod
		if a.ghost {
			grace = s.cfg.NodeStartupGracePeriod
		}
		// A live agent posts Ready at its next beat, so an Unknown node's
		// last heartbeat is always older than the grace period.
		if age := cl.now.Sub(a.lastBeat); age <= grace {
			s.fail("%s is Unknown %v after its last heartbeat", name, age)
		}
	}
}

// quietPhase ends every fault except a few dead agents in zone a and checks
// that the controller settles: the dead nodes Unknown and tainted
// unreachable, every other node Ready and untainted.
func (s *sim) quietPhase() {
	cl := s.cl
	s.zoneDown, s.allDownEnd = "", s.allDownAt
	s.staleEnd, s.frozen, cl.fresh, s.gapEnd = time.Time{}, nil, true, time.Time{}
	var dead []string
	for _, a := range s.agents {
		a.sick = false
		a.dead = a.zone == "a" && !a.excluded && len(dead) < 4
		if a.dead {
			dead = append(dead, a.name)
		}
	}
	end := cl.now.Add(simQuiet)
	for cl.now.Before(end) {
		s.tick()
		cl.step(time.Second)
	}
	for _, a := range s.agents {
		n := cl.nodes[a.name]
		got, _ := noExecuteOf(n)
		switch {
		case a.ghost:
			if readyStatus(n) != corev1.ConditionUnknown || got != unreachableNoExecute {
				s.fail("ghost %s ends %q with %q, want Unknown and unreachable", a.name, readyStatus(n), got.key())
			}
		case a.dead:
			if readyStatus(n) != corev1.ConditionUnknown || got != unreachableNoExecute {
				s.fail("dead %s ends %q with %q, want Unknown and unreachable", a.name, readyStatus(n), got.key())
			}
		default:
			if readyStatus(n) != corev1.ConditionTrue || got != 0 {
				s.fail("live %s ends %q with %q, want True and no taint", a.name, readyStatus(n), got.key())
			}
		}
	}
}
