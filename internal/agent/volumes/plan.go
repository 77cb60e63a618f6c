// Package volumes prepares a pod's volumes on the node for the process
// runtime: emptyDir (a directory per pod under the agent's data dir, or a
// tmpfs for medium Memory), hostPath (with the upstream type checks),
// configMap and secret projections (files written from the API objects),
// and persistentVolumeClaim volumes whose PersistentVolume is a CSI volume
// of the built-in driver nodeplane.io/shared-dir (a directory under
// --shared-volume-root, mounted only once the node's
// status.volumesAttached lists it, SPEC ADC-5).
//
// The pure part (this file) decides from the pod, its claims' volumes and
// the Node what each volume is, what the pod still waits for, and what a
// hostPath check or a projection yields; Manager (mounter.go) is the thin
// shell that reads the API objects, touches the file system and keeps the
// set of attachable volumes in use for node.status.volumesInUse. The
// containers see the prepared paths through the runtime's per-container
// mount namespace (package runtime/process); this package never mounts
// anything into a container itself.
package volumes

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeplane/nodeplane/internal/volume/shareddir"
)

// DriverSharedDir is the built-in network-volume CSI driver: a volume is
// the directory <shared volume root>/<volumeHandle>.
const DriverSharedDir = shareddir.Driver

// ReasonFailedMount is the event reason of a volume that cannot be
// prepared (upstream's).
const ReasonFailedMount = "FailedMount"

// UniqueName is the name of a CSI volume in node.status.volumesAttached
// and volumesInUse, as upstream's CSI plugin names it.
func UniqueName(driver, handle string) corev1.UniqueVolumeName {
	return shareddir.UniqueVolumeName(driver, handle)
}

// Kind is what backs a pod volume on the node.
type Kind string

// The kinds of volume the agent prepares.
const (
	KindEmptyDir       Kind = "emptyDir"
	KindEmptyDirMemory Kind = "emptyDir(Memory)"
	KindHostPath       Kind = "hostPath"
	KindConfigMap      Kind = "configMap"
	KindSecret         Kind = "secret"
	KindSharedDir      Kind = "sharedDir"
)

// Layout says where volumes live on this node.
type Layout struct {
	// PodsDir holds per-pod volume directories: <PodsDir>/<uid>/volumes/<plugin>/<name>.
	PodsDir string
	// SharedRoot is --shared-volume-root (empty: shared-dir volumes cannot
	// be used on this node).
	SharedRoot string
}

// PodDir is the directory holding all of a pod's node-local volumes.
func (l Layout) PodDir(uid string) string { return filepath.Join(l.PodsDir, uid) }

// Source is one pod volume as the node provides it.
type Source struct {
	Name string
	Kind Kind
	// Path is the node path the containers see.
	Path string
	// ReadOnly mounts every use read-only.
	ReadOnly bool
	// HostPathType is the hostPath volume's type check.
	HostPathType corev1.HostPathType
	// ObjectName names the ConfigMap or Secret projected.
	ObjectName string
	Items      []corev1.KeyToPath
	// DefaultMode of projected files (0644 when unset).
	DefaultMode int32
	Optional    bool
	// Unique is the attachable volume's unique name (sharedDir).
	Unique corev1.UniqueVolumeName
}

// Claims are a pod's claims and their volumes, as read from the API (a
// missing entry: not found).
type Claims struct {
	PVCs map[string]*corev1.PersistentVolumeClaim
	PVs  map[string]*corev1.PersistentVolume
}

// Error is a volume problem of a pod, reported as a FailedMount event.
// Waiting errors are expected to clear by themselves (a volume not attached
// yet, a claim not bound yet).
type Error struct {
	Message string
	Waiting bool
}

func (e *Error) Error() string { return e.Message }

func failed(format string, args ...any) *Error {
	return &Error{Message: fmt.Sprintf(format, args...)}
}

// DefaultMode is the mode of projected files when the volume sets none.
const DefaultMode int32 = 0o644

