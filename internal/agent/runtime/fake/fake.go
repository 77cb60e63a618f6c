// Package fake is a runtime.Runtime that runs nothing: pods are Running the
// moment they are synced and Terminated the moment they are killed. It
// serves `nodeplane sim`, where one process hosts thousands of simulated
// nodes, each with its own instance, so an instance is a mutex and a map —
// no goroutines, no files, a few hundred bytes per pod.
//
// The package owns only that bookkeeping; it must not start processes,
// touch the file system or talk to the API.
package fake

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/agent/runtime"
)

// Config configures a Runtime.
type Config struct {
	// NodeName appears in the simulated log line.
	NodeName string
	// Clock stamps container start and finish times (default: real clock).
	Clock clock.PassiveClock
	// Notify, when set, is called after a pod starts or is killed.
	Notify runtime.Notifier
}

// Runtime is the simulated runtime. The zero value is not usable; use New.
type Runtime struct {
	cfg  Config
	mu   sync.Mutex
	pods map[types.UID]*pod
}

// pod is all the state a simulated pod needs; statuses are built on demand.
type pod struct {
	spec       *corev1.Pod
	startedAt  metav1.Time
	finishedAt metav1.Time
	killed     bool
	exitCode   int32
}

var _ runtime.Runtime = (*Runtime)(nil)

// New returns an empty simulated runtime.
func New(cfg Config) *Runtime {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Runtime{cfg: cfg, pods: map[types.UID]*pod{}}
}

// SyncPod marks the pod Running (init containers Completed) at the clock's
// now; syncing a known pod changes nothing.
func (r *Runtime) SyncPod(_ context.Context, p *corev1.Pod) error {
	r.mu.Lock()
	if _, ok := r.pods[p.UID]; ok {
		r.mu.Unlock()
		return nil
	}
	r.pods[p.UID] = &pod{spec: p, startedAt: metav1.NewTime(r.cfg.Clock.Now())}
	r.mu.Unlock()
	r.notify(p.UID)
	return nil
}

// KillPod marks every container Terminated: exit 0 (Completed) for a
// graceful kill, 137 (Error, as after SIGKILL) when grace is zero.
func (r *Runtime) KillPod(_ context.Context, uid types.UID, grace time.Duration) error {
	r.mu.Lock()
	p, ok := r.pods[uid]
	if !ok || p.killed {
		r.mu.Unlock()
		return nil
	}
	p.killed = true
	p.finishedAt = metav1.NewTime(r.cfg.Clock.Now())
	if grace <= 0 {
		p.exitCode = 137
	}
	r.mu.Unlock()
	r.notify(uid)
	return nil
}

// RemovePod forgets the pod.
func (r *Runtime) RemovePod(uid types.UID) error {
	r.mu.Lock()
	delete(r.pods, uid)
	r.mu.Unlock()
	return nil
}

// PodStatus reports the simulated pod.
func (r *Runtime) PodStatus(uid types.UID) (runtime.PodStatus, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[uid]
	if !ok {
		return runtime.PodStatus{}, false
	}
	return p.status(), true
}

// Pods lists every simulated pod.
func (r *Runtime) Pods() []runtime.PodStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]runtime.PodStatus, 0, len(r.pods))
	for _, p := range r.pods {
		out = append(out, p.status())
	}
	return out
}

// Logs writes one fixed line for a known container.
func (r *Runtime) Logs(_ context.Context, uid types.UID, container string, opts runtime.LogOptions, w io.Writer) error {
	r.mu.Lock()
	p, ok := r.pods[uid]
	var spec *corev1.Pod
	var started metav1.Time
	if ok {
		spec, started = p.spec, p.startedAt
	}
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("pod %s: %w", uid, runtime.ErrNotFound)
	}
	if !hasContainer(spec, container) {
		return fmt.Errorf("container %q in pod %s/%s: %w", container, spec.Namespace, spec.Name, runtime.ErrNotFound)
	}
	if opts.Previous {
		return fmt.Errorf("previous terminated container %q in pod %q: %w", container, spec.Name, runtime.ErrNotFound)
	}
	if opts.TailLines == 0 || (!opts.Since.IsZero() && started.Time.Before(opts.Since)) {
		return nil
	}
	line := fmt.Sprintf("simulated container %s of pod %s/%s on node %s\n", container, spec.Namespace, spec.Name, r.cfg.NodeName)
	if opts.Timestamps {
		line = started.UTC().Format(time.RFC3339Nano) + " " + line
	}
	if opts.LimitBytes > 0 && int64(len(line)) > opts.LimitBytes {
		line = line[:opts.LimitBytes]
	}
	_, err := io.WriteString(w, line)
	return err
}

// Version names the simulated runtime.
func (r *Runtime) Version() string { return "nodeplane-fake://0.1.0" }

func (r *Runtime) notify(uid types.UID) {
	if r.cfg.Notify != nil {
		r.cfg.Notify(uid)
	}
}

func hasContainer(p *corev1.Pod, name string) bool {
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}

func (p *pod) status() runtime.PodStatus {
	s := runtime.PodStatus{
		UID:       p.spec.UID,
		Namespace: p.spec.Namespace,
		Name:      p.spec.Name,
		Pod:       p.spec,
		Killed:    p.killed,
	}
	for _, c := range p.spec.Spec.InitContainers {
		st := p.container(c)
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			// An ordinary init container has already run to completion.
			st.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				Reason: "Completed", StartedAt: p.startedAt, FinishedAt: p.startedAt, ContainerID: st.ContainerID,
			}}
		}
		s.InitContainers = append(s.InitContainers, st)
	}
	for _, c := range p.spec.Spec.Containers {
		s.Containers = append(s.Containers, p.container(c))
	}
	return s
}

func (p *pod) container(c corev1.Container) runtime.ContainerStatus {
	id := fmt.Sprintf("fake://%s/%s/0", p.spec.UID, c.Name)
	st := runtime.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: "fake://" + c.Image, ContainerID: id}
	if p.killed {
		reason := "Completed"
		if p.exitCode != 0 {
			reason = "Error"
		}
		st.State.Terminated = &corev1.ContainerStateTerminated{
			ExitCode: p.exitCode, Reason: reason, StartedAt: p.startedAt, FinishedAt: p.finishedAt, ContainerID: id,
		}
		return st
	}
	st.State.Running = &corev1.ContainerStateRunning{StartedAt: p.startedAt}
	return st
}
