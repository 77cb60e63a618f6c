package persistentvolume

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
)

// Config configures the controller.
type Config struct {
	Client kubernetes.Interface
	Clock  clock.WithTicker
	Logger *slog.Logger
	// SyncPeriod is --pvclaimbinder-sync-period: how often every claim and
	// volume is synced again (upstream 15 s).
	SyncPeriod time.Duration
	// SharedVolumeRoot, when set, is where the server reaches the
	// shared-dir volumes: provisioning creates the directory and deleting a
	// provisioned volume removes it. Empty: the agent creates it on first
	// mount and a deleted volume's data stays.
	SharedVolumeRoot string
}

// Controller is the shell around SyncClaim and SyncVolume.
type Controller struct {
	cfg      Config
	queue    workqueue.TypedRateLimitingInterface[string]
	claims   corelisters.PersistentVolumeClaimLister
	volumes  corelisters.PersistentVolumeLister
	classes  storagelisters.StorageClassLister
	pods     corelisters.PodLister
	attaches storagelisters.VolumeAttachmentLister
	recorder record.EventRecorder
}

// NewController returns the controller.
func NewController(cfg Config) *Controller {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SyncPeriod <= 0 {
		cfg.SyncPeriod = 15 * time.Second
	}
	cfg.Logger = cfg.Logger.With("controller", ControllerName)
	return &Controller{cfg: cfg}
}

// Name implements manager.Controller.
func (c *Controller) Name() string { return ControllerName }

// Prepare implements manager.Controller.
func (c *Controller) Prepare(term *manager.Term) error {
	c.queue = manager.NewQueue("persistentvolume", c.cfg.Clock)
	core := term.Informers.Core().V1()
	c.claims = core.PersistentVolumeClaims().Lister()
	c.volumes = core.PersistentVolumes().Lister()
	c.pods = core.Pods().Lister()
	c.classes = term.Informers.Storage().V1().StorageClasses().Lister()
	c.attaches = term.Informers.Storage().V1().VolumeAttachments().Lister()
	// A released volume waits for its detach: sync volumes when attachments go.
	if _, err := term.Informers.Storage().V1().VolumeAttachments().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if va, ok := unwrap(obj).(*storagev1.VolumeAttachment); ok && va.Spec.Source.PersistentVolumeName != nil {
				c.queue.Add("v/" + *va.Spec.Source.PersistentVolumeName)
			}
		},
	}); err != nil {
		return err
	}
	handlers := []struct {
		inf cache.SharedIndexInformer
		fn  func(obj any)
	}{
		{core.PersistentVolumeClaims().Informer(), c.enqueueClaim},
		{core.PersistentVolumes().Informer(), c.enqueueVolume},
		{core.Pods().Informer(), c.enqueuePodClaims},
		{term.Informers.Storage().V1().StorageClasses().Informer(), func(any) { c.enqueueAll() }},
	}
	for _, h := range handlers {
		fn := h.fn
		if _, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    fn,
			UpdateFunc: func(_, cur any) { fn(cur) },
			DeleteFunc: fn,
		}); err != nil {
			return err
		}
	}
	return nil
}

// Run implements manager.Controller.
func (c *Controller) Run(ctx context.Context) {
	recorder, stop := manager.EventRecorder(ctx, c.cfg.Client, "persistentvolume-controller")
	defer stop()
	c.recorder = recorder
	go func() {
		t := c.cfg.Clock.NewTicker(c.cfg.SyncPeriod)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				c.enqueueAll()
			}
		}
	}()
	manager.RunWorkers(ctx, c.queue, 1, c.sync, c.cfg.Logger, "claim or volume")
}

func unwrap(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

func (c *Controller) enqueueClaim(obj any) {
	if pvc, ok := unwrap(obj).(*corev1.PersistentVolumeClaim); ok {
		c.queue.Add("c/" + pvc.Namespace + "/" + pvc.Name)
		if pvc.Spec.VolumeName != "" {
			c.queue.Add("v/" + pvc.Spec.VolumeName)
		}
	}
}

func (c *Controller) enqueueVolume(obj any) {
	if pv, ok := unwrap(obj).(*corev1.PersistentVolume); ok {
		c.queue.Add("v/" + pv.Name)
		if r := pv.Spec.ClaimRef; r != nil {
			c.queue.Add("c/" + r.Namespace + "/" + r.Name)
		}
	}
}

func (c *Controller) enqueuePodClaims(obj any) {
	pod, ok := unwrap(obj).(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			c.queue.Add("c/" + pod.Namespace + "/" + v.PersistentVolumeClaim.ClaimName)
		}
	}
}

