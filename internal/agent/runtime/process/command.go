package process

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// defaultPath is the PATH of a container whose agent has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// launch is what a container instance runs.
type launch struct {
	argv []string // argv[0] as the spec wrote it
	path string   // resolved executable
	env  []string
	dir  string
}

// configError is a problem with the container's spec (an env source the
// runtime cannot provide); the kubelet reports it as
// Waiting/CreateContainerConfigError and retries without counting restarts.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

// resolveLaunch turns the container spec into argv, environment and working
// directory with Kubernetes' rules: command replaces the image's entrypoint
// (the image names the executable here), args replace its arguments, and
// $(VAR) references to the container's environment are expanded. An
// executable that cannot be found is returned as an *exec.Error, whose text
// is what a Kubernetes user sees from runc
// (`exec: "nosuch": executable file not found in $PATH`).
func resolveLaunch(pod *corev1.Pod, c *corev1.Container, host hostEnv) (launch, error) {
	env, err := containerEnv(pod, c, host)
	if err != nil {
		return launch{}, err
	}
	vars := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	var argv []string
	switch {
	case len(c.Command) > 0:
		argv = append(append(argv, c.Command...), c.Args...)
	default:
		argv = append([]string{c.Image}, c.Args...)
	}
	for i := range argv {
		argv[i] = expand(argv[i], vars)
	}
	if len(argv) == 0 || argv[0] == "" {
		return launch{}, &exec.Error{Name: "", Err: exec.ErrNotFound}
	}
	dir := c.WorkingDir
	if dir == "" {
		dir = "/"
	}
	path, err := lookPath(argv[0], vars["PATH"], dir)
	if err != nil && len(c.Command) > 0 && c.Image != "" {
		// A process "image" is its own entrypoint, and `kubectl create
		// deployment web --image=sleep -- 3600` puts the words after -- in
		// command: when command does not name a program, its words are the
		// image's arguments, which is what the user meant.
		if imagePath, ierr := lookPath(expand(c.Image, vars), vars["PATH"], dir); ierr == nil {
			argv = append([]string{expand(c.Image, vars)}, argv...)
			return launch{argv: argv, path: imagePath, env: env, dir: dir}, nil
		}
	}
	if err != nil {
		return launch{}, err
	}
	return launch{argv: argv, path: path, env: env, dir: dir}, nil
}

// lookPath finds an executable like exec.LookPath, but in the container's
// PATH, and resolves names with a slash against the working directory.
func lookPath(name, pathEnv, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", &exec.Error{Name: name, Err: err}
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return &fs.PathError{Op: "stat", Path: p, Err: fs.ErrPermission}
	}
	return nil
}

// Environment variables that tell a pod its node's pod address ranges
// (spec.podCIDR and spec.podCIDRs, comma-separated), set when the node has
// them. Processes share the node's network, so a pod that hands out
// addresses of its own (a CNI-like helper, a VM or network namespace
// launcher) takes them from these ranges.
const (
	EnvPodCIDR  = "NODEPLANE_POD_CIDR"
	EnvPodCIDRs = "NODEPLANE_POD_CIDRS"
)

// hostEnv is what the node contributes to a container's environment.
type hostEnv struct {
	nodeIP, path, home string
	// podCIDRs are the node's spec.podCIDRs when the container starts.
	podCIDRs []string
}

// containerEnv is the process environment: PATH and HOME of the agent,
// HOSTNAME = pod name (as in a pod), NODEPLANE_POD_CIDR(S) when the node
// has pod ranges, then the spec's env in order (later entries win), values
// expanded against the variables defined before them. The agent's other
// variables are not passed on.
func containerEnv(pod *corev1.Pod, c *corev1.Container, host hostEnv) ([]string, error) {
	nodeIP, agentPath := host.nodeIP, host.path
	if agentPath == "" {
		agentPath = defaultPath
	}
	names := []string{"PATH", "HOSTNAME"}
	vars := map[string]string{"PATH": agentPath, "HOSTNAME": pod.Name}
	if host.home != "" {
		names = append(names, "HOME")
		vars["HOME"] = host.home
	}
	if len(host.podCIDRs) > 0 {
		names = append(names, EnvPodCIDR, EnvPodCIDRs)
		vars[EnvPodCIDR] = host.podCIDRs[0]
		vars[EnvPodCIDRs] = strings.Join(host.podCIDRs, ",")
	}
	for _, e := range c.Env {
		var v string
		switch {
		case e.ValueFrom == nil:
			v = expand(e.Value, vars)
		case e.ValueFrom.FieldRef != nil:
			var err error
			if v, err = fieldValue(pod, e.ValueFrom.FieldRef.FieldPath, nodeIP); err != nil {
				return nil, &configError{fmt.Sprintf("env %q: %v", e.Name, err)}
			}
		case e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Optional != nil && *e.ValueFrom.SecretKeyRef.Optional,
			e.ValueFrom.ConfigMapKeyRef != nil && e.ValueFrom.ConfigMapKeyRef.Optional != nil && *e.ValueFrom.ConfigMapKeyRef.Optional:
			continue
		default:
			return nil, &configError{fmt.Sprintf("env %q: only literal values and fieldRef are supported by the process runtime", e.Name)}
		}
		if _, seen := vars[e.Name]; !seen {
			names = append(names, e.Name)
		}
		vars[e.Name] = v
	}
	env := make([]string, 0, len(names))
	for _, n := range names {
		env = append(env, n+"="+vars[n])
	}
	return env, nil
}

// fieldValue resolves a downward-API fieldRef. Processes share the node's
// network, so the pod IP is the node IP.
func fieldValue(pod *corev1.Pod, path, nodeIP string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs":
		return nodeIP, nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if rest, ok := strings.CutPrefix(path, prefix+"['"); ok {
			if key, ok := strings.CutSuffix(rest, "']"); ok {
				return m[key], nil
			}
		}
	}
	return "", errors.New("unsupported fieldPath " + path)
}

// expand replaces $(NAME) with the variable's value when it is defined,
// leaves undefined references as they are, and turns $$ into $ — the
// Kubernetes rules for command, args and env values.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
