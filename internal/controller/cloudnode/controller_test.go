package cloudnode

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
)

type metadataFunc func(*corev1.Node) (*cloudprovider.InstanceMetadata, error)

func (f metadataFunc) InstanceMetadata(_ context.Context, n *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	return f(n)
}

// TestSyncInitialisesThroughTheAPI: an uninitialised node is updated and
// its addresses written, with a Synced event; a provider error leaves it
// tainted and returns the error (the queue retries); nil metadata skips it.
func TestSyncInitialisesThroughTheAPI(t *testing.T) {
	taint := corev1.Taint{Key: TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	mk := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint}}}
	}
	client := fake.NewSimpleClientset(mk("ok"), mk("broken"), mk("unknown"))
	provider := metadataFunc(func(n *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
		switch n.Name {
		case "broken":
			return nil, errors.New("engine unreachable")
		case "unknown":
			return nil, nil
		}
		return &cloudprovider.InstanceMetadata{ProviderID: "static://ok", Zone: "z1",
			NodeAddresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}}}, nil
	})
	c, err := NewController(Config{Provider: provider, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := &manager.Term{Informers: informers.NewSharedInformerFactory(client, 0)}
	if err := c.Prepare(term); err != nil {
		t.Fatal(err)
	}
	term.Informers.Start(ctx.Done())
	term.Informers.WaitForCacheSync(ctx.Done())
	rec := record.NewFakeRecorder(10)
	c.rec = rec

	if _, err := c.sync(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
	n, err := client.CoreV1().Nodes().Get(ctx, "ok", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if IsUninitialized(n) || n.Spec.ProviderID != "static://ok" || n.Labels["topology.kubernetes.io/zone"] != "z1" ||
		len(n.Status.Addresses) != 1 || n.Status.Addresses[0].Address != "10.0.0.5" {
		t.Errorf("ok: %+v", n)
	}
	if e := <-rec.Events; !strings.Contains(e, "Normal Synced Node synced successfully") {
		t.Errorf("event %q", e)
	}

	if _, err := c.sync(ctx, "broken"); err == nil || !strings.Contains(err.Error(), "engine unreachable") {
		t.Errorf("broken: sync error %v", err)
	}
	if _, err := c.sync(ctx, "unknown"); err != nil {
		t.Errorf("unknown: %v", err)
	}
	for _, name := range []string{"broken", "unknown"} {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil || !IsUninitialized(n) || n.Spec.ProviderID != "" {
			t.Errorf("%s changed: %+v %v", name, n, err)
		}
	}
	select {
	case e := <-rec.Events:
		t.Errorf("unexpected event %q", e)
	default:
	}
}
