// Package runtime defines what the node agent needs from whatever runs a
// pod's containers: start them as the spec says, keep them running according
// to restartPolicy, stop them gracefully, report what it observed, and serve
// their logs. Implementations live in sub-packages (process: real processes;
// fake: simulated pods for nodeplane sim).
//
// The package owns only the contract and its data types. It makes no API
// calls: the agent turns runtime observations into Pod status
// (package podstatus) and writes them.
package runtime

import (
	"context"
	"errors"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Runtime runs pods. All methods are safe for concurrent use.
type Runtime interface {
	// SyncPod makes the pod's containers run as its spec says: init
	// containers in order, each to successful completion, then the regular
	// containers; exited containers are restarted according to
	// spec.restartPolicy with exponential back-off (10 s doubling to 5 min,
	// reset after a container ran 10 min). It is idempotent: calling it
	// again for a pod already running changes nothing. It returns once the
	// work is started, not when containers finish.
	SyncPod(ctx context.Context, pod *corev1.Pod) error
	// KillPod stops every container of the pod: SIGTERM to each
	// container's process group, SIGKILL to what is left after grace. It
	// returns when all processes are gone (or ctx ends). No restarts happen
	// after KillPod. Killing an unknown or already stopped pod is not an error.
	KillPod(ctx context.Context, uid types.UID, grace time.Duration) error
	// RemovePod forgets a stopped pod and deletes its state and logs.
	RemovePod(uid types.UID) error
	// PodStatus returns what the runtime last observed of the pod.
	PodStatus(uid types.UID) (PodStatus, bool)
	// Pods lists every pod the runtime knows, including pods adopted from
	// an earlier run of the agent (their processes kept running).
	Pods() []PodStatus
	// Logs writes a container's output to w as `kubectl logs` expects.
	Logs(ctx context.Context, uid types.UID, container string, opts LogOptions, w io.Writer) error
	// Version names the runtime for Node.status.nodeInfo.containerRuntimeVersion
	// (e.g. "nodeplane-process://0.3.0").
	Version() string
}

// ErrNotFound is wrapped by Logs (and other lookups) when the pod, the
// container or the requested (previous) instance does not exist, so callers
// can answer 404/400 without matching error strings.
var ErrNotFound = errors.New("not found")

// LogOptions mirror the kubelet's containerLogs query parameters.
type LogOptions struct {
	// Follow keeps streaming until ctx ends or the container stops for good.
	Follow bool
	// Previous reads the log of the previous (restarted) instance.
	Previous bool
	// Timestamps prefixes each line with its RFC3339Nano time and a space.
	Timestamps bool
	// TailLines, when >= 0, starts that many lines from the end (-1: all).
	TailLines int64
	// LimitBytes, when > 0, stops after that many bytes.
	LimitBytes int64
	// Since, when non-zero, skips lines written before it.
	Since time.Time
}

// PodStatus is the runtime's view of one pod.
type PodStatus struct {
	UID       types.UID
	Namespace string
	Name      string
	// Pod is the spec the pod was started with (persisted, so a restarted
	// agent can adopt it).
	Pod *corev1.Pod
	// InitContainers and Containers are in spec order; a container not
	// started yet is present with State.Waiting set (an empty Reason means
	// "not created yet": podstatus fills in the kubelet's default reason).
	InitContainers []ContainerStatus
	Containers     []ContainerStatus
	// Killed is true once KillPod was called for the pod.
	Killed bool
}

// ContainerStatus is one container as observed.
type ContainerStatus struct {
	Name string
	// State and LastTerminationState use the API types so the agent can copy them.
	State                corev1.ContainerState
	LastTerminationState corev1.ContainerState
	RestartCount         int32
	// PID of the running process (0 when not running).
	PID int
	// Image is what the spec asked to run (an executable name or path).
	Image string
	// ImageID names what was actually run, e.g. "process:///usr/bin/sleep"
	// (empty until the container was first started).
	ImageID string
	// ContainerID identifies the current (or last) instance, e.g.
	// "process://<pod uid>/<container>/<restart count>"; empty until the
	// container was first started.
	ContainerID string
}

// Notifier is told when something changed for a pod (a container started,
// exited, was restarted), so the agent can post status promptly rather than
// on its next periodic pass. Implementations must not block.
type Notifier func(uid types.UID)

// Volume is a pod volume the agent prepared on the node: the directory (or
// file) that containers mounting the volume see at their mountPath.
type Volume struct {
	// HostPath is the node path bind-mounted at each mountPath.
	HostPath string `json:"hostPath"`
	// ReadOnly forces every mount of the volume read-only (configMap and
	// secret volumes, a persistentVolumeClaim volume marked readOnly).
	ReadOnly bool `json:"readOnly,omitempty"`
}

// VolumeRuntime is a Runtime that can show prepared volumes to a pod's
// containers at their mountPaths. SyncPodWithVolumes is SyncPod with the
// pod's prepared volumes by name; like SyncPod it changes nothing for a pod
// the runtime already knows. The volumes are kept with the pod, so restarts
// (also after an agent restart) mount them again.
type VolumeRuntime interface {
	Runtime
	SyncPodWithVolumes(ctx context.Context, pod *corev1.Pod, volumes map[string]Volume) error
}
