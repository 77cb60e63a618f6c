package scheme

import (
	"bytes"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
)

// Encode encodes obj with e into a slice of its own, like runtime.Encode
// but without its second copy: runtime.Encode hands the encoder a growing
// bytes.Buffer, so protobuf's encoder, which marshals into one buffer of
// the exact size and writes it once, costs two allocations and a copy of
// the whole object. Here an encoder that takes an allocator
// (runtime.EncoderWithAllocator: protobuf) gets a fresh buffer whose
// single write is kept as the result; anything else (JSON, YAML, a
// second write) is copied, as runtime.Encode would.
func Encode(e runtime.Encoder, obj runtime.Object) ([]byte, error) {
	return encode(e, obj, &runtime.SimpleAllocator{})
}

// EncodeTemporary encodes obj as Encode does and passes the bytes to use,
// which must not keep them (a ResponseWriter's Write copies them): they
// are in a pooled buffer, which goes back to the pool when use returns.
// use is not called when encoding fails.
func EncodeTemporary(e runtime.Encoder, obj runtime.Object, use func(data []byte)) error {
	a := allocators.Get().(*runtime.Allocator)
	defer putAllocator(a)
	data, err := encode(e, obj, a)
	if err != nil {
		return err
	}
	use(data)
	return nil
}

// maxPooled bounds the buffers the pool keeps: a large LIST's response is
// encoded once in a while and its buffer is not worth keeping.
const maxPooled = 64 << 10

var allocators = sync.Pool{New: func() any { return new(runtime.Allocator) }}

func putAllocator(a *runtime.Allocator) {
	if cap(a.Allocate(0)) <= maxPooled {
		allocators.Put(a)
	}
}

func encode(e runtime.Encoder, obj runtime.Object, alloc runtime.MemoryAllocator) ([]byte, error) {
	ea, ok := e.(runtime.EncoderWithAllocator)
	if !ok {
		return runtime.Encode(e, obj)
	}
	w := keepingWriter{alloc: alloc}
	if err := ea.EncodeWithAllocator(obj, &w, &w); err != nil {
		return nil, err
	}
	return w.out, nil
}

// keepingWriter is the allocator an encoder is given and the writer it
// writes to. A first write of the buffer it allocated is kept as it is
// (nobody else holds that buffer); every other write is copied, since an
// encoder may write from buffers of its own that it reuses. A kept buffer
// is copied out before the encoder allocates again: a pooled allocator
// hands out the same memory each time.
type keepingWriter struct {
	alloc runtime.MemoryAllocator
	last  []byte // what Allocate returned last
	out   []byte
	kept  bool // out is the allocator's buffer
}

func (w *keepingWriter) Allocate(n uint64) []byte {
	if w.kept {
		w.out, w.kept = bytes.Clone(w.out), false
	}
	w.last = w.alloc.Allocate(n)
	return w.last
}

func (w *keepingWriter) Write(p []byte) (int, error) {
	if w.out == nil && len(p) > 0 && len(w.last) > 0 && &p[0] == &w.last[0] {
		w.out, w.kept = p, true
		return len(p), nil
	}
	w.out = append(w.out, p...)
	return len(p), nil
}
