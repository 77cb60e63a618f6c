package volumes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeplane/nodeplane/internal/agent/runtime"
)

// Client reads the objects a pod's volumes come from. The node identity
// may read only those referenced by pods bound to it.
type Client interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	GetPersistentVolumeClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	GetPersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error)
}

// Config configures a Manager.
type Config struct {
	Layout Layout
	Client Client
	// CanMount reports whether the agent may create mount namespaces and
	// mount (CAP_SYS_ADMIN); default: read from /proc/self/status.
	CanMount func() bool
	Logger   *slog.Logger
}

// Manager prepares pod volumes on the node and tracks the attachable ones
// in use.
type Manager struct {
	cfg Config

	mu    sync.Mutex
	inUse map[types.UID][]corev1.UniqueVolumeName
}

// NewManager returns a Manager.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Layout.PodsDir == "" || cfg.Client == nil {
		return nil, errors.New("volumes: Layout.PodsDir and Client are required")
	}
	if cfg.CanMount == nil {
		cfg.CanMount = HasCapSysAdmin
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{cfg: cfg, inUse: map[types.UID][]corev1.UniqueVolumeName{}}, nil
}

// MissingCapabilityMessage is the FailedMount message of a pod whose
// volumes need mounts the agent is not allowed to make.
const MissingCapabilityMessage = "cannot mount volumes: the agent lacks CAP_SYS_ADMIN, which a private mount namespace per container needs (run the agent as root, or in a container with --cap-add SYS_ADMIN)"

// Prepare makes the pod's volumes ready on the node and returns them by
// name for the runtime. A *Error says why not (yet). Preparing again is
// harmless: directories are kept, projections rewritten.
func (m *Manager) Prepare(ctx context.Context, pod *corev1.Pod, node *corev1.Node) (map[string]runtime.Volume, error) {
	if len(pod.Spec.Volumes) == 0 {
		return nil, nil
	}
	claims, err := m.readClaims(ctx, pod)
	if err != nil {
		return nil, err
	}
	sources, err := Resolve(pod, claims, m.cfg.Layout)
	if err != nil {
		return nil, err
	}
	m.track(pod.UID, InUse(sources))
	needsNS := NeedsMounts(pod)
	if needsNS && !m.cfg.CanMount() {
		return nil, &Error{Message: MissingCapabilityMessage}
	}
	if names := Unattached(sources, node); len(names) > 0 {
		return nil, UnattachedError(names)
	}
	out := make(map[string]runtime.Volume, len(sources))
	for _, s := range sources {
		if err := m.materialize(ctx, pod, s); err != nil {
			return nil, err
		}
		out[s.Name] = runtime.Volume{HostPath: s.Path, ReadOnly: s.ReadOnly}
	}
	return out, nil
}

// Track records the attachable volumes of a pod the runtime already runs
// (adopted after an agent restart), for volumesInUse.
func (m *Manager) Track(ctx context.Context, pod *corev1.Pod) {
	m.mu.Lock()
	_, known := m.inUse[pod.UID]
	m.mu.Unlock()
	// Released pods keep a nil entry, so they are not tracked again.
	if known || len(pod.Spec.Volumes) == 0 {
		return
	}
	claims, err := m.readClaims(ctx, pod)
	if err != nil {
		return
	}
	if sources, err := Resolve(pod, claims, m.cfg.Layout); err == nil {
		m.track(pod.UID, InUse(sources))
	}
}

func (m *Manager) track(uid types.UID, names []corev1.UniqueVolumeName) {
	m.mu.Lock()
	m.inUse[uid] = names
	m.mu.Unlock()
}

