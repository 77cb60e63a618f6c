// Package cloud builds the cloud provider named by --cloud-provider. A
// provider is a k8s.io/cloud-provider Interface that implements InstancesV2
// (exists, shut down, metadata per Node), so an out-of-tree provider written
// for the upstream cloud-controller-manager can be linked in here later.
//
// nodeplane's own providers are "static" (a YAML file of machines given with
// --cloud-config, package static) and "docker" (containers on the local
// Docker engine, package docker). "external" means another process (a
// cloud-controller-manager) runs the cloud controllers: the server runs none,
// and an agent started with --cloud-provider=external registers its Node with
// the node.cloudprovider.kubernetes.io/uninitialized taint.
package cloud
