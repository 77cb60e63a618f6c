package process

import (
	"fmt"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeplane/nodeplane/internal/agent/runtime"
)

// Restart back-off, as the kubelet's: the first restart is immediate, then
// 10 s doubling up to 5 min; a container that ran 10 min starts over.
const (
	backoffInitial = 10 * time.Second
	backoffMax     = 5 * time.Minute
	backoffReset   = 2 * backoffMax
)

type kind int

const (
	kindInit    kind = iota // runs to completion before the containers
	kindSidecar             // init container with restartPolicy Always
	kindRegular
)

// pod is the runtime's state of one pod. All fields are guarded by mu.
type pod struct {
	mu      sync.Mutex
	spec    *corev1.Pod
	dir     string
	killed  bool
	removed bool
	init    []*container
	regular []*container
	// volumes are the pod's prepared volumes by name (see mounts.go).
	volumes map[string]runtime.Volume
	// sidecarsStopAt is set once the pod is done and its sidecars were
	// sent SIGTERM; they get SIGKILL after it.
	sidecarsStopAt time.Time
}

// container is one container of a pod.
type container struct {
	name string
	spec corev1.Container
	kind kind
	dir  string
	rec  record
	// run identifies the current instance's processes (State running).
	run *runInfo
	// configErr is why the container cannot be created (reported as
	// Waiting/CreateContainerConfigError, retried on every pass).
	configErr string
}

func newPod(spec *corev1.Pod, dir string) *pod {
	p := &pod{spec: spec, dir: dir}
	for _, c := range spec.Spec.InitContainers {
		k := kindInit
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			k = kindSidecar
		}
		p.init = append(p.init, newContainer(c, k, dir))
	}
	for _, c := range spec.Spec.Containers {
		p.regular = append(p.regular, newContainer(c, kindRegular, dir))
	}
	return p
}

func newContainer(c corev1.Container, k kind, podDir string) *container {
	return &container{name: c.Name, spec: c, kind: k, dir: filepath.Join(podDir, c.Name), rec: record{Instance: -1}}
}

func (p *pod) all() []*container {
	out := make([]*container, 0, len(p.init)+len(p.regular))
	return append(append(out, p.init...), p.regular...)
}

func (p *pod) find(name string) *container {
	for _, c := range p.all() {
		if c.name == name {
			return c
		}
	}
	return nil
}

func (p *pod) restartPolicy() corev1.RestartPolicy {
	if p.spec.Spec.RestartPolicy == "" {
		return corev1.RestartPolicyAlways
	}
	return p.spec.Spec.RestartPolicy
}

// initialized: a regular container was started once, so the init
// containers are never run again.
func (p *pod) initialized() bool {
	for _, c := range p.regular {
		if c.rec.Instance >= 0 {
			return true
		}
	}
	return false
}

// initFailed: an init container failed and restartPolicy Never forbids
// retrying it, so the pod has failed.
func (p *pod) initFailed() bool {
	if p.restartPolicy() != corev1.RestartPolicyNever || p.initialized() {
		return false
	}
	for _, c := range p.init {
		if c.kind == kindInit && c.rec.State == stateExited && c.rec.Term.ExitCode != 0 {
			return true
		}
	}
	return false
}

// done: nothing of the pod will run again by itself (its regular containers
// all finished for good, or its initialization failed).
func (p *pod) done() bool {
	if p.killed || p.initFailed() {
		return true
	}
	if !p.initialized() {
		return false
	}
	for _, c := range p.regular {
		if c.rec.State != stateExited || p.wantsRestart(c) {
			return false
		}
	}
	return true
}

// wantsRestart tells whether an exited container is to run again.
func (p *pod) wantsRestart(c *container) bool {
	if p.killed || c.rec.State != stateExited {
		return false
	}
	code := c.rec.Term.ExitCode
	switch c.kind {
	case kindSidecar:
		return p.sidecarsStopAt.IsZero() && !p.done()
	case kindInit:
		return code != 0 && p.restartPolicy() != corev1.RestartPolicyNever && !p.initialized()
	}
	switch p.restartPolicy() {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	}
	return true
}

// ranLong: the last instance ran long enough to reset its back-off.
func (c *container) ranLong() bool {
	return !c.rec.LaunchedAt.IsZero() && c.rec.ExitSeenAt.Sub(c.rec.LaunchedAt) >= backoffReset
}

// restartDue: the back-off of an exited container has elapsed.
func (c *container) restartDue(now time.Time) bool {
	if c.rec.Backoff == 0 || c.ranLong() {
		return true
	}
	return !now.Before(c.rec.LaunchedAt.Add(c.rec.Backoff))
}

// nextBackoff is the back-off after starting a restart.
func (c *container) nextBackoff() time.Duration {
	if c.rec.Backoff == 0 || c.ranLong() {
		return backoffInitial
	}
	return min(2*c.rec.Backoff, backoffMax)
}

// toStart picks the containers to start now, in order: init containers one
// at a time (sidecars only need to be running before the next one starts),
// then every regular container not started yet or whose restart is due,
// and sidecars whose restart is due. A container whose configuration cannot
// be resolved is retried here on every pass.
func (p *pod) toStart(now time.Time) []*container {
	if p.killed || p.removed || p.done() {
		return nil
	}
	var out []*container
	if !p.initialized() {
		for _, c := range p.init {
			switch c.rec.State {
			case stateNone:
				return append(out, c)
			case stateStarting:
				return out
			case stateRunning:
				if c.kind == kindInit {
					return out
				}
			case stateExited:
				if c.kind == kindInit && c.rec.Term.ExitCode == 0 {
					continue
				}
				if p.wantsRestart(c) && c.restartDue(now) {
					out = append(out, c)
				}
				if c.kind == kindInit {
					return out
				}
			}
		}
	} else {
		for _, c := range p.init {
			if c.kind == kindSidecar && p.wantsRestart(c) && c.restartDue(now) {
				out = append(out, c)
			}
		}
	}
	for _, c := range p.regular {
		switch {
		case c.rec.State == stateNone:
			out = append(out, c)
		case p.wantsRestart(c) && c.restartDue(now):
			out = append(out, c)
		}
	}
	return out
}

// containerID names an instance: process://<pod uid>/<container>/<n>.
func (p *pod) containerID(c *container, n int) string {
	return fmt.Sprintf("process://%s/%s/%d", p.spec.UID, c.name, n)
}

// backoffMessage is the kubelet's CrashLoopBackOff message.
func (p *pod) backoffMessage(c *container) string {
	return fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)",
		c.rec.Backoff, c.name, p.spec.Name, p.spec.Namespace, p.spec.UID)
}
