// Package nodeipam is the node IPAM controller (kube-controller-manager's
// node-ipam-controller with --cidr-allocator-type=RangeAllocator): it gives
// every Node a pod address range per cluster CIDR (spec.podCIDR and
// spec.podCIDRs) and takes the ranges back when Nodes are deleted.
//
// The allocator (cidrset.go, allocator.go) is the core: per cluster CIDR a
// bitmap of node-sized blocks with upstream's next-candidate search and
// wrap-around, occupy and release; it does no I/O. Decide and AfterReserve
// (core.go) are the pure decisions of one sync. The shell (controller.go)
// rebuilds the allocator from the Node informer's cache at the start of each
// leadership term, patches the Node through the API (client-go, never
// storage) and records the upstream events and metrics.
//
// # Where nodeplane differs from upstream
//
//   - A node left without a range because the cluster CIDR was exhausted is
//     queued again as soon as a range is released (upstream waits for its
//     rate-limited retry or the node's next update).
//   - When one family of a dual-stack pair is exhausted, the block just
//     taken from the other family is given back (upstream keeps it until
//     the controller restarts).
//   - The start-up rebuild reads the synced Node informer rather than
//     polling LIST itself; an error in it (a node's podCIDRs unparsable, out
//     of range, or more than the configured families) stops this controller
//     for the term with upstream's message in the log, rather than the whole
//     process.
package nodeipam
