// Package process is a runtime.Runtime that runs each container as a plain
// process on the node: the pod's image names the executable (on PATH or an
// absolute path), command and args follow Kubernetes' rules, env comes from
// literal values and fieldRefs.
//
// Containers must outlive the agent. Each container instance is run by a
// small shim process (ShimMain, the agent binary re-executed through
// Config.ShimCommand), started in its own session, which owns the
// container's output and records its pid and exit code in files under
// Config.StateDir. A new Runtime on the same StateDir adopts what it finds:
// running containers are watched, not started again; exits that happened
// meanwhile are reported; restart back-off resumes.
//
// One goroutine per Runtime polls the running instances (Config.PollInterval)
// and makes due restarts; there is no goroutine per container.
//
// The package owns the processes it starts and StateDir/pods; it must not
// talk to the API server (the agent turns PodStatus into API status, see
// package podstatus). Volumes prepared by the agent are bind-mounted into
// each container's own mount namespace (mounts.go). Not supported: resource limits, security
// contexts (processes run as the agent's user), probes, envFrom and
// secret/configMap env sources (non-optional ones keep the container in
// CreateContainerConfigError), log rotation.
package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/agent/runtime"
	"github.com/nodeplane/nodeplane/internal/version"
)

// Config configures a Runtime.
type Config struct {
	// StateDir holds pod state and logs (required), e.g.
	// <agent data dir>/runtime.
	StateDir string
	// ShimCommand is the command line that ends in ShimMain; the runtime
	// appends the shim's argument (required), e.g.
	// [os.Executable(), "agent-shim"].
	ShimCommand []string
	// NodeName and NodeIP resolve the spec.nodeName and status.hostIP /
	// status.podIP fieldRefs (processes share the node's network).
	NodeName string
	NodeIP   string
	// PodCIDRs, when set, returns the node's spec.podCIDRs; a container
	// started while the node has them gets NODEPLANE_POD_CIDR(S).
	PodCIDRs func() []string
	// Clock drives polling, back-off and kill grace periods (default: real).
	Clock clock.WithTicker
	// Logger (default: slog.Default()).
	Logger *slog.Logger
	// Notify, when set, is called after every observed change of a pod.
	Notify runtime.Notifier
	// PollInterval is how often container exits are noticed and due
	// restarts made (default 1 s, like the kubelet's relist). Restarts
	// happen at most this late after their back-off ends.
	PollInterval time.Duration
	// WaitInterval is how often KillPod checks whether the processes are
	// gone and how often a followed log is read (default 100 ms).
	WaitInterval time.Duration
}

// DefaultConfig returns the defaults; StateDir and ShimCommand must still be
// set.
func DefaultConfig() Config {
	return Config{
		Clock:        clock.RealClock{},
		Logger:       slog.Default(),
		PollInterval: time.Second,
		WaitInterval: 100 * time.Millisecond,
	}
}

// Runtime runs pods as processes. Create it with New and stop it with
// Close (which leaves the processes running).
type Runtime struct {
	cfg Config
	log *slog.Logger
	// agentPath and agentHome seed the containers' PATH and HOME.
	agentPath, agentHome string

	mu   sync.Mutex
	pods map[types.UID]*pod

	// children are shims this process started: they are reaped once they
	// exit (adopted shims belong to whoever inherited them).
	childMu  sync.Mutex
	children map[int]struct{}

	stop      chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once
}

var _ runtime.VolumeRuntime = (*Runtime)(nil)

// New loads and adopts the pods found in StateDir, then starts polling.
func New(cfg Config) (*Runtime, error) {
	def := DefaultConfig()
	if cfg.Clock == nil {
		cfg.Clock = def.Clock
	}
	if cfg.Logger == nil {
		cfg.Logger = def.Logger
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = def.PollInterval
	}
	if cfg.WaitInterval <= 0 {
		cfg.WaitInterval = def.WaitInterval
	}
	if cfg.StateDir == "" {
		return nil, errors.New("process runtime: StateDir is required")
	}
	if len(cfg.ShimCommand) == 0 {
		return nil, errors.New("process runtime: ShimCommand is required")
	}
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, "pods"), 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	r := &Runtime{
		cfg:       cfg,
		log:       cfg.Logger.With("component", "process-runtime"),
		agentPath: os.Getenv("PATH"),
		agentHome: os.Getenv("HOME"),
		pods:      map[types.UID]*pod{},
		children:  map[int]struct{}{},
		stop:      make(chan struct{}),
		stopped:   make(chan struct{}),
	}
	if err := r.loadPods(); err != nil {
		return nil, err
	}
	r.pollAll()
	for uid, p := range r.pods {
		r.log.Info("adopted pod", "pod", p.spec.Namespace+"/"+p.spec.Name, "uid", uid, "killed", p.killed)
	}
	go r.loop()
	return r, nil
}

