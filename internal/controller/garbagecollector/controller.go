package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
)

// ownerIndex indexes every watched informer by the UIDs its objects'
// owner references name, so an owner's dependents are one lookup away.
const ownerIndex = "garbagecollector.ownerUID"

// Config configures the controller.
type Config struct {
	Client kubernetes.Interface
	// Workers is how many objects are processed at once (upstream
	// --concurrent-gc-syncs). Default 20.
	Workers int
	// Clock drives the work queue's retry back-off. Default: the real clock.
	Clock  clock.WithTicker
	Logger *slog.Logger
}

// DefaultConfig returns upstream's defaults.
func DefaultConfig() Config { return Config{Workers: 20} }

// Controller is the shell around Plan and PlanDeleting.
type Controller struct {
	cfg Config

	// per term, set in Prepare
	kinds map[schema.GroupKind]*watchedResource
	queue workqueue.TypedRateLimitingInterface[key]
}

// watchedResource is a resource with this term's informer cache.
type watchedResource struct {
	resource
	cache cache.Indexer
}

// key names an object in the queue.
type key struct {
	kind      schema.GroupKind
	namespace string
	name      string
}

// New returns the controller.
func New(cfg Config) *Controller {
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultConfig().Workers
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Logger = cfg.Logger.With("controller", ControllerName)
	return &Controller{cfg: cfg}
}

// Name implements manager.Controller.
func (c *Controller) Name() string { return ControllerName }

// Prepare implements manager.Controller: it indexes the term's informers
// by owner UID and subscribes to their events.
func (c *Controller) Prepare(term *manager.Term) error {
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[key](),
		workqueue.TypedRateLimitingQueueConfig[key]{Name: "garbage-collector", Clock: c.cfg.Clock})
	c.kinds = map[schema.GroupKind]*watchedResource{}
	for _, r := range watched() {
		inf := r.informer(term.Informers)
		if _, ok := inf.GetIndexer().GetIndexers()[ownerIndex]; !ok {
			if err := inf.AddIndexers(cache.Indexers{ownerIndex: ownerUIDs}); err != nil {
				return fmt.Errorf("index %s by owner: %w", r.kind, err)
			}
		}
		w := &watchedResource{resource: r, cache: inf.GetIndexer()}
		c.kinds[r.kind] = w
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.observe(w, nil, obj) },
			UpdateFunc: func(old, cur any) { c.observe(w, old, cur) },
			DeleteFunc: func(obj any) { c.observeDelete(obj) },
		}); err != nil {
			return fmt.Errorf("watch %s: %w", r.kind, err)
		}
	}
	return nil
}

func ownerUIDs(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	refs := m.GetOwnerReferences()
	out := make([]string, 0, len(refs))
	for _, ref := range refs {
		out = append(out, string(ref.UID))
	}
	return out, nil
}

// observe queues what an added or changed object may concern: the object
// itself (its owners may be gone), its dependents (it may have started
// deleting them) and its owners that wait for their dependents. Changes
// that touch none of owner references, deletion and finalizers (a pod's
// status, say) concern nobody.
func (c *Controller) observe(w *watchedResource, old, cur any) {
	m, err := meta.Accessor(cur)
	if err != nil {
		return
	}
	var oldOwners []metav1.OwnerReference
	if old != nil {
		o, err := meta.Accessor(old)
		if err != nil {
			return
		}
		if o.GetUID() == m.GetUID() && (o.GetDeletionTimestamp() == nil) == (m.GetDeletionTimestamp() == nil) &&
			slices.Equal(o.GetFinalizers(), m.GetFinalizers()) && apiequality.Semantic.DeepEqual(o.GetOwnerReferences(), m.GetOwnerReferences()) {
			return
		}
		oldOwners = o.GetOwnerReferences()
	}
	c.queue.Add(key{kind: w.kind, namespace: m.GetNamespace(), name: m.GetName()})
	c.queueDependents(m.GetUID())
	// A new slice: oldOwners belongs to a cached object (read only).
	c.queueWaitingOwners(m.GetNamespace(), slices.Concat(oldOwners, m.GetOwnerReferences()))
}

// observeDelete queues the dependents of a deleted object (now perhaps
// without owner) and its owners that wait for it to be gone.
func (c *Controller) observeDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	c.queueDependents(m.GetUID())
	c.queueWaitingOwners(m.GetNamespace(), m.GetOwnerReferences())
}

