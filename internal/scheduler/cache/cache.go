// Package cache is the scheduler's in-memory picture of the cluster: nodes
// and the pods assigned to them, with their summed requests, fed by the
// shell's informer handlers (Add/Update/Remove) and by the scheduler itself,
// which assumes a pod on its chosen node before binding so the next cycle
// already counts it (two pods never take the same last slot). Each cycle
// reads a Snapshot, which UpdateSnapshot refreshes incrementally: only the
// nodes that changed since the previous refresh are copied.
//
// It owns no goroutine and makes no API calls; time comes from an injected
// clock and expiry runs when the caller calls CleanupExpired. It must not
// decide anything about scheduling; that is the framework's job.
package cache

import (
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
)

// ErrNotAssumed is returned by ForgetPod for a pod the informer already
// confirmed: it is bound, and forgetting it would free its resources.
var ErrNotAssumed = errors.New("pod is not assumed")

// ErrAlreadyCached is returned by AssumePod for a pod the cache already
// holds (assumed or confirmed).
var ErrAlreadyCached = errors.New("pod is already in the scheduler cache")

// Config configures a Cache.
type Config struct {
	// Clock provides now for assumed-pod expiry.
	Clock clock.PassiveClock
	// AssumedPodTTL is how long an assumed pod whose binding finished
	// (FinishBinding) may wait for the informer to confirm it before
	// CleanupExpired drops it. 0 means never, upstream's default since
	// kubernetes#106361: expiring a pod whose bind succeeded but whose watch
	// event is late frees resources the pod really uses. Unconfirmed pods
	// that are deleted still leave through RemovePod.
	AssumedPodTTL time.Duration
}

// DefaultConfig returns the real clock and no expiry.
func DefaultConfig() Config {
	return Config{Clock: clock.RealClock{}}
}

type nodeItem struct {
	name       string
	info       *framework.NodeInfo
	zone       string
	prev, next *nodeItem
}

type podState struct {
	pod             *corev1.Pod
	assumed         bool
	bindingFinished bool
	deadline        time.Time
}

// Cache holds nodes and assigned pods. It is safe for concurrent use: the
// informer handlers and the scheduling goroutine call it concurrently.
type Cache struct {
	clock clock.PassiveClock
	ttl   time.Duration

	mu    sync.Mutex
	nodes map[string]*nodeItem
	// head is the most recently changed node; the list is ordered by
	// decreasing Generation, so a snapshot refresh stops at the first node
	// it already has.
	head       *nodeItem
	generation int64
	pods       map[string]*podState
	// zones keeps, per zone, its nodes in the order they arrived, and
	// zoneOrder the zones in the order they appeared; snapshots interleave
	// zones so a cycle that filters only part of the nodes still sees every
	// zone. orderVersion changes whenever that order does.
	zones        map[string][]string
	zoneOrder    []string
	orderVersion int64
}

// New builds an empty cache.
func New(cfg Config) (*Cache, error) {
	if cfg.Clock == nil {
		return nil, errors.New("cache: nil clock")
	}
	if cfg.AssumedPodTTL < 0 {
		return nil, fmt.Errorf("cache: negative assumed pod TTL %v", cfg.AssumedPodTTL)
	}
	return &Cache{
		clock: cfg.Clock,
		ttl:   cfg.AssumedPodTTL,
		nodes: make(map[string]*nodeItem),
		pods:  make(map[string]*podState),
		zones: make(map[string][]string),
	}, nil
}

// zoneKey groups nodes by region and zone (the GA labels, falling back to
// the deprecated failure-domain ones).
func zoneKey(node *corev1.Node) string {
	l := node.Labels
	region, zone := l[corev1.LabelTopologyRegion], l[corev1.LabelTopologyZone]
	if region == "" {
		region = l[corev1.LabelFailureDomainBetaRegion]
	}
	if zone == "" {
		zone = l[corev1.LabelFailureDomainBetaZone]
	}
	if region == "" && zone == "" {
		return ""
	}
	return region + ":\x00:" + zone
}

// touch marks item changed: new generation, moved to the head of the list.
func (c *Cache) touch(item *nodeItem) {
	c.generation++
	item.info.Generation = c.generation
	if c.head == item {
		return
	}
	if item.prev != nil {
		item.prev.next = item.next
	}
	if item.next != nil {
		item.next.prev = item.prev
	}
	item.prev, item.next = nil, c.head
	if c.head != nil {
		c.head.prev = item
	}
	c.head = item
}

func (c *Cache) unlink(item *nodeItem) {
	if item.prev != nil {
		item.prev.next = item.next
	} else if c.head == item {
		c.head = item.next
	}
	if item.next != nil {
		item.next.prev = item.prev
	}
	item.prev, item.next = nil, nil
}

// item returns the node's item, creating a node-less one for pods that
// arrive before their node.
func (c *Cache) item(name string) *nodeItem {
	it, ok := c.nodes[name]
	if !ok {
		it = &nodeItem{name: name, info: framework.NewNodeInfo(nil)}
		c.nodes[name] = it
	}
	return it
}

func (c *Cache) addToZone(it *nodeItem, zone string) {
	it.zone = zone
	if _, ok := c.zones[zone]; !ok {
		c.zoneOrder = append(c.zoneOrder, zone)
	}
	c.zones[zone] = append(c.zones[zone], it.name)
	c.orderVersion++
}

func (c *Cache) removeFromZone(it *nodeItem) {
	names := c.zones[it.zone]
	for i, n := range names {
		if n == it.name {
			names = append(names[:i], names[i+1:]...)
			break
		}
	}
	if len(names) > 0 {
		c.zones[it.zone] = names
	} else {
		delete(c.zones, it.zone)
		for i, z := range c.zoneOrder {
			if z == it.zone {
				c.zoneOrder = append(c.zoneOrder[:i], c.zoneOrder[i+1:]...)
				break
			}
		}
	}
	c.orderVersion++
}

