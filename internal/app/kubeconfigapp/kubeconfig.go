// Package kubeconfigapp is `nodeplane kubeconfig`: hand a person or a CI
// job access without a CertificateSigningRequest round trip. Run where the
// server's data directory is, it signs a client certificate for --user in
// the --group groups with the cluster CA and prints a kubeconfig embedding
// it. What the user may then do is what RBAC grants that user and those
// groups; revocation is by expiry only (keep --ttl short).
package kubeconfigapp

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nodeplane/nodeplane/internal/pki"
)

// Layout of the server's data directory (see `nodeplane server`).
const (
	adminKubeconfigFile = "admin.kubeconfig"
	pkiDir              = "pki"
)

// Reserved identities: nodes get theirs by joining, and the API server's
// own controllers are trusted like administrators.
var reservedUsers = []string{"system:kube-controller-manager", "system:kube-scheduler"}

// Options are the flag values.
type Options struct {
	DataDir string
	User    string
	Groups  []string
	TTL     time.Duration
	Server  string
}

// MaxTTL bounds --ttl: a certificate cannot be revoked, only outlived.
const MaxTTL = 365 * 24 * time.Hour

// Validate checks the flags and names the one at fault.
func (o Options) Validate() error {
	var errs []error
	if strings.TrimSpace(o.DataDir) == "" {
		errs = append(errs, errors.New("--data-dir must not be empty"))
	}
	switch {
	case strings.TrimSpace(o.User) == "":
		errs = append(errs, errors.New("--user is required"))
	case strings.HasPrefix(o.User, "system:node:") || slices.Contains(reservedUsers, o.User):
		errs = append(errs, fmt.Errorf("--user %q is reserved for nodeplane's own components (nodes get their identity by joining)", o.User))
	case strings.HasPrefix(o.User, "system:serviceaccount:"):
		errs = append(errs, fmt.Errorf("--user %q: service account names are reserved", o.User))
	}
	for _, g := range o.Groups {
		if strings.TrimSpace(g) == "" {
			errs = append(errs, errors.New("--group must not be empty"))
		}
		if g == "system:nodes" {
			errs = append(errs, errors.New("--group system:nodes is reserved for node identities (nodes get theirs by joining)"))
		}
	}
	if o.TTL <= 0 || o.TTL > MaxTTL {
		errs = append(errs, fmt.Errorf("--ttl %s: must be positive and at most %s", o.TTL, MaxTTL))
	}
	return errors.Join(errs...)
}

// Command returns `nodeplane kubeconfig`.
func Command(stdout io.Writer) *cobra.Command {
	o := Options{DataDir: "/var/lib/nodeplane/server", TTL: 24 * time.Hour}
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print a kubeconfig for a user, with a client certificate signed by the cluster CA",
		Long: `Run on the server host (it reads the cluster CA from --data-dir). The certificate names
--user and the --group groups; what they may do is what RBAC grants them, e.g.

  nodeplane kubeconfig --user alice --group ops > alice.kubeconfig
  kubectl create clusterrolebinding ops-view --clusterrole=view --group=ops

A certificate cannot be revoked: it is valid until it expires. Keep --ttl short and
remove the user's bindings to cut access sooner.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			data, err := Kubeconfig(o, time.Now)
			if err != nil {
				return err
			}
			_, err = stdout.Write(data)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "The server's data directory (holds the cluster CA and admin.kubeconfig)")
	fs.StringVar(&o.User, "user", "", "User name (the certificate's CN)")
	fs.StringSliceVar(&o.Groups, "group", nil, "Group (the certificate's O); repeat for several")
	fs.DurationVar(&o.TTL, "ttl", o.TTL, "How long the certificate is valid; it cannot be revoked before (max 8760h)")
	fs.StringVar(&o.Server, "server", "", "API server URL to write (default: the one in the data directory's admin.kubeconfig)")
	return cmd
}

// Kubeconfig issues the certificate and renders the kubeconfig.
func Kubeconfig(o Options, now func() time.Time) ([]byte, error) {
	issuer, err := pki.LoadIssuer(filepath.Join(o.DataDir, pkiDir), nil)
	if err != nil {
		return nil, fmt.Errorf("--data-dir %s: %w", o.DataDir, err)
	}
	server := o.Server
	if server == "" {
		admin, err := clientcmd.LoadFromFile(filepath.Join(o.DataDir, adminKubeconfigFile))
		if err != nil {
			return nil, fmt.Errorf("--data-dir %s: read the server URL: %w (or pass --server)", o.DataDir, err)
		}
		for _, c := range admin.Clusters {
			server = c.Server
		}
		if server == "" {
			return nil, fmt.Errorf("--data-dir %s: %s names no server (pass --server)", o.DataDir, adminKubeconfigFile)
		}
	}
	certPEM, keyPEM, notAfter, err := issuer.IssueClientCert(o.User, o.Groups, o.TTL)
	if err != nil {
		return nil, err
	}
	name := o.User + "@nodeplane"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["nodeplane"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: issuer.CAPEM()}
	cfg.AuthInfos[o.User] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "nodeplane", AuthInfo: o.User}
	cfg.CurrentContext = name
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encode kubeconfig: %w", err)
	}
	header := fmt.Sprintf("# nodeplane kubeconfig for user %q, groups %q; issued %s, expires %s (cannot be revoked before)\n",
		o.User, o.Groups, now().UTC().Format(time.RFC3339), notAfter.UTC().Format(time.RFC3339))
	return append([]byte(header), data...), nil
}