func (c *Controller) queueDependents(uid types.UID) {
	for _, d := range c.dependents(uid) {
		c.queue.Add(key{kind: d.Kind, namespace: d.Namespace, name: d.Name})
	}
}

// queueWaitingOwners queues the cached owners among refs that are being
// deleted: a dependent's change may release them.
func (c *Controller) queueWaitingOwners(namespace string, refs []metav1.OwnerReference) {
	for _, ref := range refs {
		w, ns, ok := c.resolve(namespace, ref)
		if !ok {
			continue
		}
		if owner, ok := w.cached(ns, ref.Name); ok && owner.GetUID() == ref.UID && owner.GetDeletionTimestamp() != nil {
			c.queue.Add(key{kind: w.kind, namespace: ns, name: ref.Name})
		}
	}
}

// dependents are the cached objects whose owner references name uid.
func (c *Controller) dependents(uid types.UID) []Object {
	var out []Object
	for _, w := range c.kinds {
		objs, err := w.cache.ByIndex(ownerIndex, string(uid))
		if err != nil {
			continue
		}
		for _, obj := range objs {
			if m, err := meta.Accessor(obj); err == nil {
				out = append(out, ObjectOf(w.kind, m))
			}
		}
	}
	return out
}

// resolve finds the watched resource an owner reference of a dependent in
// namespace names, and the owner's namespace. False for references the
// collector cannot resolve: kinds it does not watch, and a cluster-scoped
// dependent naming a namespaced kind.
func (c *Controller) resolve(namespace string, ref metav1.OwnerReference) (*watchedResource, string, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, "", false
	}
	w, ok := c.kinds[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]
	switch {
	case !ok:
		return nil, "", false
	case !w.namespaced:
		return w, "", true
	case namespace == "":
		return nil, "", false
	}
	return w, namespace, true
}

func (w *watchedResource) cached(namespace, name string) (metav1.Object, bool) {
	obj, exists, err := w.cache.GetByKey(cache.ObjectName{Namespace: namespace, Name: name}.String())
	if err != nil || !exists {
		return nil, false
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, false
	}
	return m, true
}

// Run implements manager.Controller: Workers workers drain the queue until
// ctx ends.
func (c *Controller) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
}

func (c *Controller) next(ctx context.Context) bool {
	k, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(k)
	err := c.sync(ctx, k)
	switch {
	case err == nil:
		c.queue.Forget(k)
		return true
	case ctx.Err() != nil:
		return true
	case errors.Is(err, errStale):
		c.cfg.Logger.Debug("object changed while collecting, retrying", "object", objectName(k), "err", err)
	default:
		c.cfg.Logger.Warn("collect object", "object", objectName(k), "err", err)
	}
	c.queue.AddRateLimited(k)
	return true
}

func objectName(k key) string {
	return Ref{Kind: k.kind, Namespace: k.namespace, Name: k.name}.String()
}

// errStale marks a write refused because the object changed since it was
// read (a failed patch test or precondition): retried, not worth a warning.
var errStale = errors.New("object changed")

// sync decides for one object from the cache, confirms a delete against
// live reads, and carries the action out.
func (c *Controller) sync(ctx context.Context, k key) error {
	w := c.kinds[k.kind]
	m, ok := w.cached(k.namespace, k.name)
	if !ok {
		return nil
	}
	obj := ObjectOf(k.kind, m)
	if obj.Deleting {
		return c.execute(ctx, obj, "", PlanDeleting(obj, c.dependents(obj.UID)))
	}
	if len(obj.Owners) == 0 {
		return nil
	}
	states, err := c.ownerStates(ctx, obj)
	if err != nil {
		return err
	}
	dependents := c.dependents(obj.UID)
	a := Plan(obj, states, dependents)
	if !a.Delete {
		return c.execute(ctx, obj, "", a)
	}
	// The cache may be behind: decide again on the object as it is now,
	// and delete exactly that version of it.
	live, err := w.client(c.cfg.Client, obj.Namespace).Get(ctx, obj.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %s: %w", obj.Ref, err)
	}
	if live.GetUID() != obj.UID {
		return nil
	}
	obj = ObjectOf(k.kind, live)
	if obj.Deleting || len(obj.Owners) == 0 {
		return nil // its own events bring it back
	}
	if states, err = c.ownerStates(ctx, obj); err != nil {
		return err
	}
	return c.execute(ctx, obj, live.GetResourceVersion(), Plan(obj, states, dependents))
}

