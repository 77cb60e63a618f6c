// Package docker is the "docker" cloud provider: nodes are containers on the
// local Docker engine (agents in containers, as in nodeplane's end-to-end
// tests, or a lab). It talks to the engine's HTTP API over its unix socket
// ($DOCKER_HOST when it is unix://..., else /var/run/docker.sock) with
// net/http, not the Docker client module.
//
// A Node's container is the one named by spec.providerID docker://<id>, else
// the container whose name is the Node name, else the one labelled
// nodeplane.io/node-name=<Node name>. It exists while the container exists;
// it is shut down while the container is not running (created, exited,
// dead; a paused container is running). Metadata: provider ID
// docker://<full id>, an InternalIP per network address (IPv4 and IPv6), the
// container's host name as the Hostname address, and zone, region and
// instance type from the container labels topology.kubernetes.io/zone,
// topology.kubernetes.io/region and node.kubernetes.io/instance-type.
package docker
