// Package cloudnode is the cloud node controller (cloud-node-controller,
// SPEC §7 CNC-1..3). A Node that carries the
// node.cloudprovider.kubernetes.io/uninitialized taint (its agent runs with
// --cloud-provider=external) is initialised from the provider's instance
// metadata in one update: spec.providerID if empty, the instance-type, zone
// and region labels (stable and beta), the provider's additional labels
// outside kubernetes.io and k8s.io, and the taint removed; then its
// status.addresses are set and a Synced event is recorded. Every
// --node-status-update-frequency the addresses of initialised nodes are
// synced again, and the beta instance-type label is kept equal to the stable
// one.
//
// Initialize, SyncAddresses and ReconcileLabels are pure; the shell in
// controller.go runs the queue and its workers, asks the provider and writes
// through client-go.
package cloudnode
