package host

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Info returns the NodeSystemInfo facts the host knows: kernelVersion
// (/proc/sys/kernel/osrelease, or uname when Root is "/"), osImage
// (PRETTY_NAME from /etc/os-release or /usr/lib/os-release; "Linux" when
// neither says), machineID (/etc/machine-id, else /var/lib/dbus/machine-id;
// empty when neither exists, as in many containers), systemUUID
// (/sys/class/dmi/id/product_uuid; empty when absent or unreadable, it is
// root-only on most machines), bootID (/proc/sys/kernel/random/boot_id),
// operatingSystem and architecture (the Go runtime's). The runtime- and
// agent-version fields are left empty for their owners.
//
// Only a missing kernel version or boot ID is an error; the other fields are
// still filled.
func (h *Host) Info() (corev1.NodeSystemInfo, error) {
	info := corev1.NodeSystemInfo{
		OSImage:         h.osImage(),
		MachineID:       h.firstReadable("/etc/machine-id", "/var/lib/dbus/machine-id"),
		SystemUUID:      h.firstReadable("/sys/class/dmi/id/product_uuid"),
		OperatingSystem: runtime.GOOS,
		Architecture:    runtime.GOARCH,
	}
	var errs []error
	kernel, err := h.kernelVersion()
	if err != nil {
		errs = append(errs, fmt.Errorf("read kernel version: %w", err))
	}
	info.KernelVersion = kernel
	bootID, err := h.readString("/proc/sys/kernel/random/boot_id")
	if err == nil && bootID == "" {
		err = fmt.Errorf("%s is empty", h.path("/proc/sys/kernel/random/boot_id"))
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("read boot id: %w", err))
	}
	info.BootID = bootID
	return info, errors.Join(errs...)
}

func (h *Host) kernelVersion() (string, error) {
	release, err := h.readString("/proc/sys/kernel/osrelease")
	if err == nil && release != "" {
		return release, nil
	}
	if h.live() {
		return kernelRelease()
	}
	if err == nil {
		err = fmt.Errorf("%s is empty", h.path("/proc/sys/kernel/osrelease"))
	}
	return "", err
}

// firstReadable returns the content of the first of paths that can be read
// and is not empty, or "".
func (h *Host) firstReadable(paths ...string) string {
	for _, p := range paths {
		if s, err := h.readString(p); err == nil && s != "" {
			return s
		}
	}
	return ""
}

// osImage returns PRETTY_NAME from os-release(5), or "Linux".
func (h *Host) osImage() string {
	for _, p := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		b, err := os.ReadFile(h.path(p))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			break
		}
		if name := osReleaseValue(string(b), "PRETTY_NAME"); name != "" {
			return name
		}
		break
	}
	return "Linux"
}

// osReleaseValue returns the value of key in an os-release file: KEY=value
// lines whose value may be wrapped in double or single quotes.
func osReleaseValue(content, key string) string {
	for line := range strings.Lines(content) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || k != key {
			continue
		}
		switch {
		case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"':
			if u, err := strconv.Unquote(v); err == nil {
				return u
			}
			return v[1 : len(v)-1]
		case len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'':
			return v[1 : len(v)-1]
		}
		return v
	}
	return ""
}
