// Package scheduler is nodeplane's built-in scheduler (the `scheduler`
// entry of --controllers): the shell that feeds the scheduling queue and
// the node/pod cache from informers, runs the framework's plugins on each
// pending pod, assumes the chosen node at once (so two pods never take the
// same last slot) and binds through pods/binding. Unschedulable pods get the
// upstream FailedScheduling event and PodScheduled=False condition.
//
// Decisions live in the sub-packages (framework, plugins, cache, queue);
// this file only moves data between them and the API.
package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/podcondition"
	schedcache "github.com/nodeplane/nodeplane/internal/scheduler/cache"
	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/volumebinding"
	"github.com/nodeplane/nodeplane/internal/scheduler/queue"
)

// Name is the --controllers name.
const Name = "scheduler"

// SchedulerName is the spec.schedulerName this scheduler serves.
const SchedulerName = corev1.DefaultSchedulerName

// bindWorkers bind in parallel (binding is one API write per pod).
const bindWorkers = 16

// Config configures the scheduler.
type Config struct {
	Client   kubernetes.Interface
	Clock    clock.WithTicker
	Logger   *slog.Logger
	Registry prometheus.Registerer
	// Seed breaks ties between equally good nodes.
	Seed uint64
}

// Scheduler is one of the controller manager's loops (its Prepare takes
// only the term's informers, so it does not depend on the manager).
type Scheduler struct {
	cfg       Config
	scheduled prometheus.Counter
	failed    prometheus.Counter
	latency   prometheus.Histogram

	// per term
	fw       *framework.Framework
	cache    *schedcache.Cache
	queue    *queue.Queue
	snapshot *schedcache.Snapshot
	recorder record.EventRecorder
}

