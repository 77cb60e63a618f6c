// Package tokenapp is `nodeplane token`: create, list and delete the join
// tokens agents use to join the cluster. It talks to the server's
// administrators' endpoint (joinstate.Path) with an admin kubeconfig, so
// the tokens live in etcd and every server sharing it accepts them.
package tokenapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeplane/nodeplane/internal/join"
	"github.com/nodeplane/nodeplane/internal/join/joinstate"
)

// defaultKubeconfig is the admin kubeconfig of a server started in the
// current directory with the default --data-dir.
const defaultKubeconfig = "./nodeplane-data/admin.kubeconfig"

// Command returns `nodeplane token` and its subcommands.
func Command(stdout io.Writer) *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Manage join tokens: secrets that let an agent join the cluster, with an expiry",
		Long: `Join tokens have the form <id>.<secret>. The id is public (it names the token in
"token list"); the server stores only a hash of the secret, which is printed once, by
"token create". A deleted or expired token is refused; nodes that joined with it keep
their identity (they renew it with their certificate). The server's node-token file
is a join token too; it never expires.`,
	}
	cmd.PersistentFlags().StringVar(&kubeconfig, "kubeconfig", "", "Admin kubeconfig (default $KUBECONFIG, else "+defaultKubeconfig+")")
	client := func() (rest.Interface, error) { return restClient(kubeconfig) }
	cmd.AddCommand(createCommand(stdout, client), listCommand(stdout, client), deleteCommand(stdout, client))
	return cmd
}

func createCommand(stdout io.Writer, client func() (rest.Interface, error)) *cobra.Command {
	var ttl time.Duration
	var description string
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a join token and print it (the only time its secret is shown)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ttl < 0 {
				return fmt.Errorf("--ttl %s: must not be negative (0 means the token never expires)", ttl)
			}
			c, err := client()
			if err != nil {
				return err
			}
			body, err := json.Marshal(joinstate.CreateRequest{TTL: ttl.String(), Description: description})
			if err != nil {
				return err
			}
			var tok joinstate.Token
			if err := do(cmd.Context(), c.Post().AbsPath(joinstate.Path).SetHeader("Content-Type", "application/json").Body(body), &tok); err != nil {
				return fmt.Errorf("create join token: %w", err)
			}
			if _, _, ok := join.ParseToken(tok.Token); !ok {
				return errors.New("create join token: the server answered without a token")
			}
			_, err = fmt.Fprintln(stdout, tok.Token)
			return err
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 24*time.Hour, "How long the token is accepted (0: never expires)")
	cmd.Flags().StringVar(&description, "description", "", "A note shown by \"token list\"")
	return cmd
}

func listCommand(stdout io.Writer, client func() (rest.Interface, error)) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List join tokens: id, expiry, description (never the secret)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("-o %q: want table or json", output)
			}
			c, err := client()
			if err != nil {
				return err
			}
			var list joinstate.TokenList
			if err := do(cmd.Context(), c.Get().AbsPath(joinstate.Path), &list); err != nil {
				return fmt.Errorf("list join tokens: %w", err)
			}
			if output == "json" {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(list)
			}
			return Print(stdout, list, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

// Print writes the tokens as a table; now words the expiries.
func Print(w io.Writer, list joinstate.TokenList, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tEXPIRES\tDESCRIPTION")
	for _, t := range list.Items {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", t.ID, expiry(t, now), t.Description)
	}
	return tw.Flush()
}

func expiry(t joinstate.Token, now time.Time) string {
	switch {
	case t.Expires == nil:
		return "never"
	case t.Expired:
		return "expired " + t.Expires.UTC().Format(time.RFC3339)
	default:
		return fmt.Sprintf("%s (in %s)", t.Expires.UTC().Format(time.RFC3339), t.Expires.Sub(now).Round(time.Second))
	}
}

func deleteCommand(stdout io.Writer, client func() (rest.Interface, error)) *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID...",
		Short: "Delete join tokens: joins with them are refused from then on",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			for _, id := range ids {
				if id != joinstate.NodeTokenID && !join.ValidTokenID(id) {
					if tid, _, ok := join.ParseToken(id); ok {
						id = tid // the whole token was given: its id names it
					}
				}
				if err := do(cmd.Context(), c.Delete().AbsPath(joinstate.Path, id), nil); err != nil {
					return fmt.Errorf("delete join token %s: %w", id, err)
				}
				if _, err := fmt.Fprintf(stdout, "join token %s deleted\n", id); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// do sends req and decodes a successful answer into out (when not nil).
// An error answer is an *apierrors.StatusError with the server's message.
func do(ctx context.Context, req *rest.Request, out any) error {
	body, err := req.DoRaw(ctx)
	if err != nil {
		// The server's Status says what went wrong better than client-go's
		// generic wording of the code.
		var st metav1.Status
		if jerr := json.Unmarshal(body, &st); jerr == nil && st.Kind == "Status" && st.Message != "" {
			return errors.New(st.Message)
		}
		var se *apierrors.StatusError
		if errors.As(err, &se) {
			return errors.New(se.ErrStatus.Message)
		}
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}

func restClient(kubeconfig string) (rest.Interface, error) {
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	if kubeconfig == "" {
		kubeconfig = defaultKubeconfig
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	return cs.Discovery().RESTClient(), nil
}