// Resolve decides what backs each of the pod's volumes. Only the volume
// types the agent supports are accepted; others fail with a message naming
// the volume and its type.
func Resolve(pod *corev1.Pod, claims Claims, l Layout) ([]Source, error) {
	podDir := l.PodDir(string(pod.UID))
	var out []Source
	for _, v := range pod.Spec.Volumes {
		s := Source{Name: v.Name}
		switch {
		case v.EmptyDir != nil:
			s.Kind = KindEmptyDir
			if v.EmptyDir.Medium == corev1.StorageMediumMemory {
				s.Kind = KindEmptyDirMemory
			} else if v.EmptyDir.Medium != corev1.StorageMediumDefault {
				return nil, failed("emptyDir volume %q: medium %q is not supported by the process runtime", v.Name, v.EmptyDir.Medium)
			}
			s.Path = filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", v.Name)
		case v.HostPath != nil:
			s.Kind = KindHostPath
			s.Path = filepath.Clean(v.HostPath.Path)
			if v.HostPath.Type != nil {
				s.HostPathType = *v.HostPath.Type
			}
		case v.ConfigMap != nil:
			s.Kind, s.ReadOnly = KindConfigMap, true
			s.Path = filepath.Join(podDir, "volumes", "kubernetes.io~configmap", v.Name)
			s.ObjectName, s.Items = v.ConfigMap.Name, v.ConfigMap.Items
			s.DefaultMode = modeOr(v.ConfigMap.DefaultMode)
			s.Optional = v.ConfigMap.Optional != nil && *v.ConfigMap.Optional
		case v.Secret != nil:
			s.Kind, s.ReadOnly = KindSecret, true
			s.Path = filepath.Join(podDir, "volumes", "kubernetes.io~secret", v.Name)
			s.ObjectName, s.Items = v.Secret.SecretName, v.Secret.Items
			s.DefaultMode = modeOr(v.Secret.DefaultMode)
			s.Optional = v.Secret.Optional != nil && *v.Secret.Optional
		case v.PersistentVolumeClaim != nil:
			var err error
			if s, err = claimSource(pod, v, claims, l); err != nil {
				return nil, err
			}
		default:
			return nil, failed("volume %q: %s volumes are not supported by the process runtime (supported: emptyDir, hostPath, configMap, secret, persistentVolumeClaim)", v.Name, volumeType(v.VolumeSource))
		}
		out = append(out, s)
	}
	return out, nil
}

func modeOr(m *int32) int32 {
	if m == nil {
		return DefaultMode
	}
	return *m
}

func claimSource(pod *corev1.Pod, v corev1.Volume, claims Claims, l Layout) (Source, error) {
	name := v.PersistentVolumeClaim.ClaimName
	pvc := claims.PVCs[name]
	if pvc == nil {
		return Source{}, &Error{Message: fmt.Sprintf("persistentvolumeclaim %q not found", name), Waiting: true}
	}
	if pvc.DeletionTimestamp != nil {
		return Source{}, failed("persistentvolumeclaim %q is being deleted", name)
	}
	if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		return Source{}, &Error{Message: fmt.Sprintf("persistentvolumeclaim %q is not bound", name), Waiting: true}
	}
	pv := claims.PVs[pvc.Spec.VolumeName]
	if pv == nil {
		return Source{}, &Error{Message: fmt.Sprintf("persistentvolume %q not found", pvc.Spec.VolumeName), Waiting: true}
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Name != pvc.Name || ref.Namespace != pvc.Namespace || (ref.UID != "" && ref.UID != pvc.UID) {
		return Source{}, failed("persistentvolume %q is not bound to claim %s/%s", pv.Name, pod.Namespace, name)
	}
	csi := pv.Spec.CSI
	if csi == nil || csi.Driver != DriverSharedDir {
		return Source{}, failed("persistentvolume %q: only CSI volumes of driver %s are supported by the process runtime", pv.Name, DriverSharedDir)
	}
	if why := shareddir.ValidHandle(csi.VolumeHandle); why != "" {
		return Source{}, failed("persistentvolume %q: %s", pv.Name, why)
	}
	if l.SharedRoot == "" {
		return Source{}, failed("persistentvolume %q uses driver %s, but this node has no --shared-volume-root", pv.Name, DriverSharedDir)
	}
	return Source{
		Name:     v.Name,
		Kind:     KindSharedDir,
		Path:     filepath.Join(l.SharedRoot, csi.VolumeHandle),
		ReadOnly: v.PersistentVolumeClaim.ReadOnly || csi.ReadOnly,
		Unique:   UniqueName(csi.Driver, csi.VolumeHandle),
	}, nil
}

func volumeType(vs corev1.VolumeSource) string {
	switch {
	case vs.Projected != nil:
		return "projected"
	case vs.DownwardAPI != nil:
		return "downwardAPI"
	case vs.NFS != nil:
		return "nfs"
	case vs.CSI != nil:
		return "csi"
	case vs.Ephemeral != nil:
		return "ephemeral"
	}
	return "these"
}

// Unattached lists the attachable volumes of sources that node's
// status.volumesAttached does not list yet, by volume name.
func Unattached(sources []Source, node *corev1.Node) []string {
	attached := map[corev1.UniqueVolumeName]bool{}
	if node != nil {
		for _, a := range node.Status.VolumesAttached {
			attached[a.Name] = true
		}
	}
	var out []string
	for _, s := range sources {
		if s.Unique != "" && !attached[s.Unique] {
			out = append(out, s.Name)
		}
	}
	return out
}

