package serverapp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/apiserver/authz"
	"github.com/nodeplane/nodeplane/internal/controller/leasegc"
	"github.com/nodeplane/nodeplane/internal/controller/manager"
	"github.com/nodeplane/nodeplane/internal/controller/podgc"
	"github.com/nodeplane/nodeplane/internal/controller/tainteviction"
	"github.com/nodeplane/nodeplane/internal/pki"
)

// controllerDeps is what building the controllers needs.
type controllerDeps struct {
	opts     Controllers
	client   kubernetes.Interface
	clock    clock.WithTicker
	logger   *slog.Logger
	registry prometheus.Registerer
}

// buildControllers returns the enabled, implemented controllers.
func buildControllers(d controllerDeps) ([]manager.Controller, error) {
	sel, err := manager.ParseSelection(d.opts.Enabled)
	if err != nil {
		return nil, err
	}
	var out []manager.Controller
	if sel.Enabled(tainteviction.ControllerName) {
		out = append(out, tainteviction.NewController(tainteviction.Config{
			Client: d.client, Clock: d.clock, Logger: d.logger, Registry: d.registry,
		}))
	}
	if sel.Enabled(podgc.ControllerName) {
		core := podgc.DefaultConfig()
		core.TerminatedPodThreshold = d.opts.TerminatedPodGCThreshold
		out = append(out, podgc.NewController(podgc.ControllerConfig{
			Core: core, Client: d.client, Clock: d.clock, Logger: d.logger, Registry: d.registry,
		}))
	}
	if sel.Enabled(leasegc.Name) {
		out = append(out, leasegc.New(d.client, d.logger))
	}
	return out, nil
}

// controllerClient is the controllers' own client: over the server's own
// HTTPS endpoint, as system:kube-controller-manager (authz trusts it).
func controllerClient(cluster *pki.Cluster, url string) (kubernetes.Interface, error) {
	certPEM, keyPEM, err := cluster.IssueClientCert(authz.UserControllerManager, nil, 365*24*time.Hour)
	if err != nil {
		return nil, fmt.Errorf("controller client certificate: %w", err)
	}
	cfg := &rest.Config{
		Host:            url,
		TLSClientConfig: rest.TLSClientConfig{CAData: cluster.CAPEM(), CertData: certPEM, KeyData: keyPEM},
		QPS:             200,
		Burst:           400,
		UserAgent:       "nodeplane-controller-manager",
		ContentConfig: rest.ContentConfig{
			ContentType:        "application/vnd.kubernetes.protobuf",
			AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json",
		},
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("controller client: %w", err)
	}
	return cs, nil
}

// runControllers runs the controller manager until ctx ends.
func runControllers(ctx context.Context, o Controllers, cluster *pki.Cluster, url string, clk clock.WithTicker, log *slog.Logger, reg prometheus.Registerer) error {
	client, err := controllerClient(cluster, url)
	if err != nil {
		return err
	}
	controllers, err := buildControllers(controllerDeps{opts: o, client: client, clock: clk, logger: log, registry: reg})
	if err != nil {
		return err
	}
	return manager.Run(ctx, manager.Config{
		Client:        client,
		Controllers:   controllers,
		LeaderElect:   o.LeaderElect,
		Identity:      identity(),
		LeaseDuration: o.LeaseDuration,
		RenewDeadline: o.RenewDeadline,
		RetryPeriod:   o.RetryPeriod,
		Clock:         clk,
		Logger:        log.With("component", "controller-manager"),
	})
}

// identity names this server in leader election: host name plus a random
// suffix, so two servers on one host differ.
func identity() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "_" + hex.EncodeToString(b)
}