// ownerStates finds what became of each of obj's owners: from the cache
// when it holds the owner, otherwise from a live read (the cache may not
// have seen a new owner yet).
func (c *Controller) ownerStates(ctx context.Context, obj Object) ([]OwnerState, error) {
	states := make([]OwnerState, len(obj.Owners))
	for i, ref := range obj.Owners {
		w, ns, ok := c.resolve(obj.Namespace, ref)
		if !ok {
			states[i] = OwnerPresent
			continue
		}
		if owner, ok := w.cached(ns, ref.Name); ok && owner.GetUID() == ref.UID {
			o := ObjectOf(w.kind, owner)
			states[i] = StateOf(&o)
			continue
		}
		live, err := w.client(c.cfg.Client, ns).Get(ctx, ref.Name)
		switch {
		case apierrors.IsNotFound(err):
			states[i] = OwnerAbsent
		case err != nil:
			return nil, fmt.Errorf("get owner %s %s of %s: %w", ref.Kind, ref.Name, obj.Ref, err)
		case live.GetUID() != ref.UID:
			states[i] = OwnerAbsent
		default:
			o := ObjectOf(w.kind, live)
			states[i] = StateOf(&o)
		}
	}
	return states, nil
}

// execute carries out a on obj. resourceVersion, when set, is the version
// a delete must find.
func (c *Controller) execute(ctx context.Context, obj Object, resourceVersion string, a Action) error {
	if a.None() {
		return nil
	}
	client := c.kinds[obj.Kind].client(c.cfg.Client, obj.Namespace)
	if p := unblockPatch(obj, a.Unblock); p != nil {
		// The patch changes the object: the delete below then goes by UID only.
		if err := c.patch(ctx, client, obj.Ref, p); err != nil {
			return err
		}
		resourceVersion = ""
	}
	if a.Delete {
		uid := obj.UID
		pre := &metav1.Preconditions{UID: &uid}
		if resourceVersion != "" {
			pre.ResourceVersion = &resourceVersion
		}
		policy := a.Policy
		err := client.Delete(ctx, obj.Name, metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: pre})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			return fmt.Errorf("delete %s: %w: %w", obj.Ref, errStale, err)
		case err != nil:
			return fmt.Errorf("delete %s: %w", obj.Ref, err)
		}
		c.cfg.Logger.Info("deleted dependent", "object", obj.Ref.String(), "propagationPolicy", string(policy))
	}
	if p := removeOwnersPatch(obj, a.RemoveOwners); p != nil {
		if err := c.patch(ctx, client, obj.Ref, p); err != nil {
			return err
		}
	}
	for _, d := range a.Orphan {
		w, ok := c.kinds[d.Kind]
		if !ok {
			continue
		}
		if p := removeOwnersPatch(d, []types.UID{obj.UID}); p != nil {
			if err := c.patch(ctx, w.client(c.cfg.Client, d.Namespace), d.Ref, p); err != nil {
				return err
			}
		}
	}
	if p := removeFinalizerPatch(obj, a.RemoveFinalizer); p != nil {
		err := client.Patch(ctx, obj.Name, types.JSONPatchType, p)
		if err == nil {
			c.cfg.Logger.Info("removed finalizer", "object", obj.Ref.String(), "finalizer", a.RemoveFinalizer)
		}
		return patchError(obj.Ref, err)
	}
	return nil
}

// patch applies a JSON patch to the object ref names.
func (c *Controller) patch(ctx context.Context, client objectClient, ref Ref, p []byte) error {
	return patchError(ref, client.Patch(ctx, ref.Name, types.JSONPatchType, p))
}

// patchError: an object gone is done, a failed patch test or a conflict is
// errStale.
func patchError(ref Ref, err error) error {
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsInvalid(err), apierrors.IsConflict(err):
		return fmt.Errorf("patch %s: %w: %w", ref, errStale, err)
	}
	return fmt.Errorf("patch %s: %w", ref, err)
}