// Close stops polling. Containers keep running; a later New adopts them.
func (r *Runtime) Close() {
	r.closeOnce.Do(func() {
		close(r.stop)
		<-r.stopped
		r.reap()
	})
}

// Version names the runtime.
func (r *Runtime) Version() string { return "nodeplane-process://" + version.Version }

func (r *Runtime) loop() {
	defer close(r.stopped)
	t := r.cfg.Clock.NewTicker(r.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C():
			r.pollAll()
		}
	}
}

func (r *Runtime) lookup(uid types.UID) *pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pods[uid]
}

func (r *Runtime) snapshot() []*pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*pod, 0, len(r.pods))
	for _, p := range r.pods {
		out = append(out, p)
	}
	return out
}

func (r *Runtime) notify(uid types.UID) {
	if r.cfg.Notify != nil {
		r.cfg.Notify(uid)
	}
}

// pollAll notices exits, makes due restarts and reaps finished shims.
func (r *Runtime) pollAll() {
	for _, p := range r.snapshot() {
		p.mu.Lock()
		changed := !p.removed && r.syncLocked(p)
		uid := p.spec.UID
		p.mu.Unlock()
		if changed {
			r.notify(uid)
		}
	}
	r.reap()
}

// syncLocked is one pass over a pod: observe exits, stop sidecars of a pod
// that is done, start what is due. It reports whether anything changed.
func (r *Runtime) syncLocked(p *pod) bool {
	now := r.cfg.Clock.Now()
	changed := false
	for _, c := range p.all() {
		if r.observeExit(p, c, now) {
			changed = true
		}
	}
	r.stopSidecars(p, now)
	// Start in rounds: starting one init container can make the next one
	// (or the regular containers) due, and a first restart is immediate.
	for range 2*len(p.all()) + 1 {
		due := p.toStart(now)
		if len(due) == 0 {
			break
		}
		progressed := false
		for _, c := range due {
			before, beforeErr := c.rec, c.configErr
			r.start(p, c, now)
			if c.rec.Instance != before.Instance || c.rec.State != before.State || c.configErr != beforeErr {
				changed = true
			}
			if c.rec.Instance != before.Instance {
				progressed = true
			}
		}
		if !progressed {
			break
		}
	}
	return changed
}

// observeExit records the end of a running (or starting) instance: from
// the shim's exit file, or as lost when neither the shim nor the container
// is alive and no exit was recorded.
func (r *Runtime) observeExit(p *pod, c *container, now time.Time) bool {
	if c.rec.State != stateRunning && c.rec.State != stateStarting {
		return false
	}
	exitPath := instanceFile(c.dir, c.rec.Instance, ".exit")
	var ex exitInfo
	if readJSON(exitPath, &ex) != nil {
		if c.run != nil && (alive(c.run.ShimPID, c.run.ShimStart) || alive(c.run.PID, c.run.PIDStart)) {
			return false
		}
		// The shim may have finished between the two checks.
		if readJSON(exitPath, &ex) != nil {
			ex = exitInfo{
				ExitCode:   137,
				Reason:     "ContainerStatusUnknown",
				Message:    "The container could not be located when the runtime looked for it",
				StartedAt:  c.rec.StartedAt,
				FinishedAt: now,
			}
		}
	}
	r.finish(p, c, ex, now)
	return true
}

// finish records that the current instance ended.
func (r *Runtime) finish(p *pod, c *container, ex exitInfo, now time.Time) {
	if ex.StartedAt.IsZero() {
		ex.StartedAt = c.rec.StartedAt
	}
	c.rec.State = stateExited
	c.rec.Term = &ex
	c.rec.ExitSeenAt = now
	c.run = nil
	if err := c.save(); err != nil {
		r.log.Error("save container state", "pod", p.spec.Name, "container", c.name, "err", err)
	}
	r.log.Debug("container exited", "pod", p.spec.Namespace+"/"+p.spec.Name, "container", c.name,
		"instance", c.rec.Instance, "exitCode", ex.ExitCode, "reason", ex.Reason)
}