// New returns the scheduler and registers its metrics.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Client == nil {
		return nil, errors.New("scheduler: Client is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Logger = cfg.Logger.With("controller", Name)
	s := &Scheduler{
		cfg: cfg,
		scheduled: prometheus.NewCounter(prometheus.CounterOpts{Name: "scheduler_pods_scheduled_total",
			Help: "Pods bound to a node by the scheduler."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "scheduler_pods_unschedulable_total",
			Help: "Scheduling attempts that found no node."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "scheduler_pod_scheduling_duration_seconds",
			Help:    "Seconds from a pod's first scheduling attempt to its binding.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
	}
	if cfg.Registry != nil {
		for _, c := range []prometheus.Collector{s.scheduled, s.failed, s.latency} {
			if err := cfg.Registry.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// Name is the --controllers name.
func (s *Scheduler) Name() string { return Name }

// PrepareInformers registers the scheduler on a leadership term's
// informers: a fresh queue, cache and framework per term.
func (s *Scheduler) PrepareInformers(factory informers.SharedInformerFactory) error {
	pcfg := plugins.DefaultConfig()
	claimInf := factory.Core().V1().PersistentVolumeClaims()
	volumeInf := factory.Core().V1().PersistentVolumes()
	pcfg.Volumes = volumeListers{claims: claimInf.Lister(), volumes: volumeInf.Lister()}
	pl, err := plugins.Default(pcfg)
	if err != nil {
		return err
	}
	s.fw, err = framework.New(framework.Config{Plugins: pl, Seed: s.cfg.Seed})
	if err != nil {
		return err
	}
	s.cache, err = schedcache.New(schedcache.Config{Clock: s.cfg.Clock})
	if err != nil {
		return err
	}
	qc := queue.DefaultConfig()
	qc.Clock = s.cfg.Clock
	qc.PluginEvents = s.fw.EventsToRegister()
	s.queue, err = queue.New(qc)
	if err != nil {
		return err
	}
	s.snapshot = schedcache.NewSnapshot()

	for inf, resource := range map[cache.SharedIndexInformer]framework.EventResource{
		claimInf.Informer():  volumebinding.PersistentVolumeClaim,
		volumeInf.Informer(): volumebinding.PersistentVolume,
	} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) {
				s.queue.MoveAllToActiveOrBackoff(framework.ClusterEvent{Resource: resource, ActionType: framework.Add})
			},
			UpdateFunc: func(any, any) {
				s.queue.MoveAllToActiveOrBackoff(framework.ClusterEvent{Resource: resource, ActionType: framework.Update})
			},
		}); err != nil {
			return err
		}
	}

	ni := factory.Core().V1().Nodes().Informer()
	pi := factory.Core().V1().Pods().Informer()
	if _, err := ni.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			s.cache.AddNode(obj.(*corev1.Node))
			s.queue.MoveAllToActiveOrBackoff(framework.EventNodeAdd)
		},
		UpdateFunc: func(old, cur any) {
			o, n := old.(*corev1.Node), cur.(*corev1.Node)
			s.cache.UpdateNode(n)
			if a := framework.NodeUpdateActions(o, n); a != 0 {
				s.queue.MoveAllToActiveOrBackoff(framework.ClusterEvent{Resource: framework.Node, ActionType: a})
			}
		},
		DeleteFunc: func(obj any) {
			if n, ok := unwrap[*corev1.Node](obj); ok {
				s.cache.RemoveNode(n.Name)
			}
		},
	}); err != nil {
		return err
	}
	_, err = pi.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			p := obj.(*corev1.Pod)
			switch {
			case p.Spec.NodeName != "":
				s.cache.AddPod(p)
				s.queue.MoveAllToActiveOrBackoff(framework.EventAssignedPodAdd)
			case s.responsible(p):
				s.queue.Add(p)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, p := old.(*corev1.Pod), cur.(*corev1.Pod)
			switch {
			case p.Spec.NodeName != "":
				if o.Spec.NodeName == "" {
					s.queue.Delete(o)
				}
				s.cache.UpdatePod(p)
				if a := framework.AssignedPodUpdateActions(o, p); a != 0 {
					s.queue.MoveAllToActiveOrBackoff(framework.ClusterEvent{Resource: framework.Pod, ActionType: a})
				}
			case s.responsible(p):
				s.queue.Update(o, p)
			default:
				s.queue.Delete(p)
			}
		},
		DeleteFunc: func(obj any) {
			p, ok := unwrap[*corev1.Pod](obj)
			if !ok {
				return
			}
			if p.Spec.NodeName != "" {
				s.cache.RemovePod(p)
				s.queue.MoveAllToActiveOrBackoff(framework.EventAssignedPodDelete)
				return
			}
			s.queue.Delete(p)
		},
	})
	return err
}

// responsible reports whether this scheduler should place the pod.
func (s *Scheduler) responsible(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	return p.Spec.SchedulerName == "" || p.Spec.SchedulerName == SchedulerName
}

// Run schedules until ctx ends (the term is over). Informers are synced.
func (s *Scheduler) Run(ctx context.Context) {
	// The broadcaster outlives ctx until the deferred Shutdown, so events
	// of a binding in flight when the term ends are not refused.
	bcast := record.NewBroadcaster(record.WithContext(context.WithoutCancel(ctx)))
	bcast.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.cfg.Client.CoreV1().Events("")})
	defer bcast.Shutdown()
	s.recorder = bcast.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "default-scheduler"})
	go func() {
		<-ctx.Done()
		s.queue.Close()
	}()
	binds := make(chan bindJob, bindWorkers)
	var wg sync.WaitGroup
	for range bindWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range binds {
				s.bind(ctx, j)
			}
		}()
	}
	defer wg.Wait()
	defer close(binds)
	for {
		qpi, err := s.queue.Pop(ctx)
		if err != nil {
			return
		}
		if j, ok := s.scheduleOne(ctx, qpi); ok {
			select {
			case binds <- j:
			case <-ctx.Done():
				return
			}
		}
	}
}

type bindJob struct {
	qpi  *queue.QueuedPodInfo
	pod  *corev1.Pod
	node string
}

