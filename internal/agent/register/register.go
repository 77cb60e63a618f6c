// Package register makes sure the agent's Node object exists (SPEC
// KUB-1..KUB-4): it builds the initial Node (well-known labels, user labels,
// taints for first creation, the attach/detach annotation, the full first
// status), creates it, and when it exists already reconciles only the
// default labels and the annotation — never taints or other labels.
//
// InitialNode and Reconcile are pure; Ensure is the retrying shell. With
// registerNode=false, Wait waits for an admin-created Node instead.
package register

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/nodelabels"
)

// AnnotationControllerManagedAttachDetach tells the attach/detach controller
// it owns this node's volumes.
const AnnotationControllerManagedAttachDetach = "volumes.kubernetes.io/controller-managed-attach-detach"

// TaintUnschedulable is added to a node registered unschedulable.
const TaintUnschedulable = "node.kubernetes.io/unschedulable"

// Retry timing (SPEC KUB-1): 100 ms doubling to 7 s.
const (
	firstBackoff = 100 * time.Millisecond
	maxBackoff   = 7 * time.Second
)

// Spec is what the initial Node is built from.
type Spec struct {
	Name     string
	Hostname string
	OS, Arch string
	// Labels from --node-labels, applied over the defaults.
	Labels map[string]string
	// Taints from registerWithTaints (first creation only).
	Taints []corev1.Taint
	// Unschedulable registers the node cordoned (+ the unschedulable taint).
	Unschedulable bool
	ProviderID    string
}

// defaultLabelKeys are reconciled on an existing Node (SPEC KUB-3).
var defaultLabelKeys = []string{
	nodelabels.Hostname, nodelabels.OS, nodelabels.Arch, nodelabels.BetaOS, nodelabels.BetaArch,
	nodelabels.Zone, nodelabels.Region, nodelabels.BetaZone, nodelabels.BetaRegion,
	nodelabels.InstanceType, nodelabels.BetaInstanceType,
}

// InitialNode builds the Node the agent creates, with status (computed by
// the caller) attached.
func InitialNode(s Spec, status corev1.NodeStatus) *corev1.Node {
	labels := map[string]string{
		nodelabels.Hostname: s.Hostname,
		nodelabels.OS:       s.OS,
		nodelabels.Arch:     s.Arch,
		nodelabels.BetaOS:   s.OS,
		nodelabels.BetaArch: s.Arch,
	}
	maps.Copy(labels, s.Labels)
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        s.Name,
			Labels:      labels,
			Annotations: map[string]string{AnnotationControllerManagedAttachDetach: "true"},
		},
		Spec: corev1.NodeSpec{
			Unschedulable: s.Unschedulable,
			ProviderID:    s.ProviderID,
			Taints:        append([]corev1.Taint(nil), s.Taints...),
		},
		Status: status,
	}
	if s.Unschedulable && !hasTaint(n.Spec.Taints, TaintUnschedulable, corev1.TaintEffectNoSchedule) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintUnschedulable, Effect: corev1.TaintEffectNoSchedule})
	}
	return n
}

func hasTaint(ts []corev1.Taint, key string, effect corev1.TaintEffect) bool {
	for _, t := range ts {
		if t.Key == key && t.Effect == effect {
			return true
		}
	}
	return false
}

// Reconcile returns the metadata merge patch that brings an existing Node's
// default labels and attach/detach annotation in line with the initial one,
// or nil when nothing differs. Values present on initial are copied; default
// labels that initial lacks are left alone; taints and other labels are
// never touched.
func Reconcile(existing, initial *corev1.Node) []byte {
	labels := map[string]any{}
	for _, k := range defaultLabelKeys {
		want, ok := initial.Labels[k]
		if !ok {
			continue
		}
		have, had := existing.Labels[k]
		switch {
		case want == "" && had:
			labels[k] = nil // an empty default label is removed
		case want != "" && have != want:
			labels[k] = want
		}
	}
	meta := map[string]any{}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	if existing.Annotations[AnnotationControllerManagedAttachDetach] != "true" {
		meta["annotations"] = map[string]any{AnnotationControllerManagedAttachDetach: "true"}
	}
	if len(meta) == 0 {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": meta})
	return patch
}

// Client is what registration needs from the API.
type Client interface {
	CreateNode(ctx context.Context, n *corev1.Node) (*corev1.Node, error)
	GetNode(ctx context.Context, name string) (*corev1.Node, error)
	PatchNode(ctx context.Context, name string, patch []byte) (*corev1.Node, error)
}

// Config configures Ensure and Wait.
type Config struct {
	Client Client
	Clock  clock.Clock
	Logger *slog.Logger
}

// Ensure creates the Node built by initial (called for each attempt, so the
// status is fresh) or reconciles the existing one, retrying with back-off
// until it succeeds or ctx ends. It returns the Node as stored and whether
// this call created it.
func Ensure(ctx context.Context, cfg Config, initial func() *corev1.Node) (node *corev1.Node, created bool, err error) {
	node, err = retry(ctx, cfg, func() (*corev1.Node, error) {
		want := initial()
		n, err := cfg.Client.CreateNode(ctx, want)
		if err == nil {
			created = true
			logger(cfg).Info("node registered", "node", want.Name)
			return n, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create node %q: %w", want.Name, err)
		}
		existing, err := cfg.Client.GetNode(ctx, want.Name)
		if err != nil {
			return nil, fmt.Errorf("get node %q: %w", want.Name, err)
		}
		patch := Reconcile(existing, want)
		if patch == nil {
			return existing, nil
		}
		n, err = cfg.Client.PatchNode(ctx, want.Name, patch)
		if err != nil {
			return nil, fmt.Errorf("reconcile node %q: %w", want.Name, err)
		}
		logger(cfg).Info("node already registered; default labels reconciled", "node", want.Name)
		return n, nil
	})
	return node, created, err
}

// Wait waits for an admin-created Node (registerNode=false) and returns it.
func Wait(ctx context.Context, cfg Config, name string) (*corev1.Node, error) {
	announced := false
	return retry(ctx, cfg, func() (*corev1.Node, error) {
		n, err := cfg.Client.GetNode(ctx, name)
		if apierrors.IsNotFound(err) && !announced {
			announced = true
			logger(cfg).Info("registration disabled; waiting for node to be created", "node", name)
		}
		if err != nil {
			return nil, fmt.Errorf("get node %q: %w", name, err)
		}
		return n, nil
	})
}

func retry(ctx context.Context, cfg Config, attempt func() (*corev1.Node, error)) (*corev1.Node, error) {
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	delay := firstBackoff
	for {
		n, err := attempt()
		if err == nil {
			return n, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !apierrors.IsNotFound(err) {
			logger(cfg).Warn("registration attempt failed", "err", err, "retryIn", delay)
		}
		t := clk.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C():
		}
		delay = min(delay*2, maxBackoff)
	}
}

func logger(cfg Config) *slog.Logger {
	if cfg.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return cfg.Logger
}
