package queue

import "container/heap"

// podHeap is a binary heap of queued pods ordered by less, indexable by pod
// key so entries can be updated or removed in O(log n).
type podHeap struct {
	items []*QueuedPodInfo
	index map[string]int
	less  func(a, b *QueuedPodInfo) bool
}

func newPodHeap(less func(a, b *QueuedPodInfo) bool) *podHeap {
	return &podHeap{index: make(map[string]int), less: less}
}

// heap.Interface, used through container/heap only.
func (h *podHeap) Len() int           { return len(h.items) }
func (h *podHeap) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *podHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.index[h.items[i].key] = i
	h.index[h.items[j].key] = j
}
func (h *podHeap) Push(x any) {
	p := x.(*QueuedPodInfo)
	h.index[p.key] = len(h.items)
	h.items = append(h.items, p)
}
func (h *podHeap) Pop() any {
	last := len(h.items) - 1
	p := h.items[last]
	h.items[last] = nil
	h.items = h.items[:last]
	delete(h.index, p.key)
	return p
}

func (h *podHeap) get(key string) *QueuedPodInfo {
	if i, ok := h.index[key]; ok {
		return h.items[i]
	}
	return nil
}

// addOrUpdate inserts p, or replaces the entry with the same key.
func (h *podHeap) addOrUpdate(p *QueuedPodInfo) {
	if i, ok := h.index[p.key]; ok {
		h.items[i] = p
		heap.Fix(h, i)
		return
	}
	heap.Push(h, p)
}

func (h *podHeap) remove(key string) *QueuedPodInfo {
	i, ok := h.index[key]
	if !ok {
		return nil
	}
	return heap.Remove(h, i).(*QueuedPodInfo)
}

func (h *podHeap) peek() *QueuedPodInfo {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}

func (h *podHeap) pop() *QueuedPodInfo {
	if len(h.items) == 0 {
		return nil
	}
	return heap.Pop(h).(*QueuedPodInfo)
}
