// Package clusterapp is `nodeplane cluster create|delete` and `nodeplane
// node stop|start|kill|pause|unpause|isolate|connect`: a local multi-node,
// multi-zone cluster in Docker (internal/cluster) and the failures to
// rehearse on it.
package clusterapp

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodeplane/nodeplane/internal/cluster"
)

// DefaultBusyBox is where Debian's busybox-static puts its binary.
const DefaultBusyBox = "/bin/busybox"

// Command returns `nodeplane cluster`.
func Command(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Create or delete a local multi-node cluster in Docker (a server container and one container per node)",
	}
	cmd.AddCommand(createCommand(stdout), deleteCommand(stdout))
	return cmd
}

func createCommand(stdout io.Writer) *cobra.Command {
	cfg := cluster.Config{Name: cluster.DefaultName, Nodes: 3, BusyBox: DefaultBusyBox, Wait: 3 * time.Minute}
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Start a server and --nodes agents in Docker containers, one network per zone, and write an admin kubeconfig",
		Example: `  nodeplane cluster create --nodes 3 --zones a,b,c
  export KUBECONFIG=$PWD/nodeplane.kubeconfig
  kubectl get nodes -L topology.kubernetes.io/zone
  nodeplane node kill nodeplane-node-2
  nodeplane cluster delete`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Kubeconfig == "" {
				cfg.Kubeconfig = cfg.Name + ".kubeconfig"
			}
			if cfg.Binary == "" {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("find this binary to put it in the node image: %w", err)
				}
				cfg.Binary = exe
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			c := &cluster.Cluster{Name: cfg.Name, Docker: cluster.CLI{}, Out: stdout}
			if err := c.Create(cmd.Context(), cfg); err != nil {
				return err
			}
			abs, _ := filepath.Abs(cfg.Kubeconfig)
			fmt.Fprintf(stdout, "cluster %q is up: %d nodes Ready. Point kubectl at it with:\n\n    export KUBECONFIG=%s\n\n", cfg.Name, cfg.Nodes, abs)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.Name, "name", cfg.Name, "Cluster name: prefixes every container, network and image it creates")
	fs.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "Number of nodes (agent containers)")
	fs.StringSliceVar(&cfg.Zones, "zones", nil, "Zones, assigned to the nodes in turn: one Docker network each and the node label topology.kubernetes.io/zone")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "Where to write the admin kubeconfig (default ./<name>.kubeconfig)")
	fs.IntVar(&cfg.HostPort, "port", 0, "Publish the API server on 127.0.0.1:PORT (0 picks a free port)")
	fs.StringVar(&cfg.Binary, "binary", "", "Static nodeplane binary for the node image (default: this one)")
	fs.StringVar(&cfg.BusyBox, "busybox", cfg.BusyBox, "Static BusyBox copied into the node image so pods can run sh, sleep, wget (Debian: apt-get install busybox-static)")
	fs.StringArrayVar(&cfg.ServerArgs, "server-arg", nil, "Extra flag for `nodeplane server`, e.g. --server-arg=--node-monitor-grace-period=20s (repeatable)")
	fs.StringArrayVar(&cfg.AgentArgs, "agent-arg", nil, "Extra flag for every `nodeplane agent` (repeatable)")
	fs.DurationVar(&cfg.Wait, "wait", cfg.Wait, "How long to wait for the server and every node to be Ready")
	return cmd
}

func deleteCommand(stdout io.Writer) *cobra.Command {
	name := cluster.DefaultName
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Remove the cluster's containers, networks, image and kubeconfig (nothing to remove is no error)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := &cluster.Cluster{Name: name, Docker: cluster.CLI{}, Out: stdout}
			return c.Delete(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&name, "name", name, "Cluster name")
	return cmd
}

// NodeCommand returns `nodeplane node`.
func NodeCommand(stdout io.Writer) *cobra.Command {
	name := cluster.DefaultName
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Act on a node of a `nodeplane cluster create` cluster: stop, start, kill, pause, unpause, isolate, connect",
	}
	cmd.PersistentFlags().StringVar(&name, "cluster", name, "Cluster name (nodeplane cluster create --name)")
	for _, a := range []struct{ action, short string }{
		{"stop", "Stop the node's container with SIGTERM: a graceful node shutdown, then it exits"},
		{"start", "Start a stopped or killed node's container again"},
		{"kill", "Kill the node's container (SIGKILL): the machine vanishes without a word"},
		{"pause", "Freeze the node's container: no heartbeats, pods frozen"},
		{"unpause", "Thaw a paused node"},
		{"isolate", "Disconnect the node from its zone's network: it cannot reach the server"},
		{"connect", "Reconnect an isolated node to its zone's network"},
	} {
		action := a.action
		cmd.AddCommand(&cobra.Command{
			Use:   action + " NODE",
			Short: a.short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c := &cluster.Cluster{Name: name, Docker: cluster.CLI{}, Out: stdout}
				if err := c.Node(cmd.Context(), action, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(stdout, "node %s: %s\n", args[0], action)
				return nil
			},
		})
	}
	return cmd
}
