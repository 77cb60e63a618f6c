// Package cloudnodelifecycle is the cloud node lifecycle controller
// (cloud-node-lifecycle-controller, SPEC §7 CNLC-1/2) and nodeplane's
// automatic fencing (SPEC P3-5).
//
// Every --node-monitor-period it walks the Nodes in its cache. A Ready node
// loses the node.cloudprovider.kubernetes.io/shutdown taint. For any other
// node it asks the provider whether the machine exists: a machine that does
// not exist has its Node deleted (DeletingNode event); one that is shut down
// gets the shutdown taint (NoSchedule). A provider error skips the node:
// nothing is deleted or tainted on an error.
//
// Automatic fencing (off by default, --enable-automatic-fencing) closes the
// loop upstream leaves to an operator: a node NotReady for longer than
// --automatic-fencing-delay whose machine the provider confirms shut down
// gets node.kubernetes.io/out-of-service=nodeshutdown:NoExecute (NodeFenced
// event), so the taint eviction controller and pod GC move its pods at once.
// The controller marks the Node with the annotation nodeplane.io/fenced-at
// and, once the node is Ready again, removes only a taint it added
// (NodeUnfenced event). An error or an "unknown" answer never fences, nor
// does a node that already carries an out-of-service taint someone else set.
//
// Core.Decide is the decision for one node given the time and the provider
// (a small interface, faked in tests); the shell in controller.go lists the
// Nodes, writes through client-go, records the events and keeps the last
// decision per node for `nodeplane zones`.
package cloudnodelifecycle