// VolumesInUse lists the attachable volumes of the pods the node runs or
// is about to run, sorted, for node.status.volumesInUse.
func (m *Manager) VolumesInUse() []corev1.UniqueVolumeName {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[corev1.UniqueVolumeName]bool{}
	var out []corev1.UniqueVolumeName
	for _, names := range m.inUse {
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Cleanup forgets a pod that is gone and removes its node-local volumes
// (emptyDir contents, projections; a Memory emptyDir is unmounted first).
// hostPath and shared-dir volumes are never touched.
func (m *Manager) Cleanup(uid types.UID) error {
	m.mu.Lock()
	delete(m.inUse, uid)
	m.mu.Unlock()
	dir := m.cfg.Layout.PodDir(string(uid))
	if uid == "" || filepath.Dir(dir) != filepath.Clean(m.cfg.Layout.PodsDir) {
		return fmt.Errorf("clean up volumes: bad pod uid %q", uid)
	}
	memDir := filepath.Join(dir, "volumes", "kubernetes.io~empty-dir")
	if entries, err := os.ReadDir(memDir); err == nil {
		for _, e := range entries {
			unmountIfMounted(filepath.Join(memDir, e.Name()))
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clean up volumes of pod %s: %w", uid, err)
	}
	return nil
}

// CleanupOrphans removes the volume directories of pods for which keep is
// false (pods that ended while the agent was down).
func (m *Manager) CleanupOrphans(keep func(types.UID) bool) {
	entries, err := os.ReadDir(m.cfg.Layout.PodsDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		uid := types.UID(e.Name())
		if e.IsDir() && !keep(uid) {
			if err := m.Cleanup(uid); err != nil {
				m.cfg.Logger.Warn("remove volumes of a gone pod", "uid", uid, "err", err)
			}
		}
	}
}

func (m *Manager) readClaims(ctx context.Context, pod *corev1.Pod) (Claims, error) {
	c := Claims{PVCs: map[string]*corev1.PersistentVolumeClaim{}, PVs: map[string]*corev1.PersistentVolume{}}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		name := v.PersistentVolumeClaim.ClaimName
		pvc, err := m.cfg.Client.GetPersistentVolumeClaim(ctx, pod.Namespace, name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return c, fmt.Errorf("read persistentvolumeclaim %s/%s: %w", pod.Namespace, name, err)
		}
		c.PVCs[name] = pvc
		if pvc.Spec.VolumeName == "" {
			continue
		}
		pv, err := m.cfg.Client.GetPersistentVolume(ctx, pvc.Spec.VolumeName)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return c, fmt.Errorf("read persistentvolume %s: %w", pvc.Spec.VolumeName, err)
		}
		c.PVs[pv.Name] = pv
	}
	return c, nil
}

func (m *Manager) materialize(ctx context.Context, pod *corev1.Pod, s Source) error {
	switch s.Kind {
	case KindEmptyDir:
		return mkdir(s.Name, s.Path, 0o777)
	case KindEmptyDirMemory:
		if err := mkdir(s.Name, s.Path, 0o777); err != nil {
			return err
		}
		if !m.cfg.CanMount() {
			return &Error{Message: fmt.Sprintf("emptyDir volume %q: medium Memory needs a tmpfs mount, and the agent lacks CAP_SYS_ADMIN", s.Name)}
		}
		if err := mountTmpfs(s.Path); err != nil {
			return &Error{Message: fmt.Sprintf("emptyDir volume %q: mount tmpfs: %v", s.Name, err)}
		}
	case KindHostPath:
		exists, mode := false, fs.FileMode(0)
		if fi, err := os.Stat(s.Path); err == nil {
			exists, mode = true, fi.Mode()
		}
		create, err := CheckHostPath(s.HostPathType, s.Path, exists, mode)
		if err != nil {
			return err
		}
		switch create {
		case CreateDirectory:
			return mkdir(s.Name, s.Path, 0o755)
		case CreateFile:
			if err := os.MkdirAll(filepath.Dir(s.Path), 0o755); err != nil {
				return &Error{Message: fmt.Sprintf("hostPath volume %q: %v", s.Name, err)}
			}
			f, err := os.OpenFile(s.Path, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return &Error{Message: fmt.Sprintf("hostPath volume %q: %v", s.Name, err)}
			}
			return f.Close()
		}
		if !exists {
			// Unset type: upstream mounts whatever is (or is not) there;
			// a bind mount needs something, so fail clearly.
			return &Error{Message: fmt.Sprintf("hostPath volume %q: %s does not exist", s.Name, s.Path)}
		}
	case KindConfigMap, KindSecret:
		return m.project(ctx, pod, s)
	case KindSharedDir:
		return mkdir(s.Name, s.Path, 0o777)
	}
	return nil
}

func mkdir(name, p string, mode fs.FileMode) error {
	if err := os.MkdirAll(p, mode); err != nil {
		return &Error{Message: fmt.Sprintf("volume %q: %v", name, err)}
	}
	return nil
}

func (m *Manager) project(ctx context.Context, pod *corev1.Pod, s Source) error {
	var data map[string][]byte
	found := true
	if s.Kind == KindSecret {
		sec, err := m.cfg.Client.GetSecret(ctx, pod.Namespace, s.ObjectName)
		switch {
		case apierrors.IsNotFound(err):
			found = false
		case err != nil:
			return &Error{Message: fmt.Sprintf("MountVolume.SetUp failed for volume %q: %v", s.Name, err)}
		default:
			data = sec.Data
		}
	} else {
		cm, err := m.cfg.Client.GetConfigMap(ctx, pod.Namespace, s.ObjectName)
		switch {
		case apierrors.IsNotFound(err):
			found = false
		case err != nil:
			return &Error{Message: fmt.Sprintf("MountVolume.SetUp failed for volume %q: %v", s.Name, err)}
		default:
			data = ConfigMapData(cm)
		}
	}
	files, err := Project(s, data, found)
	if err != nil {
		return &Error{Message: fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", s.Name, err)}
	}
	// Write into a fresh directory and swap it in, so a container never
	// sees a half-written projection.
	tmp := s.Path + ".new"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return &Error{Message: fmt.Sprintf("volume %q: %v", s.Name, err)}
	}
	for _, f := range files {
		p := filepath.Join(tmp, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return &Error{Message: fmt.Sprintf("volume %q: %v", s.Name, err)}
		}
		if err := os.WriteFile(p, f.Data, f.Mode.Perm()); err != nil {
			return &Error{Message: fmt.Sprintf("volume %q: %v", s.Name, err)}
		}
		if err := os.Chmod(p, f.Mode.Perm()); err != nil {
			return &Error{Message: fmt.Sprintf("volume %q: %v", s.Name, err)}
		}
	}
	_ = os.RemoveAll(s.Path)
	if err := os.Rename(tmp, s.Path); err != nil {
		return &Error{Message: fmt.Sprintf("volume %q: %v", s.Name, err)}
	}
	return nil
}

// Release drops a pod whose containers all stopped from the volumes in
// use; its directories stay until Cleanup.
func (m *Manager) Release(uid types.UID) {
	m.mu.Lock()
	if _, ok := m.inUse[uid]; ok {
		m.inUse[uid] = nil
	}
	m.mu.Unlock()
}