// start launches the next instance of c (called with p.mu held).
func (r *Runtime) start(p *pod, c *container, now time.Time) {
	host := hostEnv{nodeIP: r.cfg.NodeIP, path: r.agentPath, home: r.agentHome}
	if r.cfg.PodCIDRs != nil {
		host.podCIDRs = r.cfg.PodCIDRs()
	}
	l, err := resolveLaunch(p.spec, &c.spec, host)
	var cfgErr *configError
	if errors.As(err, &cfgErr) {
		c.configErr = cfgErr.msg
		return
	}
	c.configErr = ""

	n := c.rec.Instance + 1
	if c.rec.Instance >= 0 {
		c.rec.Backoff = c.nextBackoff()
		c.rec.LastTerm = c.rec.Term
	}
	c.rec.Instance = n
	c.rec.Term = nil
	c.rec.State = stateStarting
	c.rec.LaunchedAt = now
	c.rec.ExitSeenAt = time.Time{}
	c.rec.StartedAt = time.Time{}
	c.run = nil
	removeInstance(c.dir, n-2)

	startError := func(err error) {
		r.finish(p, c, exitInfo{ExitCode: exitCodeStartError, Reason: "StartError", Message: err.Error(), StartedAt: now, FinishedAt: now}, now)
	}
	if err != nil {
		startError(err)
		return
	}
	c.rec.ImageID = "process://" + l.path
	mounts, err := containerMounts(&c.spec, p.volumes)
	if err != nil {
		startError(err)
		return
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		startError(fmt.Errorf("create container dir: %w", err))
		return
	}
	spec := shimSpec{
		Argv: l.argv, Path: l.path, Env: l.env, Dir: l.dir,
		LogPath:  instanceFile(c.dir, n, ".log"),
		RunPath:  instanceFile(c.dir, n, ".run"),
		ExitPath: instanceFile(c.dir, n, ".exit"),
		Mounts:   mounts,
	}
	if len(mounts) > 0 {
		spec.Self = r.cfg.ShimCommand
	}
	specPath := instanceFile(c.dir, n, ".spec.json")
	if err := writeJSON(specPath, spec); err != nil {
		startError(err)
		return
	}
	if err := c.save(); err != nil {
		startError(err)
		return
	}
	if err := r.launchShim(specPath); err != nil {
		startError(err)
		return
	}
	var info runInfo
	if err := readJSON(spec.RunPath, &info); err == nil {
		c.run = &info
		c.rec.State = stateRunning
		c.rec.StartedAt = info.StartedAt
		if err := c.save(); err != nil {
			r.log.Error("save container state", "pod", p.spec.Name, "container", c.name, "err", err)
		}
		r.log.Debug("container started", "pod", p.spec.Namespace+"/"+p.spec.Name, "container", c.name, "instance", n, "pid", info.PID)
		return
	}
	var ex exitInfo
	if err := readJSON(spec.ExitPath, &ex); err == nil {
		r.finish(p, c, ex, now)
		return
	}
	startError(errors.New("the shim exited before starting the container"))
}

// launchShim starts a shim for the spec file and waits until it reports
// that the container started (or could not).
func (r *Runtime) launchShim(specPath string) error {
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start shim: %w", err)
	}
	defer readyR.Close()
	args := append(append([]string{}, r.cfg.ShimCommand[1:]...), specPath)
	cmd := exec.Command(r.cfg.ShimCommand[0], args...)
	cmd.ExtraFiles = []*os.File{readyW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return fmt.Errorf("start shim: %w", err)
	}
	pid := cmd.Process.Pid
	r.childMu.Lock()
	r.children[pid] = struct{}{}
	r.childMu.Unlock()
	_ = cmd.Process.Release()
	// One byte when the run or exit file is written; EOF if the shim died.
	var b [1]byte
	_, _ = readyR.Read(b[:])
	return nil
}

// reap collects the exit status of shims this process started.
func (r *Runtime) reap() {
	r.childMu.Lock()
	defer r.childMu.Unlock()
	for pid := range r.children {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if got == pid || errors.Is(err, syscall.ECHILD) {
			delete(r.children, pid)
		}
	}
}

// reapChild waits for a shim this process started that has finished its
// work (it exits right after writing the exit file).
func (r *Runtime) reapChild(pid int) {
	r.childMu.Lock()
	_, ours := r.children[pid]
	delete(r.children, pid)
	r.childMu.Unlock()
	if ours {
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
	}
}

