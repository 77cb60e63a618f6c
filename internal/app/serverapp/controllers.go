package serverapp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/apiserver"
	"github.com/nodeplane/nodeplane/internal/apiserver/authz"
	"github.com/nodeplane/nodeplane/internal/controller/cloudnodelifecycle"
	"github.com/nodeplane/nodeplane/internal/controller/clusterroleaggregation"
	"github.com/nodeplane/nodeplane/internal/controller/daemonset"
	"github.com/nodeplane/nodeplane/internal/controller/deployment"
	"github.com/nodeplane/nodeplane/internal/controller/disruption"
	"github.com/nodeplane/nodeplane/internal/controller/garbagecollector"
	"github.com/nodeplane/nodeplane/internal/controller/manager"
	"github.com/nodeplane/nodeplane/internal/controller/namespace"
	"github.com/nodeplane/nodeplane/internal/controller/nodeipam"
	"github.com/nodeplane/nodeplane/internal/controller/nodelifecycle"
	"github.com/nodeplane/nodeplane/internal/controller/podgc"
	"github.com/nodeplane/nodeplane/internal/controller/replicaset"
	"github.com/nodeplane/nodeplane/internal/controller/statefulset"
	"github.com/nodeplane/nodeplane/internal/controller/tainteviction"
	"github.com/nodeplane/nodeplane/internal/controller/volume/attachdetach"
	"github.com/nodeplane/nodeplane/internal/controller/volume/persistentvolume"
	"github.com/nodeplane/nodeplane/internal/controller/volume/pvcprotection"
	"github.com/nodeplane/nodeplane/internal/controller/volume/pvprotection"
	"github.com/nodeplane/nodeplane/internal/loopback"
	"github.com/nodeplane/nodeplane/internal/pki"
	"github.com/nodeplane/nodeplane/internal/scheduler"
)

// controllerDeps is what building the controllers needs.
type controllerDeps struct {
	opts     Controllers
	client   kubernetes.Interface
	metadata metadata.Interface
	clock    clock.WithTicker
	logger   *slog.Logger
	registry prometheus.Registerer
	// summaries gets the node lifecycle controller's per-pass summaries.
	summaries nodelifecycle.SummarySink
	// cloud is the provider of --cloud-provider, nil when none runs here.
	cloud cloudprovider.Interface
}

// builtViews are the controllers the zones view reads (nil when disabled).
type builtViews struct {
	nlc  *nodelifecycle.Controller
	cnlc *cloudnodelifecycle.Controller
}

