package attachdetach

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
	"github.com/nodeplane/nodeplane/internal/volume/shareddir"
)

// ControllerConfig configures the controller shell.
type ControllerConfig struct {
	Core Config
	// ReconcilePeriod is the reconciler loop period (ADC-1: 100 ms): a pass
	// runs at most this often, when something changed or a detach waits.
	ReconcilePeriod time.Duration
	Client          kubernetes.Interface
	Clock           clock.WithTicker
	Logger          *slog.Logger
	Registry        prometheus.Registerer
}

// Controller runs the reconciler and the shared-dir attacher.
type Controller struct {
	cfg    ControllerConfig
	forced *prometheus.CounterVec

	core     *Core
	dirty    chan struct{}
	nodes    corelisters.NodeLister
	pods     corelisters.PodLister
	claims   corelisters.PersistentVolumeClaimLister
	volumes  corelisters.PersistentVolumeLister
	attaches storagelisters.VolumeAttachmentLister
	recorder record.EventRecorder
}

// NewController returns the controller and registers its metric.
func NewController(cfg ControllerConfig) *Controller {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ReconcilePeriod <= 0 {
		cfg.ReconcilePeriod = 100 * time.Millisecond
	}
	if cfg.Core.MaxWaitForUnmount <= 0 {
		cfg.Core.MaxWaitForUnmount = DefaultConfig().MaxWaitForUnmount
	}
	cfg.Logger = cfg.Logger.With("controller", ControllerName)
	c := &Controller{cfg: cfg, forced: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricForcedDetaches, Help: "Number of times the A/D Controller performed a forced detach",
	}, []string{"reason"})}
	if cfg.Registry != nil {
		cfg.Registry.MustRegister(c.forced)
	}
	return c
}

// Name implements manager.Controller.
func (c *Controller) Name() string { return ControllerName }

// Prepare implements manager.Controller.
func (c *Controller) Prepare(term *manager.Term) error {
	c.core = New(c.cfg.Core)
	c.dirty = make(chan struct{}, 1)
	core := term.Informers.Core().V1()
	c.nodes = core.Nodes().Lister()
	c.pods = core.Pods().Lister()
	c.claims = core.PersistentVolumeClaims().Lister()
	c.volumes = core.PersistentVolumes().Lister()
	c.attaches = term.Informers.Storage().V1().VolumeAttachments().Lister()
	mark := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.markDirty() },
		UpdateFunc: func(_, _ any) { c.markDirty() },
		DeleteFunc: func(any) { c.markDirty() },
	}
	for _, inf := range []cache.SharedIndexInformer{
		core.PersistentVolumeClaims().Informer(), core.PersistentVolumes().Informer(),
		term.Informers.Storage().V1().VolumeAttachments().Informer(),
	} {
		if _, err := inf.AddEventHandler(mark); err != nil {
			return err
		}
	}
	// Heartbeats and pods without claims do not change the decision: only
	// what Reconcile reads from them marks the world dirty.
	if _, err := core.Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.markDirty() },
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.Node)
			n, ok2 := cur.(*corev1.Node)
			if !ok1 || !ok2 || nodeChangeMatters(o, n) {
				c.markDirty()
			}
		},
		DeleteFunc: func(any) { c.markDirty() },
	}); err != nil {
		return err
	}
	podEvent := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if p, ok := obj.(*corev1.Pod); !ok || usesClaims(p) {
			c.markDirty()
		}
	}
	_, err := core.Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: podEvent, UpdateFunc: func(_, cur any) { podEvent(cur) }, DeleteFunc: podEvent,
	})
	return err
}

func usesClaims(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return true
		}
	}
	return false
}

func (c *Controller) markDirty() {
	select {
	case c.dirty <- struct{}{}:
	default:
	}
}

// Run implements manager.Controller.
func (c *Controller) Run(ctx context.Context) {
	recorder, stop := manager.EventRecorder(ctx, c.cfg.Client, "attachdetach-controller")
	defer stop()
	c.recorder = recorder
	t := c.cfg.Clock.NewTicker(c.cfg.ReconcilePeriod)
	defer t.Stop()
	waiting := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		select {
		case <-c.dirty:
		default:
			if !waiting {
				continue
			}
		}
		waiting = c.pass(ctx)
	}
}