func (c *Controller) enqueueAll() {
	claims, _ := c.claims.List(labels.Everything())
	for _, pvc := range claims {
		c.queue.Add("c/" + pvc.Namespace + "/" + pvc.Name)
	}
	volumes, _ := c.volumes.List(labels.Everything())
	for _, pv := range volumes {
		c.queue.Add("v/" + pv.Name)
	}
}

func (c *Controller) view(namespace string) (View, error) {
	var v View
	var err error
	if v.Volumes, err = c.volumes.List(labels.Everything()); err != nil {
		return v, err
	}
	if v.Classes, err = c.classes.List(labels.Everything()); err != nil {
		return v, err
	}
	if namespace != "" {
		if v.Pods, err = c.pods.Pods(namespace).List(labels.Everything()); err != nil {
			return v, err
		}
	}
	v.Attached = func(pv string) bool {
		vas, _ := c.attaches.List(labels.Everything())
		for _, va := range vas {
			if n := va.Spec.Source.PersistentVolumeName; n != nil && *n == pv {
				return true
			}
		}
		return false
	}
	v.Claim = func(ns, name string) *corev1.PersistentVolumeClaim {
		pvc, _ := c.claims.PersistentVolumeClaims(ns).Get(name)
		return pvc
	}
	return v, nil
}

func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	kind, rest, _ := strings.Cut(key, "/")
	var step Step
	var subject runtime.Object
	switch kind {
	case "c":
		ns, name, _ := strings.Cut(rest, "/")
		pvc, err := c.claims.PersistentVolumeClaims(ns).Get(name)
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		v, err := c.view(ns)
		if err != nil {
			return 0, err
		}
		step, subject = SyncClaim(c.cfg.Clock.Now(), pvc, v), pvc
	case "v":
		pv, err := c.volumes.Get(rest)
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		v, err := c.view("")
		if err != nil {
			return 0, err
		}
		step, subject = SyncVolume(c.cfg.Clock.Now(), pv, v), pv
	default:
		return 0, nil
	}
	err := c.write(ctx, step)
	if err == nil || apierrors.IsNotFound(err) {
		for _, e := range step.Events {
			typ := corev1.EventTypeNormal
			if e.Warning {
				typ = corev1.EventTypeWarning
			}
			c.recorder.Event(subject, typ, e.Reason, e.Message)
		}
		return 0, nil
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return 0, err // the cache is behind: retry after it catches up
	}
	return 0, err
}

func (c *Controller) write(ctx context.Context, s Step) error {
	core := c.cfg.Client.CoreV1()
	var err error
	switch s.Kind {
	case None:
		return nil
	case UpdateClaim:
		_, err = core.PersistentVolumeClaims(s.Claim.Namespace).Update(ctx, s.Claim, metav1.UpdateOptions{})
	case UpdateClaimStatus:
		_, err = core.PersistentVolumeClaims(s.Claim.Namespace).UpdateStatus(ctx, s.Claim, metav1.UpdateOptions{})
	case UpdateVolume:
		_, err = core.PersistentVolumes().Update(ctx, s.Volume, metav1.UpdateOptions{})
	case UpdateVolumeStatus:
		_, err = core.PersistentVolumes().UpdateStatus(ctx, s.Volume, metav1.UpdateOptions{})
	case CreateVolume:
		if c.cfg.SharedVolumeRoot != "" {
			if err := os.MkdirAll(filepath.Join(c.cfg.SharedVolumeRoot, s.Volume.Spec.CSI.VolumeHandle), 0o750); err != nil {
				return fmt.Errorf("create shared-dir volume %s: %w", s.Volume.Name, err)
			}
		}
		_, err = core.PersistentVolumes().Create(ctx, s.Volume, metav1.CreateOptions{})
		if err == nil {
			c.cfg.Logger.Info("provisioned volume", "pv", s.Volume.Name, "claim", s.Volume.Spec.ClaimRef.Namespace+"/"+s.Volume.Spec.ClaimRef.Name)
		}
	case DeleteVolume:
		if c.cfg.SharedVolumeRoot != "" && s.RemoveDir != "" {
			if err := os.RemoveAll(filepath.Join(c.cfg.SharedVolumeRoot, s.RemoveDir)); err != nil {
				return fmt.Errorf("delete shared-dir volume %s: %w", s.Volume.Name, err)
			}
		}
		uid := s.Volume.UID
		err = core.PersistentVolumes().Delete(ctx, s.Volume.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, GracePeriodSeconds: ptr.To[int64](0)})
		if err == nil {
			c.cfg.Logger.Info("deleted released volume", "pv", s.Volume.Name)
		}
	}
	return err
}