// buildControllers returns the enabled, implemented controllers, and the
// lifecycle controllers among them (nil when disabled) for the zones view.
func buildControllers(d controllerDeps) ([]manager.Controller, builtViews, error) {
	var views builtViews
	sel, err := manager.ParseSelection(d.opts.Enabled)
	if err != nil {
		return nil, views, err
	}
	var out []manager.Controller
	var nlc *nodelifecycle.Controller
	if sel.Enabled(nodelifecycle.ControllerName) {
		nlc, err = nodelifecycle.NewController(nodelifecycle.ShellConfig{
			Core: nodelifecycle.Config{
				NodeMonitorPeriod:         d.opts.NodeMonitorPeriod,
				NodeMonitorGracePeriod:    d.opts.NodeMonitorGracePeriod,
				NodeStartupGracePeriod:    d.opts.NodeStartupGracePeriod,
				NodeEvictionRate:          d.opts.NodeEvictionRate,
				SecondaryNodeEvictionRate: d.opts.SecondaryNodeEvictionRate,
				UnhealthyZoneThreshold:    d.opts.UnhealthyZoneThreshold,
				LargeClusterSizeThreshold: d.opts.LargeClusterSizeThreshold,
			},
			Client: d.client, Clock: d.clock, Logger: d.logger, Registry: d.registry,
			Summaries: d.summaries,
		})
		if err != nil {
			return nil, views, err
		}
		out = append(out, nlc)
	}
	if sel.Enabled(tainteviction.ControllerName) {
		out = append(out, tainteviction.NewController(tainteviction.Config{
			Client: d.client, Clock: d.clock, Logger: d.logger, Registry: d.registry,
		}))
	}
	if sel.Enabled(clusterroleaggregation.ControllerName) {
		out = append(out, clusterroleaggregation.NewController(clusterroleaggregation.Config{Client: d.client, Logger: d.logger}))
	}
	if sel.Enabled(podgc.ControllerName) {
		core := podgc.DefaultConfig()
		core.TerminatedPodThreshold = d.opts.TerminatedPodGCThreshold
		core.Period = d.opts.PodGCPeriod
		out = append(out, podgc.NewController(podgc.ControllerConfig{
			Core: core, Client: d.client, Clock: d.clock, Logger: d.logger, Registry: d.registry,
		}))
	}
	if sel.Enabled(scheduler.Name) {
		// The scheduler shares the controllers' client (authz trusts both
		// system:kube-controller-manager and system:kube-scheduler alike).
		sched, err := scheduler.New(scheduler.Config{Client: d.client, Clock: d.clock, Logger: d.logger, Registry: d.registry})
		if err != nil {
			return nil, views, err
		}
		out = append(out, manager.Adapt(sched))
	}
	if sel.Enabled(replicaset.ControllerName) {
		out = append(out, replicaset.NewController(replicaset.Config{Client: d.client, Clock: d.clock, Logger: d.logger}))
	}
	if sel.Enabled(deployment.ControllerName) {
		out = append(out, deployment.NewController(deployment.Config{Client: d.client, Clock: d.clock, Logger: d.logger}))
	}
	if sel.Enabled(daemonset.ControllerName) {
		out = append(out, daemonset.NewController(daemonset.Config{Client: d.client, Clock: d.clock, Logger: d.logger}))
	}
	if sel.Enabled(statefulset.ControllerName) {
		out = append(out, statefulset.NewController(statefulset.Config{Client: d.client, Clock: d.clock, Logger: d.logger}))
	}
	if sel.Enabled(disruption.ControllerName) {
		out = append(out, disruption.NewController(disruption.Config{Client: d.client, Clock: d.clock, Logger: d.logger}))
	}
	if sel.Enabled(namespace.ControllerName) {
		out = append(out, namespace.NewController(namespace.Config{Client: d.client, Metadata: d.metadata, Clock: d.clock, Logger: d.logger}))
	}
	if sel.Enabled(garbagecollector.ControllerName) {
		cfg := garbagecollector.DefaultConfig()
		cfg.Client, cfg.Clock, cfg.Logger = d.client, d.clock, d.logger
		out = append(out, garbagecollector.New(cfg))
	}
	if sel.Enabled(persistentvolume.ControllerName) {
		out = append(out, persistentvolume.NewController(persistentvolume.Config{
			Client: d.client, Clock: d.clock, Logger: d.logger,
			SyncPeriod: d.opts.PVClaimBinderSyncPeriod, SharedVolumeRoot: d.opts.SharedVolumeRoot,
		}))
	}
	if sel.Enabled(attachdetach.ControllerName) {
		out = append(out, attachdetach.NewController(attachdetach.ControllerConfig{
			Core: attachdetach.Config{
				MaxWaitForUnmount:           d.opts.MaxWaitForUnmount,
				DisableForceDetachOnTimeout: d.opts.DisableForceDetachOnTimeout,
			},
			Client: d.client, Clock: d.clock, Logger: d.logger, Registry: d.registry,
		}))
	}
	if sel.Enabled(pvcprotection.ControllerName) {
		out = append(out, pvcprotection.NewController(pvcprotection.Config{Client: d.client, Clock: d.clock, Logger: d.logger}))
	}
	if sel.Enabled(pvprotection.ControllerName) {
		out = append(out, pvprotection.NewController(pvprotection.Config{Client: d.client, Clock: d.clock, Logger: d.logger}))
	}
	if d.opts.ipamEnabled(sel) {
		ipam, err := buildNodeIPAM(d)
		if err != nil {
			return nil, views, err
		}
		out = append(out, ipam)
	}
	cloudControllers, cnlc, err := buildCloudControllers(d, sel)
	if err != nil {
		return nil, views, err
	}
	out = append(out, cloudControllers...)
	views.nlc, views.cnlc = nlc, cnlc
	return out, views, nil
}

