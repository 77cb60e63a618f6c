package serverapp

import (
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/nodeplane/nodeplane/internal/loopback"
)

// handoffClientset is the controllers' clientset whose core and
// coordination watches are handed the server's objects in process
// (loopback.MediaType) instead of encoding and decoding them: the
// per-node objects (Nodes, Leases, Pods) that a fleet's heartbeats keep
// changing. The informers then hold the very objects the server's watch
// cache holds, read only — one copy of each Node in the process instead of
// two — and a lease renewal costs the controllers no encoding or decoding.
// Every other request (gets, lists, writes, other groups) is encoded as
// before.
type handoffClientset struct {
	*kubernetes.Clientset
	core  corev1client.CoreV1Interface
	coord coordinationv1client.CoordinationV1Interface
}

func (c handoffClientset) CoreV1() corev1client.CoreV1Interface { return c.core }

func (c handoffClientset) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return c.coord
}

// newHandoffClientset wraps cs, built from cfg, whose requests t serves.
func newHandoffClientset(cs *kubernetes.Clientset, cfg *rest.Config, t *loopback.Transport) (handoffClientset, error) {
	core, err := handoffGroup(cfg, corev1.SchemeGroupVersion, "/api", t)
	if err != nil {
		return handoffClientset{}, err
	}
	coord, err := handoffGroup(cfg, coordinationv1.SchemeGroupVersion, "/apis", t)
	if err != nil {
		return handoffClientset{}, err
	}
	return handoffClientset{Clientset: cs, core: corev1client.New(core), coord: coordinationv1client.New(coord)}, nil
}

// handoffGroup is a REST client of one API group version (what client-go's
// generated group clients set up) that accepts handed objects first.
func handoffGroup(cfg *rest.Config, gv schema.GroupVersion, apiPath string, t *loopback.Transport) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion, c.APIPath = &gv, apiPath
	ns, err := t.Serializers(scheme.Codecs.WithoutConversion())
	if err != nil {
		return nil, err
	}
	c.NegotiatedSerializer = ns
	c.AcceptContentTypes = loopback.MediaType + "," + c.AcceptContentTypes
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("controller client for %s: %w", gv, err)
	}
	return rc, nil
}
