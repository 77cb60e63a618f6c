package pki

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DefaultContextName names the cluster, user and context of a kubeconfig
// written by WriteKubeconfig when it is given no name.
const DefaultContextName = "nodeplane"

// WriteKubeconfig writes a kubeconfig to path for reaching serverURL with a
// client certificate: one cluster, one user and one current context, all
// named contextName ("nodeplane" if empty), with the CA, certificate and key
// embedded as data. The file gets mode 0600 and is replaced atomically; a
// missing parent directory is created with mode 0700.
func WriteKubeconfig(path, serverURL string, caPEM, certPEM, keyPEM []byte, contextName string) error {
	if serverURL == "" {
		return errors.New("write kubeconfig: empty server URL")
	}
	if contextName == "" {
		contextName = DefaultContextName
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[contextName] = &clientcmdapi.Cluster{
		Server:                   serverURL,
		CertificateAuthorityData: slices.Clone(caPEM),
	}
	cfg.AuthInfos[contextName] = &clientcmdapi.AuthInfo{
		ClientCertificateData: slices.Clone(certPEM),
		ClientKeyData:         slices.Clone(keyPEM),
	}
	cfg.Contexts[contextName] = &clientcmdapi.Context{
		Cluster:  contextName,
		AuthInfo: contextName,
	}
	cfg.CurrentContext = contextName
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("encode kubeconfig %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), dirMode); err != nil {
		return fmt.Errorf("create directory for kubeconfig %s: %w", path, err)
	}
	if err := writeFileAtomic(path, data, keyMode); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// ClientURL returns the https URL a local client uses to reach a server
// listening on listenAddr: an unspecified address (0.0.0.0 or ::) becomes
// 127.0.0.1, and an IPv6 address is bracketed.
func ClientURL(listenAddr net.Addr) string {
	var host, port string
	if tcp, ok := listenAddr.(*net.TCPAddr); ok {
		port = fmt.Sprint(tcp.Port)
		if len(tcp.IP) > 0 {
			host = tcp.IP.String()
			if tcp.Zone != "" {
				host += "%" + tcp.Zone
			}
		}
	} else {
		var err error
		host, port, err = net.SplitHostPort(listenAddr.String())
		if err != nil {
			host, port = listenAddr.String(), ""
		}
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	u := url.URL{Scheme: "https", Host: host}
	if port != "" {
		u.Host = net.JoinHostPort(host, port)
	}
	return u.String()
}