// AddNode adds or replaces a node.
func (c *Cache) AddNode(node *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	it := c.item(node.Name)
	known := it.info.Node() != nil
	it.info.SetNode(node)
	if zone := zoneKey(node); !known {
		c.addToZone(it, zone)
	} else if zone != it.zone {
		c.removeFromZone(it)
		c.addToZone(it, zone)
	}
	c.touch(it)
}

// UpdateNode replaces a node (the same as AddNode).
func (c *Cache) UpdateNode(node *corev1.Node) { c.AddNode(node) }

// RemoveNode forgets a node. Its pods stay accounted (under a node-less
// entry that snapshots leave out) until they are removed themselves.
func (c *Cache) RemoveNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	it, ok := c.nodes[name]
	if !ok || it.info.Node() == nil {
		return
	}
	c.removeFromZone(it)
	it.info.SetNode(nil)
	if len(it.info.Pods) == 0 {
		c.unlink(it)
		delete(c.nodes, name)
		c.generation++
		return
	}
	c.touch(it)
}

func isTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// AddPod records an assigned pod seen by the informer. For a pod the
// scheduler assumed, this is the confirmation: the pod stops being assumed
// (and moves if it landed elsewhere). A pod that reached a terminal phase no
// longer holds resources and is removed instead; a pod without a node is not
// the cache's business and is ignored (removed, should it be held).
func (c *Cache) AddPod(pod *corev1.Pod) {
	if isTerminal(pod) || pod.Spec.NodeName == "" {
		c.RemovePod(pod)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := framework.PodKey(pod)
	if st, ok := c.pods[key]; ok {
		c.removeFromNode(st.pod)
	}
	c.addToNode(pod)
	c.pods[key] = &podState{pod: pod}
}

// UpdatePod records a new version of an assigned pod (the same as AddPod).
func (c *Cache) UpdatePod(pod *corev1.Pod) { c.AddPod(pod) }

// RemovePod forgets a pod, assumed or confirmed.
func (c *Cache) RemovePod(pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := framework.PodKey(pod)
	st, ok := c.pods[key]
	if !ok {
		return
	}
	c.removeFromNode(st.pod)
	delete(c.pods, key)
}

// AssumePod accounts pod on nodeName now, before the binding is written, so
// the next cycle sees the slot taken. The cache keeps its own copy with
// spec.nodeName set; pod is not modified.
func (c *Cache) AssumePod(pod *corev1.Pod, nodeName string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if nodeName == "" {
		return fmt.Errorf("assume pod %s/%s: empty node name", pod.Namespace, pod.Name)
	}
	key := framework.PodKey(pod)
	if _, ok := c.pods[key]; ok {
		return fmt.Errorf("assume pod %s/%s: %w", pod.Namespace, pod.Name, ErrAlreadyCached)
	}
	assumed := *pod
	assumed.Spec.NodeName = nodeName
	c.addToNode(&assumed)
	c.pods[key] = &podState{pod: &assumed, assumed: true}
	return nil
}

// FinishBinding starts the TTL of an assumed pod whose binding was written.
// It does nothing for a pod that is not assumed (the informer may already
// have confirmed it).
func (c *Cache) FinishBinding(pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.pods[framework.PodKey(pod)]; ok && st.assumed {
		st.bindingFinished = true
		st.deadline = c.clock.Now().Add(c.ttl)
	}
}

// ForgetPod undoes AssumePod after a failed binding. Forgetting a pod the
// cache no longer holds is a no-op; forgetting a confirmed one is refused
// with ErrNotAssumed.
func (c *Cache) ForgetPod(pod *corev1.Pod) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := framework.PodKey(pod)
	st, ok := c.pods[key]
	if !ok {
		return nil
	}
	if !st.assumed {
		return fmt.Errorf("forget pod %s/%s: %w", pod.Namespace, pod.Name, ErrNotAssumed)
	}
	c.removeFromNode(st.pod)
	delete(c.pods, key)
	return nil
}

// IsAssumed reports whether pod is assumed and not yet confirmed.
func (c *Cache) IsAssumed(pod *corev1.Pod) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.pods[framework.PodKey(pod)]
	return ok && st.assumed
}

// CleanupExpired drops assumed pods whose binding finished more than the
// TTL ago without confirmation and returns them (for the caller to log). It
// does nothing when the TTL is 0.
func (c *Cache) CleanupExpired() []*corev1.Pod {
	if c.ttl == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	var expired []*corev1.Pod
	for key, st := range c.pods {
		if !st.assumed || !st.bindingFinished || now.Before(st.deadline) {
			continue
		}
		c.removeFromNode(st.pod)
		delete(c.pods, key)
		expired = append(expired, st.pod)
	}
	return expired
}

func (c *Cache) addToNode(pod *corev1.Pod) {
	it := c.item(pod.Spec.NodeName)
	it.info.AddPod(framework.NewPodInfo(pod))
	c.touch(it)
}

func (c *Cache) removeFromNode(pod *corev1.Pod) {
	it, ok := c.nodes[pod.Spec.NodeName]
	if !ok {
		return
	}
	it.info.RemovePod(pod)
	if it.info.Node() == nil && len(it.info.Pods) == 0 {
		c.unlink(it)
		delete(c.nodes, it.name)
		c.generation++
		return
	}
	c.touch(it)
}

// NodeCount returns the number of known nodes.
func (c *Cache) NodeCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, it := range c.nodes {
		if it.info.Node() != nil {
			n++
		}
	}
	return n
}

// PodCount returns the number of pods held, assumed ones included.
func (c *Cache) PodCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pods)
}
