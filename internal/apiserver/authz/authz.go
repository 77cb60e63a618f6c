// Package authz decides whether an authenticated user may make an API
// request (SPEC §8.1, P2-3), as kube-apiserver's authorizer chain does with
// --authorization-mode=Node,RBAC: administrators (group system:masters)
// and the server's own controllers may do anything; nodes
// (system:node:<name> in group system:nodes) only what the Node authorizer
// allows with AuthorizeNodeWithSelectors on (RBAC never widens a node
// identity); any authenticated user may read discovery, the version and
// the health endpoints; everything else is what the user's RBAC roles and
// bindings grant (package rbac).
//
// It owns the decision and the Forbidden error's wording. It does not
// authenticate (package authn puts the user on the context), does not
// restrict what a node writes into the objects it may write (that is the
// NodeRestriction admission plugin), and reads the objects a decision
// depends on only through the small Objects interface the API server
// implements over its watch caches; it never touches storage.
package authz

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/apiserver/rbac"
)

// Built-in identities.
const (
	// UserControllerManager and UserScheduler are the client-certificate
	// CNs of the server's in-process controllers and scheduler. They are
	// trusted like administrators for now: nodeplane does not yet ship the
	// per-controller roles kube-controller-manager's service accounts get.
	UserControllerManager = "system:kube-controller-manager"
	UserScheduler         = "system:kube-scheduler"

	// NodeUserPrefix starts the user name of every node identity.
	NodeUserPrefix = "system:node:"
)

// Attributes describe one request: either a resource request (Resource
// set) or a request for a non-resource path.
type Attributes struct {
	// Verb is the Kubernetes verb of a resource request (get, list, watch,
	// create, update, patch, delete, deletecollection) or the lower-case
	// HTTP method of a non-resource request.
	Verb string

	// ResourceRequest tells a resource request from a non-resource one.
	ResourceRequest bool
	APIGroup        string
	Resource        string
	Subresource     string
	Namespace       string
	// Name is the object named in the path ("" for list, watch and create).
	Name string
	// FieldSelector and LabelSelector are the raw selectors of a list or
	// watch. A list or watch whose field selector requires
	// metadata.name=<x> is treated as a request for the object x.
	FieldSelector string
	LabelSelector string

	// Path is the URL path of a non-resource request.
	Path string
}

// Objects reads the stored objects a node's access depends on (SPEC
// AUTH-2, AUTH-5). Each method returns nil and no error when the object
// does not exist. Answers may come from a watch cache a little behind
// storage, as upstream's authorizer graph is.
type Objects interface {
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	// PodsOnNode returns the pods whose spec.nodeName is node.
	PodsOnNode(ctx context.Context, node string) ([]*corev1.Pod, error)
	PersistentVolumeClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	VolumeAttachment(ctx context.Context, name string) (*storagev1.VolumeAttachment, error)
	// The RBAC roles and bindings.
	rbac.Policy
}

// Authorization modes, with kube-apiserver's --authorization-mode names.
const (
	ModeNode = "Node"
	ModeRBAC = "RBAC"
)

// DefaultModes is the default --authorization-mode.
var DefaultModes = []string{ModeNode, ModeRBAC}

// Config configures an Authorizer.
type Config struct {
	// TrustedUsers may do anything, like members of system:masters.
	// Default: UserControllerManager and UserScheduler.
	TrustedUsers []string
	// Modes are the authorizers after the fixed rules, from
	// --authorization-mode: Node (node identities) and RBAC (everyone
	// else). Default: DefaultModes.
	Modes []string
}

// Authorizer decides requests. It is safe for concurrent use.
type Authorizer struct {
	trusted map[string]bool
	node    bool
	rbac    bool
}

// ValidateModes checks an --authorization-mode list.
func ValidateModes(modes []string) error {
	seen := map[string]bool{}
	for _, m := range modes {
		if m != ModeNode && m != ModeRBAC {
			return fmt.Errorf("authorization mode %q is not supported (supported: %s, %s)", m, ModeNode, ModeRBAC)
		}
		if seen[m] {
			return fmt.Errorf("authorization mode %q is given twice", m)
		}
		seen[m] = true
	}
	return nil
}

// New returns an Authorizer.
func New(cfg Config) *Authorizer {
	if len(cfg.TrustedUsers) == 0 {
		cfg.TrustedUsers = []string{UserControllerManager, UserScheduler}
	}
	if cfg.Modes == nil {
		cfg.Modes = DefaultModes
	}
	z := &Authorizer{trusted: map[string]bool{}}
	for _, u := range cfg.TrustedUsers {
		z.trusted[u] = true
	}
	for _, m := range cfg.Modes {
		z.node = z.node || m == ModeNode
		z.rbac = z.rbac || m == ModeRBAC
	}
	return z
}