// stopSidecars sends SIGTERM to the sidecars of a pod whose regular
// containers are done, and SIGKILL after its termination grace period.
func (r *Runtime) stopSidecars(p *pod, now time.Time) {
	if p.killed || !p.done() {
		return
	}
	var running []*container
	for _, c := range p.init {
		if c.kind == kindSidecar && c.rec.State == stateRunning && c.run != nil {
			running = append(running, c)
		}
	}
	if len(running) == 0 {
		return
	}
	sig := syscall.SIGTERM
	switch {
	case p.sidecarsStopAt.IsZero():
		grace := 30 * time.Second
		if g := p.spec.Spec.TerminationGracePeriodSeconds; g != nil {
			grace = time.Duration(*g) * time.Second
		}
		p.sidecarsStopAt = now.Add(grace)
	case !now.Before(p.sidecarsStopAt):
		sig = syscall.SIGKILL
	default:
		return
	}
	for _, c := range running {
		if err := signalGroup(c.run.PID, c.run.PIDStart, sig); err != nil {
			r.log.Warn("stop sidecar", "pod", p.spec.Name, "container", c.name, "err", err)
		}
	}
}

// SyncPod persists the pod and starts what is due; later passes of the poll
// loop keep it running. Syncing a known pod (even a killed one) changes
// nothing; the spec of a known pod is not updated.
func (r *Runtime) SyncPod(ctx context.Context, spec *corev1.Pod) error {
	return r.SyncPodWithVolumes(ctx, spec, nil)
}

// SyncPodWithVolumes is SyncPod for a pod whose volumes the agent prepared:
// each container sees them at its volumeMounts' paths through a mount
// namespace of its own (see mounts.go).
func (r *Runtime) SyncPodWithVolumes(_ context.Context, spec *corev1.Pod, volumes map[string]runtime.Volume) error {
	r.mu.Lock()
	if _, ok := r.pods[spec.UID]; ok {
		r.mu.Unlock()
		return nil
	}
	p := newPod(spec.DeepCopy(), r.podDir(spec.UID))
	p.volumes = volumes
	p.mu.Lock()
	r.pods[spec.UID] = p
	r.mu.Unlock()

	err := r.createPodDir(p)
	if err != nil {
		p.removed = true
		p.mu.Unlock()
		r.mu.Lock()
		delete(r.pods, spec.UID)
		r.mu.Unlock()
		return err
	}
	r.syncLocked(p)
	p.mu.Unlock()
	r.notify(spec.UID)
	return nil
}

func (r *Runtime) createPodDir(p *pod) error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return fmt.Errorf("create pod dir: %w", err)
	}
	for _, c := range p.all() {
		if err := os.MkdirAll(c.dir, 0o700); err != nil {
			return fmt.Errorf("create container dir: %w", err)
		}
	}
	if len(p.volumes) > 0 {
		if err := writeJSON(filepath.Join(p.dir, volumesFile), p.volumes); err != nil {
			return fmt.Errorf("save volumes of pod %s/%s: %w", p.spec.Namespace, p.spec.Name, err)
		}
	}
	if err := writeJSON(filepath.Join(p.dir, podFile), p.spec); err != nil {
		return fmt.Errorf("save pod %s/%s: %w", p.spec.Namespace, p.spec.Name, err)
	}
	return nil
}

// KillPod stops the pod's containers: SIGTERM to every container's process
// group, SIGKILL after grace, then waits until each one's exit is recorded.
func (r *Runtime) KillPod(ctx context.Context, uid types.UID, grace time.Duration) error {
	p := r.lookup(uid)
	if p == nil {
		return nil
	}
	p.mu.Lock()
	if !p.killed {
		p.killed = true
		if err := os.WriteFile(filepath.Join(p.dir, killedFile), nil, 0o600); err != nil {
			r.log.Error("save killed marker", "pod", p.spec.Name, "err", err)
		}
	}
	type target struct {
		c     *container
		pid   int
		start uint64
		shim  int
	}
	var targets []target
	for _, c := range p.all() {
		if c.rec.State == stateRunning && c.run != nil {
			targets = append(targets, target{c: c, pid: c.run.PID, start: c.run.PIDStart, shim: c.run.ShimPID})
		}
	}
	p.mu.Unlock()
	defer r.notify(uid)

	signal := func(sig syscall.Signal) {
		for _, t := range targets {
			if err := signalGroup(t.pid, t.start, sig); err != nil {
				r.log.Warn("signal container", "pod", p.spec.Name, "container", t.c.name, "signal", sig, "err", err)
			}
		}
	}
	signal(syscall.SIGTERM)
	deadline := r.cfg.Clock.Now().Add(grace)
	killed := false
	for {
		p.mu.Lock()
		now := r.cfg.Clock.Now()
		left := 0
		for _, t := range targets {
			r.observeExit(p, t.c, now)
			if t.c.rec.State == stateRunning {
				left++
			}
		}
		p.mu.Unlock()
		if left == 0 {
			for _, t := range targets {
				r.reapChild(t.shim)
			}
			return nil
		}
		if !killed && !now.Before(deadline) {
			signal(syscall.SIGKILL)
			killed = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kill pod %s: %w", uid, ctx.Err())
		case <-r.cfg.Clock.After(r.cfg.WaitInterval):
		}
	}
}

