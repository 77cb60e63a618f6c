package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/agent"
)

// watchPods lists and watches the pods bound to one simulated node, as the
// agent's reflector does, but decoding the watch stream in the calling
// goroutine: client-go's reflector costs five goroutines per watch (resync
// timer, stream decoder, request timer...), which at 10,000 nodes is most of
// the simulator's memory. It relists after a 410 and backs off after errors.
func watchPods(ctx context.Context, n *node, clk clock.Clock, h agent.Handlers[*corev1.Pod]) {
	sel := fields.OneTermEqualSelector("spec.nodeName", n.name).String()
	backoff := time.Second
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			list, err := n.api.Core.Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: sel})
			if err != nil {
				if !sleepCtx(ctx, clk, backoff) {
					return
				}
				backoff = min(2*backoff, 30*time.Second)
				continue
			}
			pods := make([]*corev1.Pod, len(list.Items))
			for i := range list.Items {
				pods[i] = &list.Items[i]
			}
			h.Replace(pods)
			rv = list.ResourceVersion
		}
		next, err := watchOnce(ctx, n, sel, rv, h)
		switch {
		case err == nil:
			rv, backoff = next, time.Second
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			rv = ""
		default:
			rv = next
			if !sleepCtx(ctx, clk, backoff) {
				return
			}
			backoff = min(2*backoff, 30*time.Second)
		}
	}
}

// watchOnce runs one watch from rv and returns the last resourceVersion seen.
func watchOnce(ctx context.Context, n *node, sel, rv string, h agent.Handlers[*corev1.Pod]) (string, error) {
	timeout := int64(300 + n.index%300) // spread the watches' ends over five minutes
	body, err := n.api.Core.RESTClient().Get().Resource("pods").
		VersionedParams(&metav1.ListOptions{
			Watch: true, FieldSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: &timeout,
		}, scheme.ParameterCodec).
		SetHeader("Accept", "application/json").
		Stream(ctx)
	if err != nil {
		return rv, err
	}
	defer body.Close()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok || info.StreamSerializer == nil {
		return rv, errors.New("no JSON stream serializer")
	}
	dec := restclientwatch.NewDecoder(
		streaming.NewDecoder(info.StreamSerializer.Framer.NewFrameReader(body), info.StreamSerializer.Serializer),
		scheme.Codecs.UniversalDeserializer())
	for {
		typ, obj, err := dec.Decode()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || ctx.Err() != nil {
				return rv, nil
			}
			return rv, err
		}
		switch typ {
		case watch.Error:
			return rv, apierrors.FromObject(obj)
		case watch.Bookmark:
			if m, err := metaOf(obj); err == nil {
				rv = m
			}
		case watch.Added, watch.Modified:
			if p, ok := obj.(*corev1.Pod); ok {
				rv = p.ResourceVersion
				h.Upsert(p)
			}
		case watch.Deleted:
			if p, ok := obj.(*corev1.Pod); ok {
				rv = p.ResourceVersion
				h.Delete(p)
			}
		}
	}
}

func metaOf(obj runtime.Object) (string, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		return p.ResourceVersion, nil
	}
	return "", fmt.Errorf("unexpected %T", obj)
}

func sleepCtx(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