// scheduleOne decides one pod; ok means it was assumed on a node and must
// be bound.
func (s *Scheduler) scheduleOne(ctx context.Context, qpi *queue.QueuedPodInfo) (bindJob, bool) {
	pod := qpi.Pod
	cycle := s.queue.SchedulingCycle()
	s.cache.UpdateSnapshot(s.snapshot)
	res, err := s.fw.Schedule(ctx, pod, s.snapshot.List())
	if err != nil {
		var fe *framework.FitError
		if errors.As(err, &fe) {
			qpi.UnschedulablePlugins = fe.Diagnosis.UnschedulablePlugins
		}
		s.failed.Inc()
		s.unschedulable(ctx, pod, err)
		if qerr := s.queue.AddUnschedulable(qpi, cycle); qerr != nil {
			s.cfg.Logger.Debug("requeue", "pod", pod.Namespace+"/"+pod.Name, "err", qerr)
		}
		s.queue.Done(pod)
		return bindJob{}, false
	}
	assumed := pod.DeepCopy()
	if err := s.cache.AssumePod(assumed, res.NodeName); err != nil {
		s.cfg.Logger.Warn("assume pod", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		_ = s.queue.AddUnschedulable(qpi, cycle)
		s.queue.Done(pod)
		return bindJob{}, false
	}
	return bindJob{qpi: qpi, pod: assumed, node: res.NodeName}, true
}

// bind writes pods/binding; on failure the node is freed and the pod tried
// again.
func (s *Scheduler) bind(ctx context.Context, j bindJob) {
	pod := j.pod
	defer s.queue.Done(j.qpi.Pod)
	err := s.cfg.Client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: j.node},
	}, metav1.CreateOptions{})
	if err != nil {
		_ = s.cache.ForgetPod(pod)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return // deleted or already bound: the informer will tell
		}
		s.cfg.Logger.Warn("bind pod", "pod", pod.Namespace+"/"+pod.Name, "node", j.node, "err", err)
		_ = s.queue.AddUnschedulable(j.qpi, s.queue.SchedulingCycle())
		return
	}
	s.cache.FinishBinding(pod)
	s.scheduled.Inc()
	if !j.qpi.InitialAttemptTimestamp.IsZero() {
		s.latency.Observe(s.cfg.Clock.Since(j.qpi.InitialAttemptTimestamp).Seconds())
	}
	s.recorder.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, j.node)
}

// unschedulable records FailedScheduling and PodScheduled=False.
func (s *Scheduler) unschedulable(ctx context.Context, pod *corev1.Pod, err error) {
	msg := err.Error()
	reason := corev1.PodReasonUnschedulable
	var fe *framework.FitError
	if !errors.As(err, &fe) && !errors.Is(err, framework.ErrNoNodesAvailable) {
		reason = "SchedulerError"
	}
	s.recorder.Event(pod, corev1.EventTypeWarning, "FailedScheduling", msg)
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == reason && c.Message == msg {
			return
		}
	}
	p := pod.DeepCopy()
	now := metav1.NewTime(s.cfg.Clock.Now())
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: msg,
		LastProbeTime: now}
	podcondition.Set(&p.Status, cond, now.Time, podcondition.WithProbeTime())
	if _, err := s.cfg.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		s.cfg.Logger.Debug("write PodScheduled=False", "pod", p.Namespace+"/"+p.Name, "err", err)
	}
}

func unwrap[T any](obj any) (T, bool) {
	if t, ok := obj.(T); ok {
		return t, true
	}
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		t, ok := d.Obj.(T)
		return t, ok
	}
	var zero T
	return zero, false
}

// volumeListers gives VolumeBinding the claims and volumes of the
// scheduler's informer caches.
type volumeListers struct {
	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
}

func (l volumeListers) Claim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return l.claims.PersistentVolumeClaims(namespace).Get(name)
}

func (l volumeListers) Volume(name string) (*corev1.PersistentVolume, error) {
	return l.volumes.Get(name)
}