// Authorize returns nil when the user on ctx (see authn.UserFrom) may make
// the request, a Forbidden API error naming the rule when not, and another
// error when an object the decision depends on cannot be read.
func (z *Authorizer) Authorize(ctx context.Context, objs Objects, a Attributes) error {
	u, ok := authn.UserFrom(ctx)
	if !ok {
		return Forbidden(nil, a, "no user on the request")
	}
	allowed, reason, err := z.Decide(ctx, u, objs, a)
	if err != nil {
		return err
	}
	if !allowed {
		return Forbidden(u, a, reason)
	}
	return nil
}

// Decide returns whether u may make the request and, when not, why (the
// reason may be empty). Access reviews ask it about any user.
func (z *Authorizer) Decide(ctx context.Context, u *authn.User, objs Objects, a Attributes) (bool, string, error) {
	if u.InGroup(authn.GroupMasters) || z.trusted[u.Name] {
		return true, "", nil
	}
	if !a.ResourceRequest && publicPath(a) {
		return true, "", nil
	}
	node, isNode := NodeName(u)
	if isNode {
		// Nodes get exactly what the Node authorizer grants: RBAC never
		// widens a node identity.
		if !z.node || !a.ResourceRequest {
			return false, "", nil
		}
		if node == "" {
			return false, "could not determine node from user", nil
		}
		return decideNode(ctx, node, objs, a)
	}
	if !z.rbac || objs == nil {
		return false, "", nil
	}
	allowed, err := rbac.Allows(ctx, objs, u, rbacRequest(a))
	if err != nil {
		return false, "", fmt.Errorf("evaluate RBAC: %w", err)
	}
	return allowed, "", nil
}

// rbacRequest translates the attributes for RBAC. A list or watch
// selecting one object by metadata.name is about that object, as upstream
// (resourceNames rules apply).
func rbacRequest(a Attributes) rbac.Request {
	return rbac.Request{
		Verb: a.Verb, ResourceRequest: a.ResourceRequest, APIGroup: a.APIGroup, Resource: a.Resource,
		Subresource: a.Subresource, Namespace: a.Namespace, Name: targetName(a), Path: a.Path,
	}
}

// NodeName returns the node a user acts for (SPEC AUTH-1): a user is a node
// iff it is in group system:nodes and its name starts with
// "system:node:"; the name is the rest, which may be empty (a node identity
// that names no node, refused by both authorizer and admission).
func NodeName(u *authn.User) (name string, isNode bool) {
	if u == nil || !u.InGroup(authn.GroupNodes) || !strings.HasPrefix(u.Name, NodeUserPrefix) {
		return "", false
	}
	return strings.TrimPrefix(u.Name, NodeUserPrefix), true
}

// Forbidden builds the 403 kube-apiserver answers a refused request with:
//
//	pods "p" is forbidden: User "u" cannot get resource "pods" in API group "" in the namespace "default": <reason>
//
// and for a non-resource path:
//
//	forbidden: User "u" cannot get path "/metrics"
func Forbidden(u *authn.User, a Attributes, reason string) error {
	name := ""
	if u != nil {
		name = u.Name
	}
	var msg string
	var gr schema.GroupResource
	if a.ResourceRequest {
		gr = schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}
		resource := a.Resource
		if a.Subresource != "" {
			resource += "/" + a.Subresource
		}
		scope := "at the cluster scope"
		if a.Namespace != "" {
			scope = fmt.Sprintf("in the namespace %q", a.Namespace)
		}
		msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q %s", name, a.Verb, resource, a.APIGroup, scope)
	} else {
		msg = fmt.Sprintf("User %q cannot %s path %q", name, a.Verb, a.Path)
	}
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(gr, targetName(a), errors.New(msg))
}

// exactField returns the value a field selector requires field to equal.
// An unparsable selector requires nothing (the request itself fails with
// 400 later).
func exactField(selector, field string) (string, bool) {
	if selector == "" {
		return "", false
	}
	sel, err := fields.ParseSelector(selector)
	if err != nil {
		return "", false
	}
	return sel.RequiresExactMatch(field)
}

// targetName is the single object a request is about: the name in the
// path, or for a list or watch the metadata.name its field selector
// requires.
func targetName(a Attributes) string {
	if a.Name != "" {
		return a.Name
	}
	if a.Verb == "list" || a.Verb == "watch" {
		if n, ok := exactField(a.FieldSelector, "metadata.name"); ok {
			return n
		}
	}
	return ""
}
