// Package manager runs nodeplane's controllers inside the server, as
// kube-controller-manager does beside kube-apiserver: it elects one leader
// among the servers (a Lease in kube-system), and on the leader starts the
// enabled controllers on one shared informer factory. When leadership is
// lost it stops them and campaigns again; each leadership term starts from
// fresh informers, so a new leader never acts on another term's cache.
//
// Controllers reach the cluster only through the API (client-go); the
// manager owns nothing but the leadership term and the informers.
package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/intern"
)

// Controller is one control loop.
type Controller interface {
	// Name is the upstream kube-controller-manager name (--controllers).
	Name() string
	// Prepare registers the informers and event handlers the controller
	// needs for one leadership term; it runs before the informers start.
	Prepare(term *Term) error
	// Run works until ctx ends (the term is over). Informers are synced.
	Run(ctx context.Context)
}

// InformerController is a loop that needs nothing of a term but its
// informers (the scheduler): Adapt makes it a Controller without it
// importing this package.
type InformerController interface {
	Name() string
	PrepareInformers(informers.SharedInformerFactory) error
	Run(ctx context.Context)
}

// Adapt returns c as a Controller.
func Adapt(c InformerController) Controller { return adapted{c} }

type adapted struct{ InformerController }

func (a adapted) Prepare(term *Term) error { return a.PrepareInformers(term.Informers) }

// Term is one leadership term.
type Term struct {
	Informers informers.SharedInformerFactory
	// Since is when this server became leader.
	Since time.Time

	indexMu sync.Mutex
}

// Config configures the manager.
type Config struct {
	Client      kubernetes.Interface
	Controllers []Controller
	// LeaderElect campaigns for the Lease kube-system/<LeaseName>; false
	// runs the controllers at once (one server only).
	LeaderElect bool
	LeaseName   string
	Identity    string
	// LeaseDuration, RenewDeadline and RetryPeriod are the upstream
	// --leader-elect-* settings (15 s, 10 s, 2 s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// ResyncPeriod of the shared informers (0: none).
	ResyncPeriod time.Duration
	// SharedObjects says that Client's watches hand the informers the
	// server's own objects (package loopback): those are read only and
	// the server has shared their strings already, so the informers do
	// not share them again.
	SharedObjects bool
	Clock         clock.PassiveClock
	Logger        *slog.Logger
	// OnLeading, when set, is told when this server starts (true) or
	// stops (false) leading.
	OnLeading func(bool)
}

// Run runs until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil {
		return errors.New("controller manager: Client is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if len(cfg.Controllers) == 0 {
		<-ctx.Done()
		return nil
	}
	if !cfg.LeaderElect {
		runTerm(ctx, cfg)
		return nil
	}
	if cfg.LeaseName == "" {
		cfg.LeaseName = "kube-controller-manager"
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, "kube-system", cfg.LeaseName,
		cfg.Client.CoreV1(), cfg.Client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: cfg.Identity})
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   cfg.LeaseDuration,
			RenewDeadline:   cfg.RenewDeadline,
			RetryPeriod:     cfg.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            cfg.LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) { runTerm(ctx, cfg) },
				OnStoppedLeading: func() { cfg.Logger.Info("stopped leading", "lease", "kube-system/"+cfg.LeaseName) },
				OnNewLeader: func(id string) {
					if id != cfg.Identity {
						cfg.Logger.Info("controllers run on another server", "leader", id)
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		le.Run(ctx) // returns when leadership is lost or ctx ends
	}
	return nil
}