// UnattachedError is the FailedMount message of a pod waiting for its
// volumes to be attached (upstream's wording, with the reason spelled out).
func UnattachedError(names []string) *Error {
	list := strings.Join(names, " ")
	return &Error{
		Message: fmt.Sprintf("Unable to attach or mount volumes: unmounted volumes=[%s], unattached volumes=[%s]: waiting for the volumes to appear in node.status.volumesAttached", list, list),
		Waiting: true,
	}
}

// InUse returns the unique names of the attachable volumes among sources.
func InUse(sources []Source) []corev1.UniqueVolumeName {
	var out []corev1.UniqueVolumeName
	for _, s := range sources {
		if s.Unique != "" {
			out = append(out, s.Unique)
		}
	}
	return out
}

// NeedsMounts reports whether any container of the pod mounts a volume (a
// pod that only declares volumes needs no mount namespace).
func NeedsMounts(pod *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if len(c.VolumeMounts) > 0 {
				return true
			}
		}
	}
	return false
}

// Create says what a hostPath check wants created.
type Create int

// What CheckHostPath asks for.
const (
	CreateNothing Create = iota
	CreateDirectory
	CreateFile
)

// CheckHostPath applies a hostPath volume's type to what is at the path
// (exists=false: nothing; mode: the type bits of what is there, following
// symlinks), with upstream's messages.
func CheckHostPath(t corev1.HostPathType, p string, exists bool, mode fs.FileMode) (Create, error) {
	kind := mode.Type()
	switch t {
	case corev1.HostPathUnset:
		return CreateNothing, nil
	case corev1.HostPathDirectoryOrCreate:
		if !exists {
			return CreateDirectory, nil
		}
		if kind != fs.ModeDir {
			return CreateNothing, failed("hostPath type check failed: %s is not a directory", p)
		}
	case corev1.HostPathDirectory:
		if !exists || kind != fs.ModeDir {
			return CreateNothing, failed("hostPath type check failed: %s is not a directory", p)
		}
	case corev1.HostPathFileOrCreate:
		if !exists {
			return CreateFile, nil
		}
		if kind != 0 {
			return CreateNothing, failed("hostPath type check failed: %s is not a file", p)
		}
	case corev1.HostPathFile:
		if !exists || kind != 0 {
			return CreateNothing, failed("hostPath type check failed: %s is not a file", p)
		}
	case corev1.HostPathSocket:
		if !exists || kind != fs.ModeSocket {
			return CreateNothing, failed("hostPath type check failed: %s is not a socket file", p)
		}
	case corev1.HostPathCharDev:
		if !exists || kind != fs.ModeDevice|fs.ModeCharDevice {
			return CreateNothing, failed("hostPath type check failed: %s is not a character device", p)
		}
	case corev1.HostPathBlockDev:
		if !exists || kind != fs.ModeDevice {
			return CreateNothing, failed("hostPath type check failed: %s is not a block device", p)
		}
	default:
		return CreateNothing, failed("hostPath type check failed: unknown type %q", t)
	}
	return CreateNothing, nil
}

// File is one projected file: its path relative to the volume, content and mode.
type File struct {
	Path string
	Data []byte
	Mode fs.FileMode
}

// Project computes the files of a configMap or secret volume from the
// object's data (found=false: the object does not exist). Upstream's
// messages: a missing object fails unless optional, a listed key missing
// from the data fails unless optional.
func Project(s Source, data map[string][]byte, found bool) ([]File, error) {
	what := "configmap"
	if s.Kind == KindSecret {
		what = "secret"
	}
	if !found {
		if s.Optional {
			return nil, nil
		}
		return nil, failed("%s %q not found", what, s.ObjectName)
	}
	var out []File
	if len(s.Items) == 0 {
		for k, v := range data {
			out = append(out, File{Path: k, Data: v, Mode: fs.FileMode(s.DefaultMode)})
		}
	} else {
		for _, it := range s.Items {
			v, ok := data[it.Key]
			if !ok {
				if s.Optional {
					continue
				}
				if s.Kind == KindSecret {
					return nil, failed("references non-existent secret key: %s", it.Key)
				}
				return nil, failed("configmap references non-existent config key: %s", it.Key)
			}
			mode := s.DefaultMode
			if it.Mode != nil {
				mode = *it.Mode
			}
			out = append(out, File{Path: it.Path, Data: v, Mode: fs.FileMode(mode)})
		}
	}
	for _, f := range out {
		if err := checkRelative(f.Path); err != nil {
			return nil, failed("%s %q: file %q %v", what, s.ObjectName, f.Path, err)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// checkRelative keeps a projected path inside the volume.
func checkRelative(p string) error {
	if p == "" || path.IsAbs(p) {
		return fmt.Errorf("must be a relative path")
	}
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return fmt.Errorf("must not contain '..'")
		}
	}
	return nil
}

// ConfigMapData merges a ConfigMap's data and binaryData.
func ConfigMapData(cm *corev1.ConfigMap) map[string][]byte {
	out := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		out[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		out[k] = v
	}
	return out
}
