// Package pods runs the pods bound to this node: it admits each new pod the
// way the kubelet does (fits allocatable, matches node selectors, tolerates
// NoExecute taints), hands admitted pods to the runtime, posts their status
// as the runtime reports changes, and for a pod being deleted stops its
// containers (SIGTERM, then SIGKILL after the grace period), posts the final
// status and removes it from the API with grace 0. Pods the runtime still
// runs from an earlier agent process are adopted, not started again; ones
// the API no longer has are stopped and forgotten.
//
// Mirror pods (annotation kubernetes.io/config.mirror) are never run: they
// describe static pods, and nodeplane runs none, so every mirror pod bound
// to this node is an orphan. The manager deletes it from the API (as the
// kubelet deletes a mirror pod whose static pod is gone) without starting
// it or writing its status.
//
// The Manager is fed by the caller (a reflector over pods with
// spec.nodeName=<node>) through Replace/Upsert/Delete; it never lists or
// watches by itself and never touches the Node.
package pods

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/agent/podstatus"
	"github.com/nodeplane/nodeplane/internal/agent/runtime"
)

// DefaultGracePeriod applies when a pod being deleted has no grace period.
const DefaultGracePeriod = 30 * time.Second

// Client is what the manager needs from the API.
type Client interface {
	// UpdatePodStatus writes pod.Status through pods/status (optimistic
	// concurrency on pod.ResourceVersion).
	UpdatePodStatus(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error)
	// DeletePod removes the pod with grace 0, only if its UID is uid.
	DeletePod(ctx context.Context, namespace, name string, uid types.UID) error
}

// Volumes prepares pod volumes on the node (package volumes).
type Volumes interface {
	// Prepare makes the pod's volumes ready and returns them by name; a
	// *volumes.Error says why not (yet).
	Prepare(ctx context.Context, pod *corev1.Pod, node *corev1.Node) (map[string]runtime.Volume, error)
	// Track records the volumes in use of a pod the runtime already runs.
	Track(ctx context.Context, pod *corev1.Pod)
	// Release says the pod's containers are done with its volumes.
	Release(uid types.UID)
	// Cleanup removes what Prepare made for a pod that is gone.
	Cleanup(uid types.UID) error
	// CleanupOrphans removes the volumes of pods keep rejects.
	CleanupOrphans(keep func(types.UID) bool)
}

// Recorder records pod events.
type Recorder interface {
	PodEvent(pod *corev1.Pod, eventType, reason, message string)
}

// Config configures a Manager.
type Config struct {
	NodeName string
	Runtime  runtime.Runtime
	Client   Client
	// Node returns this node as last seen (for admission).
	Node func() (*corev1.Node, bool)
	// HostIPs are the node's addresses, reported as hostIP/podIP (pods use
	// the host network).
	HostIPs  func() []string
	Recorder Recorder
	Clock    clock.Clock
	Logger   *slog.Logger
	// Workers sync pods concurrently (default 4). Inline (true) instead
	// syncs in the caller of Upsert/Delete/Notify — for nodeplane sim,
	// whose fake runtime never blocks.
	Workers int
	Inline  bool
	// ShuttingDown, when set and true, makes admission refuse every new
	// pod with reason NodeShutdown (SPEC GNS-6).
	ShuttingDown func() bool
	// PressureAdmit, when set, is the eviction manager's admission: it may
	// refuse a new pod while the node is under resource pressure.
	PressureAdmit func(pod *corev1.Pod) (ok bool, reason, message string)
	// Volumes, when set, prepares the volumes of pods that have some
	// before they start (the runtime must then be a
	// runtime.VolumeRuntime); without it volumes are ignored (nodeplane
	// sim).
	Volumes Volumes
}

// Manager keeps the runtime in line with the pods bound to this node.
type Manager struct {
	cfg   Config
	queue workqueue.TypedRateLimitingInterface[types.UID]

	// admitMu serializes admission with the start of the admitted pod, so
	// that each admission sees the pods admitted before it.
	admitMu sync.Mutex

	mu       sync.Mutex
	pods     map[types.UID]*corev1.Pod // as the API has them
	synced   bool
	rejected map[types.UID]rejection
	stopping map[types.UID]bool // KillPod running
	// shutdown are the pods stopped by a graceful node shutdown: once
	// stopped their status is the shutdown's final one (GNS-5).
	shutdown map[types.UID]bool
	// evicted are the pods stopped by node-pressure eviction, with the
	// eviction message their final status carries.
	evicted map[types.UID]string
	// mountErr is the last volume problem reported for a pod that waits
	// for its volumes (an event is recorded when it changes).
	mountErr map[types.UID]string
}

