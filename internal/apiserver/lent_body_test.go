package apiserver

import (
	"bytes"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/nodeplane/nodeplane/internal/apiserver/scheme"
)

// decodeBody decodes a body LimitInFlight has read straight from the
// pooled buffer (readBodyLent), which goes back to the pool — and is
// overwritten by the next request — once the handler returns; decoded
// objects live on (in the watch cache among others). So a decode must
// keep nothing of the buffer: every string, byte slice and map of every
// kind the server decodes, in each body format.
func TestADecodedBodyKeepsNothingOfTheBuffer(t *testing.T) {
	now := metav1.NewMicroTime(time.Date(2026, 11, 28, 5, 0, 0, 123456000, time.UTC))
	objects := []runtime.Object{
		&coordinationv1.Lease{
			TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "kube-node-lease", ResourceVersion: "42", OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "u1"}}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("n1"), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now},
		},
		&corev1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}, Annotations: map[string]string{"k": "v"}},
			Spec:       corev1.NodeSpec{PodCIDR: "10.0.0.0/24", Taints: []corev1.Taint{{Key: "t", Value: "v", Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{
				Capacity:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "ready"}},
				Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
				Images:     []corev1.ContainerImage{{Names: []string{"registry/image:1"}, SizeBytes: 1 << 20}},
			},
		},
		&corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"},
			Data:       map[string][]byte{"key": []byte("secret bytes")},
			StringData: map[string]string{"other": "text"},
		},
		&corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default"},
			Data:       map[string]string{"a": "b"},
			BinaryData: map[string][]byte{"bin": {0, 1, 2, 3}},
		},
	}
	for _, mt := range []string{mediaJSON, mediaProtobuf, mediaYAML} {
		info := serializerFor(mt)
		for _, obj := range objects {
			gvk := obj.GetObjectKind().GroupVersionKind()
			t.Run(mt+" "+gvk.Kind, func(t *testing.T) {
				var enc bytes.Buffer
				if err := scheme.Codecs.EncoderForVersion(info.Serializer, gvk.GroupVersion()).Encode(obj, &enc); err != nil {
					t.Fatal(err)
				}
				want := decodeFrom(t, bytes.Clone(enc.Bytes()), info, gvk)

				buf := bytes.Clone(enc.Bytes())
				got := decodeFrom(t, buf, info, gvk)
				for i := range buf {
					buf[i] = 0xff // the next request's body
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("the decoded object changed with the buffer:\n%#v\nwant\n%#v", got, want)
				}
			})
		}
	}
}

// decodeFrom decodes data as decodeBody does.
func decodeFrom(t *testing.T, data []byte, info runtime.SerializerInfo, gvk schema.GroupVersionKind) runtime.Object {
	t.Helper()
	newFn := func() runtime.Object {
		o, err := scheme.Scheme.New(gvk)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	obj, err := decodeBytes(httptest.NewRecorder(), data, info, gvk, newFn, "Strict")
	if err != nil {
		t.Fatal(err)
	}
	return obj
}
