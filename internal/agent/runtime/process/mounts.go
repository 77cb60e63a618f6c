package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeplane/nodeplane/internal/agent/runtime"
)

// Volumes reach a container through a mount namespace of its own: when an
// instance has mounts, its shim does not start the container's program
// directly but re-executes itself (Config.ShimCommand + mountExecArg) in a
// new mount namespace (CLONE_NEWNS). That helper makes every mount private
// (so nothing leaks back to the node or to other pods), bind-mounts each
// volume at its mountPath (read-only when asked), changes to the working
// directory and execs the container's program, keeping its pid. A failure
// is written to the helper's descriptor 3 and becomes the instance's
// StartError; success closes it on exec. Two pods can therefore mount
// different volumes at the same path. A mountPath missing on the node is
// created there first (an empty directory or file), as a bind mount needs
// a mount point.

// mountExecArg is the shim's first argument in its mount helper role.
const mountExecArg = "--mount-exec"

// mountSpec is one bind mount of an instance.
type mountSpec struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// planMounts turns a container's volumeMounts into bind mounts of the
// pod's prepared volumes (pure: no file system access).
func planMounts(c *corev1.Container, volumes map[string]runtime.Volume) ([]mountSpec, error) {
	var out []mountSpec
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("volume %q is not prepared on this node", m.Name)
		}
		if m.SubPathExpr != "" {
			return nil, fmt.Errorf("volumeMount %q: subPathExpr is not supported by the process runtime", m.Name)
		}
		if !filepath.IsAbs(m.MountPath) {
			return nil, fmt.Errorf("volumeMount %q: mountPath %q must be absolute", m.Name, m.MountPath)
		}
		src := v.HostPath
		if m.SubPath != "" {
			if filepath.IsAbs(m.SubPath) || hasDotDot(m.SubPath) {
				return nil, fmt.Errorf("volumeMount %q: subPath %q must be a relative path without '..'", m.Name, m.SubPath)
			}
			src = filepath.Join(src, m.SubPath)
		}
		out = append(out, mountSpec{Source: src, Target: filepath.Clean(m.MountPath), ReadOnly: m.ReadOnly || v.ReadOnly})
	}
	return out, nil
}

func hasDotDot(p string) bool {
	for _, e := range strings.Split(filepath.ToSlash(p), "/") {
		if e == ".." {
			return true
		}
	}
	return false
}

// containerMounts plans the container's mounts and makes missing subPath
// directories, refusing a subPath that leaves its volume through a symlink.
func containerMounts(c *corev1.Container, volumes map[string]runtime.Volume) ([]mountSpec, error) {
	mounts, err := planMounts(c, volumes)
	if err != nil {
		return nil, err
	}
	for i, m := range c.VolumeMounts {
		if m.SubPath == "" {
			continue
		}
		root := volumes[m.Name].HostPath
		src := mounts[i].Source
		if _, err := os.Lstat(src); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(src, 0o755); err != nil {
				return nil, fmt.Errorf("volumeMount %q: create subPath: %w", m.Name, err)
			}
		}
		realRoot, err1 := filepath.EvalSymlinks(root)
		realSrc, err2 := filepath.EvalSymlinks(src)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("volumeMount %q: %w", m.Name, err)
		}
		if rel, err := filepath.Rel(realRoot, realSrc); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, fmt.Errorf("volumeMount %q: subPath %q is outside the volume", m.Name, m.SubPath)
		}
		mounts[i].Source = realSrc
	}
	return mounts, nil
}
