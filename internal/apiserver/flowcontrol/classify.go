package flowcontrol

import (
	"strings"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/apiserver/authz"
)

// Level is a priority level: a class of requests with its own seats.
type Level uint8

// The priority levels, from the most to the least protected.
const (
	// Exempt is the leader election of the server's controllers (Leases in
	// kube-system written by system:kube-controller-manager or
	// system:kube-scheduler). It is never limited: losing it stops every
	// controller, and it is one small write every retry period.
	Exempt Level = iota
	// System is the rest of the server's own controllers and scheduler.
	System
	// NodeHeartbeat is a node's Lease in kube-node-lease and its Node's
	// status: what keeps a node from being declared dead.
	NodeHeartbeat
	// Node is every other request of a node identity.
	Node
	// Admin is members of system:masters (kubectl with admin.kubeconfig).
	// Bounded, unlike upstream's exempt admins: tools that share the admin
	// credential cannot starve heartbeats or the controllers.
	Admin
	// Workload is everyone else.
	Workload

	// NumLevels is the number of levels.
	NumLevels = int(Workload) + 1
)

var levelNames = [NumLevels]string{"exempt", "system", "node-heartbeat", "node", "admin", "workload"}

// flowSchemaNames name the rule that put a request in each level (one rule
// per level), for the flow_schema label of the metrics.
var flowSchemaNames = [NumLevels]string{"leader-election", "system-controllers", "node-heartbeat", "node", "system-masters", "global-default"}

// String returns the level's name (the priority_level metric label).
func (l Level) String() string {
	if int(l) < NumLevels {
		return levelNames[l]
	}
	return "unknown"
}

// FlowSchema names the classification rule that selects the level.
func (l Level) FlowSchema() string {
	if int(l) < NumLevels {
		return flowSchemaNames[l]
	}
	return "unknown"
}

// Request is what classification looks at.
type Request struct {
	// User and Groups are the authenticated identity.
	User   string
	Groups []string
	// Path is the URL path.
	Path string
}

// Classify returns the priority level of a request. It does not allocate.
func Classify(r Request) Level {
	if r.User == authz.UserControllerManager || r.User == authz.UserScheduler {
		if isLeasePath(r.Path, "kube-system") {
			return Exempt
		}
		return System
	}
	isNode := false
	for _, g := range r.Groups {
		switch g {
		case authn.GroupMasters:
			return Admin
		case authn.GroupNodes:
			isNode = true
		}
	}
	if isNode && strings.HasPrefix(r.User, authz.NodeUserPrefix) {
		if isLeasePath(r.Path, "kube-node-lease") || isNodeStatusPath(r.Path) {
			return NodeHeartbeat
		}
		return Node
	}
	return Workload
}

// IsHeartbeat reports whether path is one object of a node's heartbeat: a
// Lease in kube-node-lease, or a Node's status. It looks at the path only
// (a request waiting for a worker is not authenticated yet), so a request
// it picks may still be classified otherwise. It does not allocate.
func IsHeartbeat(path string) bool {
	if isNodeStatusPath(path) {
		return true
	}
	rest, ok := leasesRest(path, "kube-node-lease")
	if !ok {
		return false
	}
	name, ok := strings.CutPrefix(rest, "/")
	return ok && name != "" && !strings.Contains(name, "/")
}

// isLeasePath reports whether p is /apis/coordination.k8s.io/<v>/namespaces/<ns>/leases[/...].
func isLeasePath(p, namespace string) bool {
	_, ok := leasesRest(p, namespace)
	return ok
}

// leasesRest returns what follows /leases in p, when p is
// /apis/coordination.k8s.io/<v>/namespaces/<ns>/leases[/...]: "" or a
// slash and more.
func leasesRest(p, namespace string) (string, bool) {
	rest, ok := strings.CutPrefix(p, "/apis/coordination.k8s.io/")
	if !ok {
		return "", false
	}
	if _, rest, ok = strings.Cut(rest, "/"); !ok {
		return "", false
	}
	if rest, ok = strings.CutPrefix(rest, "namespaces/"); !ok {
		return "", false
	}
	if rest, ok = strings.CutPrefix(rest, namespace); !ok {
		return "", false
	}
	if rest, ok = strings.CutPrefix(rest, "/leases"); !ok || (rest != "" && rest[0] != '/') {
		return "", false
	}
	return rest, true
}

// isNodeStatusPath reports whether p is /api/v1/nodes/<name>/status.
func isNodeStatusPath(p string) bool {
	rest, ok := strings.CutPrefix(p, "/api/v1/nodes/")
	if !ok {
		return false
	}
	name, sub, ok := strings.Cut(rest, "/")
	return ok && name != "" && sub == "status"
}

// IsLongRunning reports whether a request may legitimately last longer
// than the request timeout, so that it takes no seat and gets no deadline:
// watches (?watch=true|1 or a /watch/ path) and pod logs (which may follow
// for as long as the pod runs), as kube-apiserver. It does not allocate.
func IsLongRunning(method, path, rawQuery string) bool {
	if method != "GET" {
		return false
	}
	if queryIsTrue(rawQuery, "watch") || strings.Contains(path, "/watch/") {
		return true
	}
	return strings.Contains(path, "/pods/") && strings.HasSuffix(path, "/log")
}

// queryIsTrue reports whether the raw query sets key to true the way the
// API server reads a boolean parameter (requestinfo.go): its first value is
// neither "0" nor "false" (any case). It must agree with the handler, or a
// watch spelled ?watch=yes would take a seat and a request deadline.
func queryIsTrue(raw, key string) bool {
	v, ok := queryValue(raw, key)
	return ok && v != "0" && !strings.EqualFold(v, "false")
}