// buildNodeIPAM builds the node-ipam-controller (SPEC §6).
func buildNodeIPAM(d controllerDeps) (*nodeipam.Controller, error) {
	cfg, err := d.opts.IPAM.Parse()
	if err != nil {
		return nil, err
	}
	return nodeipam.NewController(nodeipam.ShellConfig{
		IPAM: cfg, Client: d.client, Clock: d.clock, Logger: d.logger, Registry: d.registry,
	})
}

// controllerClient is the controllers' own client, and a metadata-only
// client beside it, as system:kube-controller-manager (authz trusts it).
// Its requests go through handler, the server's whole handler chain, in
// process (package loopback): no TLS, socket or HTTP/2 framing, but the
// same authentication, authorization, flow control and admission as over
// HTTPS. url only names the server in the requests.
func controllerClient(cluster *pki.Cluster, url string, handler http.Handler, log *slog.Logger) (kubernetes.Interface, metadata.Interface, error) {
	// No handshake uses the key: the certificate is the requests' identity.
	certPEM, _, err := cluster.IssueClientCert(authz.UserControllerManager, nil, 365*24*time.Hour)
	if err != nil {
		return nil, nil, fmt.Errorf("controller client certificate: %w", err)
	}
	// Their requests start on warm workers of their own (grown stacks), as
	// the network's do on the listener's: a zone going dark means
	// thousands of Node writes, each through the whole chain.
	transport, err := loopback.New(loopback.Config{
		Handler: handler, CertPEM: certPEM, Roots: cluster.CertPool(), Logger: log.With("component", "loopback"),
		Go: apiserver.NewWarmWorkers(warmWorkers).GoServe,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("controller client: %w", err)
	}
	cfg := &rest.Config{
		Host:      url,
		Transport: transport,
		// The controllers run beside the API server; its flow control
		// paces them (their level's queue: a request waits for a seat),
		// not a client-side rate limiter (a zone going dark means
		// thousands of status writes and events in one pass).
		QPS:       5000,
		Burst:     10000,
		UserAgent: "nodeplane-controller-manager",
		ContentConfig: rest.ContentConfig{
			ContentType:        "application/vnd.kubernetes.protobuf",
			AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json",
		},
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("controller client: %w", err)
	}
	handoff, err := newHandoffClientset(cs, cfg, transport)
	if err != nil {
		return nil, nil, err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("controller metadata client: %w", err)
	}
	return handoff, md, nil
}

// runControllers runs the controller manager until ctx ends.
func runControllers(ctx context.Context, o Controllers, client kubernetes.Interface, controllers []manager.Controller, identity string, clk clock.WithTicker, log *slog.Logger) error {
	// The controllers' informers hold the server's own objects when the
	// client hands them over (handoffClientset).
	_, shared := client.(handoffClientset)
	return manager.Run(ctx, manager.Config{
		Client:        client,
		Controllers:   controllers,
		LeaderElect:   o.LeaderElect,
		Identity:      identity,
		LeaseDuration: o.LeaseDuration,
		RenewDeadline: o.RenewDeadline,
		RetryPeriod:   o.RetryPeriod,
		Clock:         clk,
		Logger:        log.With("component", "controller-manager"),
		SharedObjects: shared,
	})
}

// zonesHandler serves the node lifecycle controller's live view
// (`nodeplane zones`).
func zonesHandler(controller *atomic.Pointer[nodelifecycle.Controller], cloud *atomic.Pointer[cloudnodelifecycle.Controller]) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var resp nodelifecycle.ViewResponse
		if nlc := controller.Load(); nlc != nil {
			resp.View, resp.Leading = nlc.View()
		}
		if c := cloud.Load(); c != nil && resp.Leading {
			for _, st := range c.States() {
				resp.Cloud = append(resp.Cloud, nodelifecycle.CloudNodeState(st))
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	})
}
