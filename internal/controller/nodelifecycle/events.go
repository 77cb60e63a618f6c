package nodelifecycle

import "fmt"

// EventSource is the component name on this controller's events (SPEC
// NLC-22).
const EventSource = "node-controller"

// Event reasons this controller emits (SPEC §10.4). RegisteredNode,
// RemovingNode and NodeNotReady on a Node are Normal; NodeNotReady on a Pod
// is a Warning.
const (
	ReasonRegisteredNode = "RegisteredNode"
	ReasonRemovingNode   = "RemovingNode"
	ReasonNodeNotReady   = "NodeNotReady"
)

// RegisteredNodeMessage is the RegisteredNode event's message.
func RegisteredNodeMessage(node string) string {
	return fmt.Sprintf("Node %s event: Registered Node %s in Controller", node, node)
}

// RemovingNodeMessage is the RemovingNode event's message.
func RemovingNodeMessage(node string) string {
	return fmt.Sprintf("Node %s event: Removing Node %s from Controller", node, node)
}

// NodeNotReadyMessage is the NodeNotReady event's message on the Node.
func NodeNotReadyMessage(node string) string {
	return fmt.Sprintf("Node %s status is now: NodeNotReady", node)
}

// PodNotReadyMessage is the NodeNotReady event's message on each pod marked
// Ready=False.
const PodNotReadyMessage = "Node is not ready"
