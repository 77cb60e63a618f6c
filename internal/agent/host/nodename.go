package host

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// NodeName returns the node's name (SPEC KUB-4): override (the --node-name
// value) if it is not blank, else the hostname (--hostname-override or the
// machine's, see Hostname); trimmed and
// lower-cased. It must be a DNS-1123 subdomain, as every Node name must.
func (h *Host) NodeName(override string) (string, error) {
	if name := strings.ToLower(strings.TrimSpace(override)); name != "" {
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			return "", fmt.Errorf("--node-name %q is not a valid node name: %s", override, strings.Join(msgs, "; "))
		}
		return name, nil
	}
	name, err := h.Hostname()
	if err != nil {
		return "", fmt.Errorf("no --node-name given and %w", err)
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		if h.cfg.HostnameOverride != nil {
			return "", fmt.Errorf("--hostname-override %q is not a valid node name, set --node-name: %s", name, strings.Join(msgs, "; "))
		}
		return "", fmt.Errorf("hostname %q is not a valid node name, set --node-name: %s", name, strings.Join(msgs, "; "))
	}
	return name, nil
}