// runTerm starts every controller on fresh informers and waits for ctx.
func runTerm(ctx context.Context, cfg Config) {
	var opts []informers.SharedInformerOption
	if !cfg.SharedObjects {
		// The informers keep one copy of the strings and lists a fleet's
		// Nodes repeat (internal/intern): the values are unchanged, so an
		// object written back from the cache is the same object, and
		// informer objects are never modified (controllers copy first).
		shared := intern.NewTable(0)
		opts = append(opts, informers.WithTransform(func(obj any) (any, error) {
			shared.Frozen(obj)
			return obj, nil
		}))
	}
	term := &Term{
		Informers: informers.NewSharedInformerFactoryWithOptions(cfg.Client, cfg.ResyncPeriod, opts...),
		Since:     cfg.Clock.Now(),
	}
	var names []string
	var ready []Controller
	for _, c := range cfg.Controllers {
		if err := c.Prepare(term); err != nil {
			cfg.Logger.Error("controller not started", "controller", c.Name(), "err", err)
			continue
		}
		ready = append(ready, c)
		names = append(names, c.Name())
	}
	cfg.Logger.Info("leading: starting controllers", "controllers", strings.Join(names, ","))
	if cfg.OnLeading != nil {
		cfg.OnLeading(true)
		defer cfg.OnLeading(false)
	}
	term.Informers.Start(ctx.Done())
	defer term.Informers.Shutdown()
	for typ, ok := range term.Informers.WaitForCacheSync(ctx.Done()) {
		if !ok && ctx.Err() == nil {
			cfg.Logger.Error("informer did not sync", "type", typ.String())
		}
	}
	var wg sync.WaitGroup
	for _, c := range ready {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Run(ctx)
		}()
	}
	<-ctx.Done()
	wg.Wait()
}

// Known are the controllers nodeplane builds, by their upstream
// kube-controller-manager names (SPEC P1-2); --controllers accepts only
// these. A name is added here in the same change that builds the controller
// (internal/app/serverapp/controllers.go), so an upstream controller
// nodeplane does not run yet (route-controller, for one) is refused at
// start-up rather than silently doing nothing.
var Known = []string{
	"node-lifecycle-controller", "taint-eviction-controller", "pod-garbage-collector-controller",
	"garbage-collector-controller", "replicaset-controller", "deployment-controller", "daemonset-controller",
	"disruption-controller", "namespace-controller", "statefulset-controller", "scheduler",
	"persistentvolume-binder-controller", "persistentvolume-attach-detach-controller",
	"clusterrole-aggregation-controller",
	"cloud-node-controller", "cloud-node-lifecycle-controller",
	"node-ipam-controller",
	"persistentvolumeclaim-protection-controller", "persistentvolume-protection-controller",
}

// Selection is a parsed --controllers value.
type Selection struct {
	all      bool
	enabled  map[string]bool
	disabled map[string]bool
}

// ParseSelection parses --controllers: `*` (every controller on by
// default), `name` (turn one on), `-name` (turn one off). A name that is not
// in Known, with or without the `-`, is an error naming it.
func ParseSelection(values []string) (Selection, error) {
	s := Selection{enabled: map[string]bool{}, disabled: map[string]bool{}}
	known := map[string]bool{}
	for _, k := range Known {
		known[k] = true
	}
	var unknown []string
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v == "*" {
			s.all = true
			continue
		}
		name, off := strings.CutPrefix(v, "-")
		if !known[name] {
			unknown = append(unknown, fmt.Sprintf("%q is not in the list of known controllers", name))
			continue
		}
		if off {
			s.disabled[name] = true
		} else {
			s.enabled[name] = true
		}
	}
	if len(unknown) > 0 {
		return s, fmt.Errorf("--controllers: %s (known: *, %s; prefix - to disable)", strings.Join(unknown, "; "), strings.Join(Known, ", "))
	}
	return s, nil
}

// Enabled reports whether the named controller should run.
func (s Selection) Enabled(name string) bool {
	if s.disabled[name] {
		return false
	}
	return s.all || s.enabled[name]
}

// PodsByNode is the name of the pod informer index by spec.nodeName.
const PodsByNode = "spec.nodeName"

// PodsByNodeIndexer returns the term's pod informer indexer with an index of
// pods by spec.nodeName, adding the index once for every controller that
// asks (a second AddIndexers with the same name would fail).
func (t *Term) PodsByNodeIndexer() (cache.Indexer, error) {
	inf := t.Informers.Core().V1().Pods().Informer()
	t.indexMu.Lock()
	defer t.indexMu.Unlock()
	if _, ok := inf.GetIndexer().GetIndexers()[PodsByNode]; !ok {
		err := inf.AddIndexers(cache.Indexers{PodsByNode: func(obj any) ([]string, error) {
			if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
				return []string{p.Spec.NodeName}, nil
			}
			return nil, nil
		}})
		if err != nil {
			return nil, err
		}
	}
	return inf.GetIndexer(), nil
}
