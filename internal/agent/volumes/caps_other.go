//go:build !linux

package volumes

import "errors"

// HasCapSysAdmin is false off Linux: no mount namespaces.
func HasCapSysAdmin() bool { return false }

func mountTmpfs(string) error { return errors.New("tmpfs needs Linux") }

func unmountIfMounted(string) {}