// pass runs the attacher over every attachment and one reconcile; it
// reports whether a detach is waiting on time (the next pass must run even
// if nothing changes).
func (c *Controller) pass(ctx context.Context) bool {
	w, err := c.world()
	if err != nil {
		c.cfg.Logger.Warn("list caches", "err", err)
		return true
	}
	for _, va := range w.Attachments {
		c.attach(ctx, va)
	}
	plan := c.core.Reconcile(c.cfg.Clock.Now(), w)
	failed := map[string]bool{}
	for _, ns := range plan.NodeStatus {
		if err := c.writeAttached(ctx, ns); err != nil {
			failed[ns.Node] = true
			c.cfg.Logger.Warn("update node volumesAttached", "node", ns.Node, "err", err)
		}
	}
	for _, d := range plan.Detach {
		if failed[d.Node] || !c.detach(ctx, d) {
			c.core.DetachFailed(d.Attachment)
		}
	}
	for _, a := range plan.Attach {
		va := &storagev1.VolumeAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: a.Name},
			Spec: storagev1.VolumeAttachmentSpec{
				Attacher: a.Attacher, NodeName: a.Node,
				Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(a.PV)},
			},
		}
		_, err := c.cfg.Client.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{})
		switch {
		case err == nil:
			c.cfg.Logger.Info("attaching volume", "pv", a.PV, "node", a.Node, "attachment", a.Name)
		case apierrors.IsAlreadyExists(err):
		default:
			c.cfg.Logger.Warn("create volume attachment", "pv", a.PV, "node", a.Node, "err", err)
		}
	}
	for _, e := range plan.Events {
		c.recorder.Event(e.Pod, corev1.EventTypeWarning, e.Reason, e.Message)
	}
	return len(plan.Waiting) > 0
}

func (c *Controller) world() (World, error) {
	var w World
	var err error
	if w.Nodes, err = c.nodes.List(labels.Everything()); err != nil {
		return w, err
	}
	if w.Pods, err = c.pods.List(labels.Everything()); err != nil {
		return w, err
	}
	if w.Claims, err = c.claims.List(labels.Everything()); err != nil {
		return w, err
	}
	if w.Volumes, err = c.volumes.List(labels.Everything()); err != nil {
		return w, err
	}
	w.Attachments, err = c.attaches.List(labels.Everything())
	return w, err
}

// writeAttached replaces node.status.volumesAttached.
func (c *Controller) writeAttached(ctx context.Context, ns NodeStatus) error {
	list := ns.Attached
	if list == nil {
		list = []corev1.AttachedVolume{}
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"volumesAttached": list}})
	if err != nil {
		return err
	}
	_, err = c.cfg.Client.CoreV1().Nodes().Patch(ctx, ns.Node, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// detach deletes the attachment, after the safe-to-detach check when asked.
func (c *Controller) detach(ctx context.Context, d Detach) bool {
	log := c.cfg.Logger.With("pv", d.PV, "node", d.Node, "attachment", d.Attachment)
	if d.Verify {
		n, err := c.cfg.Client.CoreV1().Nodes().Get(ctx, d.Node, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			log.Warn("verify safe to detach", "err", err)
			return false
		case inUse(n, d.Unique):
			log.Info("volume still in use on node; not detaching yet")
			return false
		}
	}
	err := c.cfg.Client.StorageV1().VolumeAttachments().Delete(ctx, d.Attachment, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		log.Warn("delete volume attachment", "err", err)
		return false
	}
	if d.ForceReason != "" {
		c.forced.WithLabelValues(d.ForceReason).Inc()
		log.Info("force-detaching volume", "reason", d.ForceReason)
	} else {
		log.Info("detaching volume")
	}
	return true
}

// attach takes one step of the shared-dir attacher.
func (c *Controller) attach(ctx context.Context, va *storagev1.VolumeAttachment) {
	var pv *corev1.PersistentVolume
	if name := va.Spec.Source.PersistentVolumeName; name != nil {
		pv, _ = c.volumes.Get(*name)
	}
	step, msg := DecideAttacher(va, pv)
	api := c.cfg.Client.StorageV1().VolumeAttachments()
	var err error
	switch step {
	case StepNone:
		return
	case StepAddFinalizer:
		v := va.DeepCopy()
		v.Finalizers = append(v.Finalizers, shareddir.Finalizer)
		_, err = api.Update(ctx, v, metav1.UpdateOptions{})
	case StepRemoveFinalizer:
		v := va.DeepCopy()
		v.Finalizers = nil
		for _, f := range va.Finalizers {
			if f != shareddir.Finalizer {
				v.Finalizers = append(v.Finalizers, f)
			}
		}
		_, err = api.Update(ctx, v, metav1.UpdateOptions{})
	case StepMarkAttached:
		v := va.DeepCopy()
		v.Status = storagev1.VolumeAttachmentStatus{Attached: true}
		_, err = api.UpdateStatus(ctx, v, metav1.UpdateOptions{})
	case StepMarkError:
		v := va.DeepCopy()
		v.Status = storagev1.VolumeAttachmentStatus{AttachError: &storagev1.VolumeError{Time: metav1.NewTime(c.cfg.Clock.Now()), Message: msg}}
		_, err = api.UpdateStatus(ctx, v, metav1.UpdateOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		c.cfg.Logger.Warn("shared-dir attacher", "attachment", va.Name, "err", err)
	}
}