// rejection is why admission refused a pod; kept so that the Failed status
// can be posted again if writing it failed.
type rejection struct{ reason, message string }

func (r rejection) status(pod *corev1.Pod, now metav1.Time) corev1.PodStatus {
	if r.reason == podstatus.ReasonNodeShutdown {
		return podstatus.RejectedForShutdown(pod, now)
	}
	return podstatus.Rejected(pod, r.reason, r.message, now)
}

// New returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.NodeName == "" || cfg.Runtime == nil || cfg.Client == nil || cfg.Node == nil {
		return nil, errors.New("pods: NodeName, Runtime, Client and Node are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HostIPs == nil {
		cfg.HostIPs = func() []string { return nil }
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	m := &Manager{
		cfg:      cfg,
		pods:     map[types.UID]*corev1.Pod{},
		rejected: map[types.UID]rejection{},
		stopping: map[types.UID]bool{},
		shutdown: map[types.UID]bool{},
		evicted:  map[types.UID]string{},
		mountErr: map[types.UID]string{},
	}
	if !cfg.Inline {
		m.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](200*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "pods", Clock: asWithTicker(cfg.Clock)})
	}
	return m, nil
}

func asWithTicker(c clock.Clock) clock.WithTicker {
	if wt, ok := c.(clock.WithTicker); ok {
		return wt
	}
	return clock.RealClock{}
}

// Run processes queued pods until ctx ends (not needed in Inline mode).
func (m *Manager) Run(ctx context.Context) {
	if m.cfg.Inline {
		<-ctx.Done()
		return
	}
	var wg sync.WaitGroup
	for range m.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	m.queue.ShutDown()
	wg.Wait()
}

func (m *Manager) next(ctx context.Context) bool {
	uid, quit := m.queue.Get()
	if quit {
		return false
	}
	defer m.queue.Done(uid)
	if err := m.sync(ctx, uid); err != nil {
		if ctx.Err() == nil {
			m.cfg.Logger.Warn("pod sync failed", "podUID", uid, "err", err)
		}
		m.queue.AddRateLimited(uid)
		return true
	}
	m.queue.Forget(uid)
	return true
}

func (m *Manager) enqueue(uid types.UID) {
	if m.cfg.Inline {
		if err := m.sync(context.Background(), uid); err != nil {
			m.cfg.Logger.Debug("pod sync failed", "podUID", uid, "err", err)
		}
		return
	}
	m.queue.Add(uid)
}

// Replace sets the full list of pods bound to the node (initial list, or a
// relist after the watch broke). Pods the runtime runs but the list lacks
// are stopped. New pods are admitted oldest first, as the kubelet does.
func (m *Manager) Replace(pods []*corev1.Pod) {
	pods = append([]*corev1.Pod(nil), pods...)
	sort.SliceStable(pods, func(i, j int) bool { return pods[i].CreationTimestamp.Before(&pods[j].CreationTimestamp) })
	m.mu.Lock()
	old := m.pods
	m.pods = make(map[types.UID]*corev1.Pod, len(pods))
	for _, p := range pods {
		m.pods[p.UID] = p
	}
	m.synced = true
	m.mu.Unlock()
	for uid := range old {
		if _, ok := m.pods[uid]; !ok {
			m.enqueue(uid)
		}
	}
	for _, p := range pods {
		m.enqueue(p.UID)
	}
	running := map[types.UID]bool{}
	for _, rs := range m.cfg.Runtime.Pods() {
		running[rs.UID] = true
		if _, ok := m.pods[rs.UID]; !ok {
			m.enqueue(rs.UID)
		}
	}
	if m.cfg.Volumes != nil {
		m.cfg.Volumes.CleanupOrphans(func(uid types.UID) bool { return running[uid] || m.get(uid) != nil })
	}
}

// NodeChanged resyncs the pods waiting for their volumes (an attach shows
// in the Node's status.volumesAttached).
func (m *Manager) NodeChanged() {
	m.mu.Lock()
	var waiting []types.UID
	for uid := range m.mountErr {
		waiting = append(waiting, uid)
	}
	m.mu.Unlock()
	for _, uid := range waiting {
		m.enqueue(uid)
	}
}

// Upsert records an added or changed pod.
func (m *Manager) Upsert(p *corev1.Pod) {
	m.mu.Lock()
	m.pods[p.UID] = p
	m.mu.Unlock()
	m.enqueue(p.UID)
}

