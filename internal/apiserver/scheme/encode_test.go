package scheme

import (
	"bytes"
	"io"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func testNode() *corev1.Node {
	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"topology.kubernetes.io/zone": "a"}},
		Status: corev1.NodeStatus{
			Capacity:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown"}},
		},
	}
}

func TestEncodeGivesWhatRuntimeEncodeGives(t *testing.T) {
	for _, mediaType := range []string{"application/vnd.kubernetes.protobuf", "application/json", "application/yaml"} {
		t.Run(mediaType, func(t *testing.T) {
			info, ok := runtime.SerializerInfoForMediaType(Codecs.SupportedMediaTypes(), mediaType)
			if !ok {
				t.Fatalf("no serializer for %s", mediaType)
			}
			enc := Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
			want, err := runtime.Encode(enc, testNode())
			if err != nil {
				t.Fatal(err)
			}
			got, err := Encode(enc, testNode())
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("Encode: %q, %v; want %q", got, err, want)
			}
			var tmp []byte
			err = EncodeTemporary(enc, testNode(), func(data []byte) { tmp = bytes.Clone(data) })
			if err != nil || !bytes.Equal(tmp, want) {
				t.Fatalf("EncodeTemporary: %q, %v; want %q", tmp, err, want)
			}
			// The pooled buffer is reused by the next encoding; what Encode
			// returned is the caller's own and stays as it was.
			for range 3 {
				n := 0
				err := EncodeTemporary(enc, &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: "other"}},
					func(data []byte) { n = len(data) })
				if err != nil || n == 0 {
					t.Fatalf("EncodeTemporary: %v", err)
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("Encode's result changed after later encodings: %q", got)
			}
		})
	}
}

// scriptedEncoder writes its parts as an allocating encoder might: each
// from a new allocation (alloc) or, having allocated, from one buffer of
// its own that it reuses (own).
type scriptedEncoder struct {
	parts []string
	alloc bool
	own   []byte
}

func (e *scriptedEncoder) Encode(obj runtime.Object, w io.Writer) error {
	return e.EncodeWithAllocator(obj, w, &runtime.SimpleAllocator{})
}

func (e *scriptedEncoder) EncodeWithAllocator(_ runtime.Object, w io.Writer, a runtime.MemoryAllocator) error {
	for _, p := range e.parts {
		b := a.Allocate(uint64(len(p)))
		if !e.alloc {
			b = e.own[:len(p)] // allocated, but written from elsewhere
		}
		copy(b, p)
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	// What the encoder does with its buffers afterwards must not show.
	for i := range e.own {
		e.own[i] = 'X'
	}
	return nil
}

func (e *scriptedEncoder) Identifier() runtime.Identifier { return "scripted" }

func TestEncodeCopiesWhatItCannotKeep(t *testing.T) {
	tests := []struct {
		name  string
		parts []string
		alloc bool
	}{
		{name: "one write of the allocated buffer", parts: []string{"whole-object"}, alloc: true},
		{name: "writes of two allocations from a pooled allocator that reuses its memory", parts: []string{"first-part", "second"}, alloc: true},
		{name: "one write from the encoder's own reused buffer", parts: []string{"whole-object"}},
		{name: "writes from the encoder's own reused buffer", parts: []string{"header", "body"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want string
			for _, p := range tt.parts {
				want += p
			}
			for _, temporary := range []bool{false, true} {
				enc := &scriptedEncoder{parts: tt.parts, alloc: tt.alloc, own: make([]byte, 64)}
				var got []byte
				var err error
				if temporary {
					// Checked inside use: the pooled buffer is valid only there.
					err = EncodeTemporary(enc, nil, func(data []byte) { got = bytes.Clone(data) })
				} else {
					got, err = Encode(enc, nil)
				}
				if err != nil || string(got) != want {
					t.Errorf("temporary=%v: got %q, %v; want %q", temporary, got, err, want)
				}
			}
		})
	}
}
