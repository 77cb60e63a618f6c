package ownership

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
)

// Event reasons of the pod writes, as upstream's controllers.
const (
	ReasonSuccessfulCreate = "SuccessfulCreate"
	ReasonFailedCreate     = "FailedCreate"
	ReasonSuccessfulDelete = "SuccessfulDelete"
	ReasonFailedDelete     = "FailedDelete"
)

// OnConflict is the back-off of a write that re-reads and tries again on a
// conflict: once more at once, as upstream's controllers do for status.
// Pass it to retry.RetryOnConflict.
var OnConflict = wait.Backoff{Steps: 2, Duration: 0, Factor: 1}

// Getter reads one object by name (a typed client's Get).
type Getter[O any] func(ctx context.Context, name string, opts metav1.GetOptions) (O, error)

// Patcher patches one object by name (a typed client's Patch).
type Patcher[R any] func(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (R, error)

// ApplyClaim adopts c.Adopt and releases c.Release for owner (of kind),
// patching through patch. Before adopting it checks with the API server,
// through get, that the owner still exists and is not being deleted (the
// cache may be behind). An object gone meanwhile is skipped.
func ApplyClaim[O, T metav1.Object, R any](ctx context.Context, owner O, kind schema.GroupVersionKind, get Getter[O], patch Patcher[R], c Claimed[T]) error {
	what := kind.Kind + " " + owner.GetNamespace() + "/" + owner.GetName()
	if len(c.Adopt) > 0 {
		fresh, err := get(ctx, owner.GetName(), metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("recheck %s before adopting: %w", what, err)
		}
		if fresh.GetUID() != owner.GetUID() || fresh.GetDeletionTimestamp() != nil {
			return fmt.Errorf("%s is gone or being deleted: not adopting", what)
		}
	}
	ref := *metav1.NewControllerRef(owner, kind)
	var errs []error
	for _, o := range c.Adopt {
		if _, err := patch(ctx, o.GetName(), types.StrategicMergePatchType, AdoptPatch(ref, o.GetUID()), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("%s: adopt %s: %w", what, o.GetName(), err))
		}
	}
	for _, o := range c.Release {
		if _, err := patch(ctx, o.GetName(), types.StrategicMergePatchType, ReleasePatch(owner.GetUID(), o.GetUID()), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("%s: release %s: %w", what, o.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// PodWriter creates and deletes one owner's pods, recording an event on
// the owner for each, and settles Expectations for the writes that will
// never show in the informer.
type PodWriter struct {
	Pods     typedcorev1.PodInterface
	Recorder record.EventRecorder
	// Owner is what the events are about.
	Owner runtime.Object
	// Key is the owner's expectations key.
	Key          string
	Expectations *Expectations
}

// Create creates n pods in slow-start batches, the i-th (from 0) being
// pod(i). The caller has expected n creates; the ones not made are
// settled here.
func (w PodWriter) Create(ctx context.Context, n int, pod func(i int) *corev1.Pod) error {
	var next atomic.Int64
	ok, err := SlowStart(ctx, n, func(ctx context.Context) error {
		p, err := w.Pods.Create(ctx, pod(int(next.Add(1)-1)), metav1.CreateOptions{})
		if err != nil {
			w.Recorder.Eventf(w.Owner, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating: %v", err)
			return err
		}
		w.Recorder.Eventf(w.Owner, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Created pod: %s", p.Name)
		return nil
	})
	for range n - ok {
		w.Expectations.Created(w.Key)
	}
	if err != nil {
		return fmt.Errorf("create pods for %s: %w", w.Key, err)
	}
	return nil
}

// Delete deletes victims concurrently, each with a UID precondition so a
// pod recreated under the same name is never deleted by mistake. The
// caller has expected their deletion; one already gone, or failed, is
// settled here.
func (w PodWriter) Delete(ctx context.Context, victims []*corev1.Pod) error {
	errs := make([]error, len(victims))
	var wg sync.WaitGroup
	for i, p := range victims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := w.Pods.Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
			switch {
			case err == nil:
				w.Recorder.Eventf(w.Owner, corev1.EventTypeNormal, ReasonSuccessfulDelete, "Deleted pod: %s", p.Name)
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				// Gone already, or the name is another pod's now.
				w.Expectations.Deleted(w.Key, p.UID)
			default:
				w.Expectations.Deleted(w.Key, p.UID)
				w.Recorder.Eventf(w.Owner, corev1.EventTypeWarning, ReasonFailedDelete, "Error deleting: %v", err)
				errs[i] = fmt.Errorf("delete pod %s: %w", p.Name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// WriteStatus writes obj's status through update after set has put the
// new status on it (obj is the caller's copy, free to modify). On a
// conflict it re-reads the object through get and tries once more
// (OnConflict); an object deleted, or replaced by another of the same
// name, meanwhile is left alone.
func WriteStatus[O metav1.Object](ctx context.Context, obj O, set func(O), get Getter[O], update func(context.Context, O, metav1.UpdateOptions) (O, error)) error {
	cur, uid, fresh := obj, obj.GetUID(), false
	err := retry.RetryOnConflict(OnConflict, func() error {
		if fresh {
			o, err := get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if o.GetUID() != uid {
				return nil
			}
			cur = o
		}
		fresh = true
		set(cur)
		_, err := update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update status of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