// RemovePod forgets a stopped pod and deletes its state and logs.
func (r *Runtime) RemovePod(uid types.UID) error {
	p := r.lookup(uid)
	if p == nil {
		return nil
	}
	p.mu.Lock()
	for _, c := range p.all() {
		if c.rec.State == stateRunning || c.rec.State == stateStarting {
			p.mu.Unlock()
			return fmt.Errorf("remove pod %s: container %q is still running", uid, c.name)
		}
	}
	p.removed = true
	err := os.RemoveAll(p.dir)
	p.mu.Unlock()
	r.mu.Lock()
	delete(r.pods, uid)
	r.mu.Unlock()
	if err != nil {
		return fmt.Errorf("remove pod %s: %w", uid, err)
	}
	return nil
}

// PodStatus returns the pod as last observed.
func (r *Runtime) PodStatus(uid types.UID) (runtime.PodStatus, bool) {
	p := r.lookup(uid)
	if p == nil {
		return runtime.PodStatus{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.removed {
		return runtime.PodStatus{}, false
	}
	return p.status(), true
}

// Pods lists every known pod, adopted ones included.
func (r *Runtime) Pods() []runtime.PodStatus {
	pods := r.snapshot()
	out := make([]runtime.PodStatus, 0, len(pods))
	for _, p := range pods {
		p.mu.Lock()
		if !p.removed {
			out = append(out, p.status())
		}
		p.mu.Unlock()
	}
	return out
}

// status builds the runtime view (p.mu held). The returned Pod is shared:
// callers must not modify it.
func (p *pod) status() runtime.PodStatus {
	s := runtime.PodStatus{
		UID:       p.spec.UID,
		Namespace: p.spec.Namespace,
		Name:      p.spec.Name,
		Pod:       p.spec,
		Killed:    p.killed,
	}
	for _, c := range p.init {
		s.InitContainers = append(s.InitContainers, p.containerStatus(c))
	}
	for _, c := range p.regular {
		s.Containers = append(s.Containers, p.containerStatus(c))
	}
	return s
}

func (p *pod) containerStatus(c *container) runtime.ContainerStatus {
	st := runtime.ContainerStatus{
		Name:         c.name,
		Image:        c.spec.Image,
		ImageID:      c.rec.ImageID,
		RestartCount: int32(max(c.rec.Instance, 0)),
	}
	if c.rec.Instance >= 0 {
		st.ContainerID = p.containerID(c, c.rec.Instance)
	}
	switch c.rec.State {
	case stateNone:
		st.State.Waiting = &corev1.ContainerStateWaiting{}
		if c.configErr != "" {
			st.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: c.configErr}
		}
	case stateStarting:
		st.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
		st.LastTerminationState = p.terminated(c, c.rec.LastTerm, c.rec.Instance-1)
	case stateRunning:
		st.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.rec.StartedAt)}
		if c.run != nil {
			st.PID = c.run.PID
		}
		st.LastTerminationState = p.terminated(c, c.rec.LastTerm, c.rec.Instance-1)
	case stateExited:
		if p.wantsRestart(c) {
			reason, msg := "CrashLoopBackOff", p.backoffMessage(c)
			if c.configErr != "" {
				reason, msg = "CreateContainerConfigError", c.configErr
			}
			st.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: msg}
			st.LastTerminationState = p.terminated(c, c.rec.Term, c.rec.Instance)
		} else {
			st.State = p.terminated(c, c.rec.Term, c.rec.Instance)
			st.LastTerminationState = p.terminated(c, c.rec.LastTerm, c.rec.Instance-1)
		}
	}
	return st
}

func (p *pod) terminated(c *container, ex *exitInfo, n int) corev1.ContainerState {
	if ex == nil || n < 0 {
		return corev1.ContainerState{}
	}
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode:    ex.ExitCode,
		Signal:      ex.Signal,
		Reason:      ex.Reason,
		Message:     ex.Message,
		StartedAt:   metav1.NewTime(ex.StartedAt),
		FinishedAt:  metav1.NewTime(ex.FinishedAt),
		ContainerID: p.containerID(c, n),
	}}
}