// Delete records a pod gone from the API.
func (m *Manager) Delete(p *corev1.Pod) {
	m.mu.Lock()
	delete(m.pods, p.UID)
	m.mu.Unlock()
	m.enqueue(p.UID)
}

// Notify is the runtime's change callback.
func (m *Manager) Notify(uid types.UID) {
	m.mu.Lock()
	synced := m.synced
	m.mu.Unlock()
	if synced {
		m.enqueue(uid)
	}
}

// Count returns how many pods are bound to the node and how many run.
func (m *Manager) Count() (bound, running int) {
	m.mu.Lock()
	bound = len(m.pods)
	m.mu.Unlock()
	return bound, len(m.cfg.Runtime.Pods())
}

func (m *Manager) get(uid types.UID) *corev1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pods[uid]
}

func (m *Manager) sync(ctx context.Context, uid types.UID) error {
	pod := m.get(uid)
	rs, inRuntime := m.cfg.Runtime.PodStatus(uid)

	if pod == nil {
		// Gone from the API: stop whatever still runs and forget it.
		if !inRuntime {
			m.forget(uid)
			return m.cleanupVolumes(uid)
		}
		m.cfg.Logger.Info("stopping pod no longer bound to this node", "pod", rs.Namespace+"/"+rs.Name)
		if err := m.cfg.Runtime.KillPod(ctx, uid, DefaultGracePeriod); err != nil {
			return fmt.Errorf("stop pod %s/%s: %w", rs.Namespace, rs.Name, err)
		}
		m.forget(uid)
		if err := m.cfg.Runtime.RemovePod(uid); err != nil {
			return err
		}
		return m.cleanupVolumes(uid)
	}
	if IsMirror(pod) {
		return m.removeMirror(ctx, pod, inRuntime)
	}
	if pod.DeletionTimestamp != nil {
		return m.terminate(ctx, pod, rs, inRuntime)
	}
	terminal := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	if !inRuntime {
		if r, ok := m.rejection(uid); ok {
			if pod.Status.Phase == corev1.PodFailed {
				return nil
			}
			// The first write of the rejection failed (or its result has
			// not reached us yet): post it again, never admit.
			return m.writeStatus(ctx, pod, r.status(pod, metav1.NewTime(m.now())))
		}
		if terminal {
			return nil
		}
		node, ok := m.cfg.Node()
		if !ok {
			return errors.New("node not known yet")
		}
		m.admitMu.Lock()
		ok, reason, msg := podstatus.Admit(pod, node, m.admitted(uid))
		if ok && m.cfg.PressureAdmit != nil {
			ok, reason, msg = m.cfg.PressureAdmit(pod)
		}
		if m.cfg.ShuttingDown != nil && m.cfg.ShuttingDown() {
			ok, reason, msg = false, podstatus.ReasonNodeShutdown, podstatus.MessageNodeShutdown
		}
		if !ok {
			m.admitMu.Unlock()
			r := rejection{reason, msg}
			m.markRejected(uid, r)
			m.cfg.Logger.Info("pod rejected", "pod", pod.Namespace+"/"+pod.Name, "reason", reason, "message", msg)
			if m.cfg.Recorder != nil {
				m.cfg.Recorder.PodEvent(pod, corev1.EventTypeWarning, reason, msg)
			}
			return m.writeStatus(ctx, pod, r.status(pod, metav1.NewTime(m.now())))
		}
		vols, err := m.prepareVolumes(ctx, pod, node)
		if err != nil {
			m.admitMu.Unlock()
			return m.volumesNotReady(ctx, pod, err)
		}
		if vols != nil {
			err = m.cfg.Runtime.(runtime.VolumeRuntime).SyncPodWithVolumes(ctx, pod, vols)
		} else {
			err = m.cfg.Runtime.SyncPod(ctx, pod)
		}
		m.admitMu.Unlock()
		if err != nil {
			return fmt.Errorf("start pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		rs, inRuntime = m.cfg.Runtime.PodStatus(uid)
	} else if terminal || rs.Killed {
		if m.cfg.Volumes != nil && stoppedAll(rs) {
			m.cfg.Volumes.Release(uid)
		}
	} else {
		if m.cfg.Volumes != nil && len(pod.Spec.Volumes) > 0 {
			m.cfg.Volumes.Track(ctx, pod)
		}
		if err := m.cfg.Runtime.SyncPod(ctx, pod); err != nil {
			return fmt.Errorf("start pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		rs, inRuntime = m.cfg.Runtime.PodStatus(uid)
	}
	if !inRuntime {
		return nil
	}
	return m.writeStatus(ctx, pod, m.final(pod, rs))
}

// final is compute, with the graceful shutdown's final status for a pod
// the shutdown stopped.
func (m *Manager) final(pod *corev1.Pod, rs runtime.PodStatus) corev1.PodStatus {
	m.mu.Lock()
	byShutdown := m.shutdown[pod.UID]
	evictMsg, byEviction := m.evicted[pod.UID]
	m.mu.Unlock()
	if byEviction && stopped(rs) {
		return podstatus.Evicted(m.compute(pod, rs), evictMsg, metav1.NewTime(m.now()))
	}
	if !byShutdown || !stopped(rs) {
		return m.compute(pod, rs)
	}
	// Compute from the final phase, so the conditions agree with it
	// whatever the processes' exit codes were.
	was := pod.Status.Phase
	p := pod.DeepCopy()
	if p.Status.Phase != corev1.PodSucceeded {
		p.Status.Phase = corev1.PodFailed
	}
	return podstatus.ShutdownTerminated(was, m.compute(p, rs), metav1.NewTime(m.now()))
}

// Running returns the pods the node runs for the API: admitted, in the
// runtime, not being killed, not terminal, not being deleted. Oldest first.
func (m *Manager) Running() []*corev1.Pod {
	var out []*corev1.Pod
	for _, rs := range m.cfg.Runtime.Pods() {
		if rs.Killed {
			continue
		}
		p := m.get(rs.UID)
		if p == nil || IsMirror(p) || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreationTimestamp.Before(&out[j].CreationTimestamp) })
	return out
}

// StopForShutdown stops a pod for a graceful node shutdown (SPEC GNS-5):
// SIGTERM, SIGKILL after grace, then its final status — Failed, reason
// Terminated, DisruptionTarget=True — written until the API acknowledges
// it (retrying conflicts as the watch brings the newer pod). It returns
// when the status is stored, or ctx ends.
func (m *Manager) StopForShutdown(ctx context.Context, uid types.UID, grace time.Duration) error {
	m.mu.Lock()
	m.shutdown[uid] = true
	m.mu.Unlock()
	if p := m.get(uid); p != nil && m.cfg.Recorder != nil {
		for _, c := range p.Spec.Containers {
			m.cfg.Recorder.PodEvent(p, corev1.EventTypeNormal, "Killing", "Stopping container "+c.Name)
		}
	}
	if err := m.cfg.Runtime.KillPod(ctx, uid, grace); err != nil {
		return fmt.Errorf("stop pod %s: %w", uid, err)
	}
	backoff := 100 * time.Millisecond
	for {
		pod := m.get(uid)
		rs, inRuntime := m.cfg.Runtime.PodStatus(uid)
		if pod == nil || !inRuntime {
			return nil // gone from the API or the runtime: nothing to report
		}
		err := m.writeStatus(ctx, pod, m.final(pod, rs))
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		m.cfg.Logger.Debug("final pod status not written yet", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("final status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		case <-m.cfg.Clock.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// Evict stops a pod for node-pressure eviction: an Evicted warning event
// with message, SIGTERM, SIGKILL after grace, then its final status —
// Failed, reason Evicted, message, DisruptionTarget=True — written until
// the API acknowledges it. It returns when the pod's processes are gone
// and the status is stored, or ctx ends.
func (m *Manager) Evict(ctx context.Context, uid types.UID, grace time.Duration, message string) error {
	m.mu.Lock()
	m.evicted[uid] = message
	m.mu.Unlock()
	if p := m.get(uid); p != nil && m.cfg.Recorder != nil {
		m.cfg.Recorder.PodEvent(p, corev1.EventTypeWarning, podstatus.ReasonEvicted, message)
	}
	if err := m.cfg.Runtime.KillPod(ctx, uid, grace); err != nil {
		return fmt.Errorf("evict pod %s: %w", uid, err)
	}
	return m.postFinal(ctx, uid)
}

// postFinal writes the final status of a pod the agent stopped (shutdown,
// eviction) until the API accepts it, retrying conflicts as the watch
// brings the newer pod.
func (m *Manager) postFinal(ctx context.Context, uid types.UID) error {
	backoff := 100 * time.Millisecond
	for {
		pod := m.get(uid)
		rs, inRuntime := m.cfg.Runtime.PodStatus(uid)
		if pod == nil || !inRuntime {
			return nil // gone from the API or the runtime: nothing to report
		}
		err := m.writeStatus(ctx, pod, m.final(pod, rs))
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		m.cfg.Logger.Debug("final pod status not written yet", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("final status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		case <-m.cfg.Clock.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// terminate stops a pod being deleted, posts its final status and removes
// it from the API. KillPod can take the whole grace period, so it runs in
// its own goroutine and the pod is synced again when it ends.
func (m *Manager) terminate(ctx context.Context, pod *corev1.Pod, rs runtime.PodStatus, inRuntime bool) error {
	if inRuntime && !stopped(rs) {
		m.mu.Lock()
		busy := m.stopping[pod.UID]
		m.stopping[pod.UID] = true
		m.mu.Unlock()
		if busy {
			return nil
		}
		grace := DefaultGracePeriod
		if pod.DeletionGracePeriodSeconds != nil {
			grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
		}
		if m.cfg.Recorder != nil {
			for _, c := range pod.Spec.Containers {
				m.cfg.Recorder.PodEvent(pod, corev1.EventTypeNormal, "Killing", "Stopping container "+c.Name)
			}
		}
		go func() {
			err := m.cfg.Runtime.KillPod(ctx, pod.UID, grace)
			m.mu.Lock()
			delete(m.stopping, pod.UID)
			m.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				m.cfg.Logger.Warn("stop pod failed", "pod", pod.Namespace+"/"+pod.Name, "err", err)
			}
			m.enqueue(pod.UID)
		}()
		return nil
	}
	if inRuntime {
		if err := m.writeStatus(ctx, pod, m.final(pod, rs)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if err := m.cfg.Client.DeletePod(ctx, pod.Namespace, pod.Name, pod.UID); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if inRuntime {
		if err := m.cfg.Runtime.RemovePod(pod.UID); err != nil {
			return fmt.Errorf("remove pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	return m.cleanupVolumes(pod.UID)
}

// prepareVolumes readies the pod's volumes (nil: the pod needs none, or
// the agent does not manage volumes).
func (m *Manager) prepareVolumes(ctx context.Context, pod *corev1.Pod, node *corev1.Node) (map[string]runtime.Volume, error) {
	if m.cfg.Volumes == nil || len(pod.Spec.Volumes) == 0 {
		return nil, nil
	}
	if _, ok := m.cfg.Runtime.(runtime.VolumeRuntime); !ok {
		return nil, errors.New("the container runtime cannot mount volumes")
	}
	vols, err := m.cfg.Volumes.Prepare(ctx, pod, node)
	if err != nil {
		return nil, err
	}
	if vols == nil {
		vols = map[string]runtime.Volume{}
	}
	m.mu.Lock()
	delete(m.mountErr, pod.UID)
	m.mu.Unlock()
	return vols, nil
}

// volumesNotReady reports a pod whose volumes cannot be prepared (yet): a
// Warning FailedMount event when the problem is new, the pod's containers
// waiting in ContainerCreating, and an error so the pod is retried with
// back-off (a Node change retries it at once, see NodeChanged).
func (m *Manager) volumesNotReady(ctx context.Context, pod *corev1.Pod, cause error) error {
	msg := cause.Error()
	m.mu.Lock()
	changed := m.mountErr[pod.UID] != msg
	m.mountErr[pod.UID] = msg
	m.mu.Unlock()
	if changed {
		m.cfg.Logger.Info("pod volumes not ready", "pod", pod.Namespace+"/"+pod.Name, "err", msg)
		if m.cfg.Recorder != nil {
			m.cfg.Recorder.PodEvent(pod, corev1.EventTypeWarning, ReasonFailedMount, msg)
		}
	}
	if err := m.writeStatus(ctx, pod, m.computeWith(pod, runtime.PodStatus{}, false)); err != nil {
		return err
	}
	return fmt.Errorf("volumes of pod %s/%s: %w", pod.Namespace, pod.Name, cause)
}

// ReasonFailedMount is the event of a pod whose volumes cannot be mounted.
const ReasonFailedMount = "FailedMount"

func (m *Manager) cleanupVolumes(uid types.UID) error {
	m.mu.Lock()
	delete(m.mountErr, uid)
	m.mu.Unlock()
	if m.cfg.Volumes == nil {
		return nil
	}
	return m.cfg.Volumes.Cleanup(uid)
}

// stoppedAll reports whether no container of the pod runs.
func stoppedAll(rs runtime.PodStatus) bool {
	for _, c := range append(append([]runtime.ContainerStatus(nil), rs.InitContainers...), rs.Containers...) {
		if c.State.Running != nil {
			return false
		}
	}
	return true
}

// IsMirror reports whether pod is a mirror pod: the API's copy of a static
// pod, which an agent never runs from the API.
func IsMirror(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}

// removeMirror deletes an orphaned mirror pod from the API without running
// it. A copy the runtime still runs (started by an agent from before this
// rule) is stopped at once.
func (m *Manager) removeMirror(ctx context.Context, pod *corev1.Pod, inRuntime bool) error {
	name := pod.Namespace + "/" + pod.Name
	if inRuntime {
		if err := m.cfg.Runtime.KillPod(ctx, pod.UID, 0); err != nil {
			return fmt.Errorf("stop mirror pod %s: %w", name, err)
		}
		if err := m.cfg.Runtime.RemovePod(pod.UID); err != nil {
			return fmt.Errorf("remove mirror pod %s: %w", name, err)
		}
	}
	m.cfg.Logger.Warn("deleting mirror pod: this node runs no static pods, so it is never run", "pod", name)
	if err := m.cfg.Client.DeletePod(ctx, pod.Namespace, pod.Name, pod.UID); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete mirror pod %s: %w", name, err)
	}
	return nil
}

// stopped reports whether every container of a killed pod has exited.
func stopped(rs runtime.PodStatus) bool {
	if !rs.Killed {
		return false
	}
	for _, c := range append(append([]runtime.ContainerStatus(nil), rs.InitContainers...), rs.Containers...) {
		if c.State.Running != nil {
			return false
		}
	}
	return true
}

func (m *Manager) compute(pod *corev1.Pod, rs runtime.PodStatus) corev1.PodStatus {
	return m.computeWith(pod, rs, true)
}

// computeWith is compute for a pod the runtime may not know yet (ok=false:
// nothing was started, as for a pod waiting for its volumes).
func (m *Manager) computeWith(pod *corev1.Pod, rs runtime.PodStatus, ok bool) corev1.PodStatus {
	st := podstatus.Compute(pod, rs, ok, metav1.NewTime(m.now()))
	ips := m.cfg.HostIPs()
	if len(ips) > 0 {
		st.HostIP, st.PodIP = ips[0], ips[0]
		st.HostIPs, st.PodIPs = nil, nil
		for _, ip := range ips {
			st.HostIPs = append(st.HostIPs, corev1.HostIP{IP: ip})
			st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: ip})
		}
	}
	return st
}

// storedEquality compares statuses as the API stores them: times to the
// whole second (a computed status carries the runtime's sub-second times,
// the stored one never does), quantities by value.
var storedEquality = conversion.EqualitiesOrDie(
	func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 },
	func(a, b metav1.Time) bool { return a.Unix() == b.Unix() },
)

func (m *Manager) writeStatus(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus) error {
	if storedEquality.DeepEqual(pod.Status, status) {
		return nil
	}
	next := pod.DeepCopy()
	next.Status = status
	updated, err := m.cfg.Client.UpdatePodStatus(ctx, next)
	if err != nil {
		return fmt.Errorf("update status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	m.mu.Lock()
	if cur, ok := m.pods[pod.UID]; ok && cur.ResourceVersion == pod.ResourceVersion {
		m.pods[pod.UID] = updated
	}
	m.mu.Unlock()
	return nil
}

// admitted returns the pods already admitted to this node (running in the
// runtime and not terminal), oldest first, excluding uid.
func (m *Manager) admitted(uid types.UID) []*corev1.Pod {
	var out []*corev1.Pod
	for _, rs := range m.cfg.Runtime.Pods() {
		if rs.UID == uid || rs.Killed {
			continue
		}
		if p := m.get(rs.UID); p != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreationTimestamp.Before(&out[j].CreationTimestamp) })
	return out
}

func (m *Manager) rejection(uid types.UID) (rejection, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.rejected[uid]
	return r, ok
}

func (m *Manager) markRejected(uid types.UID, r rejection) {
	m.mu.Lock()
	m.rejected[uid] = r
	m.mu.Unlock()
}

func (m *Manager) forget(uid types.UID) {
	m.mu.Lock()
	delete(m.rejected, uid)
	delete(m.shutdown, uid)
	delete(m.evicted, uid)
	m.mu.Unlock()
}

func (m *Manager) now() time.Time { return m.cfg.Clock.Now() }
