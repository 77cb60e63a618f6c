// Package zonesapp is `nodeplane zones`: the node lifecycle controller's
// live view (zone states, sizes, unhealthy counts, taint rates, queued
// nodes, time since each node's last heartbeat), and, when the server runs
// a cloud provider, each node's provider state and automatic fencing
// decision, read from the leading server's /debug/nodeplane/zones.
package zonesapp

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeplane/nodeplane/internal/controller/nodelifecycle"
)

// Path is where the server serves the view.
const Path = nodelifecycle.ViewPath

// Response is the endpoint's body.
type Response = nodelifecycle.ViewResponse

// Command returns `nodeplane zones`.
func Command(stdout io.Writer) *cobra.Command {
	var kubeconfig, output string
	var nodes bool
	cmd := &cobra.Command{
		Use:   "zones",
		Short: "Show the node lifecycle controller's zones: state, size, unhealthy nodes, taint rate, queued nodes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("-o %q: want table or json", output)
			}
			if kubeconfig == "" {
				kubeconfig = os.Getenv("KUBECONFIG")
			}
			if kubeconfig == "" {
				kubeconfig = "./nodeplane-data/admin.kubeconfig"
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			body, err := cs.Discovery().RESTClient().Get().AbsPath(Path).DoRaw(cmd.Context())
			if err != nil {
				return fmt.Errorf("GET %s: %w", Path, err)
			}
			if output == "json" {
				_, err := stdout.Write(append(body, '\n'))
				return err
			}
			var r Response
			if err := json.Unmarshal(body, &r); err != nil {
				return fmt.Errorf("decode %s: %w", Path, err)
			}
			return Print(stdout, r, nodes)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "Admin kubeconfig (default $KUBECONFIG, else ./nodeplane-data/admin.kubeconfig)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	cmd.Flags().BoolVar(&nodes, "nodes", false, "Also list every node with the time since its last heartbeat")
	return cmd
}

// Print writes the view as tables.
func Print(w io.Writer, r Response, nodes bool) error {
	if !r.Leading {
		fmt.Fprintf(w, "this server is not running the controllers (leader: %s)\n", orDash(r.Leader))
		return nil
	}
	v := r.View
	fmt.Fprintf(w, "view fresh: %v   all zones disrupted: %v\n\n", v.Fresh, v.AllZonesDisrupted)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ZONE\tSTATE\tSIZE\tUNHEALTHY\tTAINT RATE (/s)\tQUEUED\tEVICTIONS")
	for _, z := range v.Zones {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%g\t%s\t%d\n", orDash(z.Name), z.State, z.Size, z.Unhealthy, z.TaintRate, queued(z.Queued), z.Evictions)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Cloud) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tPROVIDER\tFENCING")
		for _, c := range r.Cloud {
			state := orDash(c.Provider)
			if c.Provider == "" {
				state = "- (Ready: not asked)"
			}
			if c.Error != "" {
				state += ": " + c.Error
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Node, state, orDash(c.Fencing))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if !nodes {
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tZONE\tREADY\tSINCE HEARTBEAT\tNOEXECUTE\tQUEUED")
	for _, z := range v.Zones {
		for _, n := range z.Nodes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.1fs\t%s\t%v\n", n.Name, orDash(z.Name), orDash(string(n.Ready)), n.SinceHeartbeatSeconds, orDash(n.NoExecute), n.Queued)
		}
	}
	return tw.Flush()
}

func queued(names []string) string {
	switch {
	case len(names) == 0:
		return "0"
	case len(names) <= 3:
		return fmt.Sprintf("%d (%s)", len(names), strings.Join(names, ","))
	default:
		return fmt.Sprintf("%d (%s,...)", len(names), strings.Join(names[:3], ","))
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
