package volumes

import (
	"io/fs"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var layout = Layout{PodsDir: "/agent/volumes/pods", SharedRoot: "/shared"}

func podWith(vols ...corev1.Volume) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"},
		Spec:       corev1.PodSpec{NodeName: "n1", Volumes: vols},
	}
}

func claimVol(name, claim string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

func boundClaim(name, pv string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "claim-uid"},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: pv},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
}

func sharedPV(name, handle, claim string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: DriverSharedDir, VolumeHandle: handle}},
			ClaimRef:               &corev1.ObjectReference{Namespace: "ns", Name: claim, UID: "claim-uid"},
		},
	}
}

func TestResolve(t *testing.T) {
	memory := corev1.Volume{Name: "m", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}
	hugepages := corev1.Volume{Name: "h", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumHugePages}}}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		claims  Claims
		layout  Layout
		want    []Source
		wantErr string
		waiting bool
	}{
		{
			name: "an emptyDir lives under the pod's directory",
			pod:  podWith(corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}),
			want: []Source{{Name: "scratch", Kind: KindEmptyDir, Path: "/agent/volumes/pods/uid-1/volumes/kubernetes.io~empty-dir/scratch"}},
		},
		{
			name: "a Memory emptyDir is marked for a tmpfs",
			pod:  podWith(memory),
			want: []Source{{Name: "m", Kind: KindEmptyDirMemory, Path: "/agent/volumes/pods/uid-1/volumes/kubernetes.io~empty-dir/m"}},
		},
		{
			name:    "a HugePages emptyDir is refused",
			pod:     podWith(hugepages),
			wantErr: `emptyDir volume "h": medium "HugePages" is not supported`,
		},
		{
			name: "a hostPath is the node path itself with its type",
			pod:  podWith(corev1.Volume{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log/", Type: ptr.To(corev1.HostPathDirectory)}}}),
			want: []Source{{Name: "logs", Kind: KindHostPath, Path: "/var/log", HostPathType: corev1.HostPathDirectory}},
		},
		{
			name: "a configMap is projected read-only with mode 0644 by default",
			pod:  podWith(corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}),
			want: []Source{{Name: "cfg", Kind: KindConfigMap, Path: "/agent/volumes/pods/uid-1/volumes/kubernetes.io~configmap/cfg", ReadOnly: true, ObjectName: "app", DefaultMode: 0o644}},
		},
		{
			name: "an optional secret keeps its default mode",
			pod:  podWith(corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls", DefaultMode: ptr.To[int32](0o400), Optional: ptr.To(true)}}}),
			want: []Source{{Name: "tls", Kind: KindSecret, Path: "/agent/volumes/pods/uid-1/volumes/kubernetes.io~secret/tls", ReadOnly: true, ObjectName: "tls", DefaultMode: 0o400, Optional: true}},
		},
		{
			name:   "a claim bound to a shared-dir volume is the handle's directory under the shared root",
			pod:    podWith(claimVol("data", "c1")),
			claims: Claims{PVCs: map[string]*corev1.PersistentVolumeClaim{"c1": boundClaim("c1", "pv1")}, PVs: map[string]*corev1.PersistentVolume{"pv1": sharedPV("pv1", "vol-7", "c1")}},
			want:   []Source{{Name: "data", Kind: KindSharedDir, Path: "/shared/vol-7", Unique: "kubernetes.io/csi/nodeplane.io/shared-dir^vol-7"}},
		},
		{
			name:    "a missing claim is waited for",
			pod:     podWith(claimVol("data", "c1")),
			wantErr: `persistentvolumeclaim "c1" not found`,
			waiting: true,
		},
		{
			name:    "an unbound claim is waited for",
			pod:     podWith(claimVol("data", "c1")),
			claims:  Claims{PVCs: map[string]*corev1.PersistentVolumeClaim{"c1": {ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "ns"}}}},
			wantErr: `persistentvolumeclaim "c1" is not bound`,
			waiting: true,
		},
		{
			name:    "a volume whose claimRef names another claim is refused",
			pod:     podWith(claimVol("data", "c1")),
			claims:  Claims{PVCs: map[string]*corev1.PersistentVolumeClaim{"c1": boundClaim("c1", "pv1")}, PVs: map[string]*corev1.PersistentVolume{"pv1": sharedPV("pv1", "vol-7", "other")}},
			wantErr: `persistentvolume "pv1" is not bound to claim ns/c1`,
		},
		{
			name: "a volume of another driver is refused",
			pod:  podWith(claimVol("data", "c1")),
			claims: Claims{PVCs: map[string]*corev1.PersistentVolumeClaim{"c1": boundClaim("c1", "pv1")}, PVs: map[string]*corev1.PersistentVolume{"pv1": func() *corev1.PersistentVolume {
				pv := sharedPV("pv1", "vol-7", "c1")
				pv.Spec.CSI.Driver = "ebs.csi.aws.com"
				return pv
			}()}},
			wantErr: "only CSI volumes of driver nodeplane.io/shared-dir are supported",
		},
		{
			name:    "a handle that climbs out of the shared root is refused",
			pod:     podWith(claimVol("data", "c1")),
			claims:  Claims{PVCs: map[string]*corev1.PersistentVolumeClaim{"c1": boundClaim("c1", "pv1")}, PVs: map[string]*corev1.PersistentVolume{"pv1": sharedPV("pv1", "..", "c1")}},
			wantErr: `volume handle ".." is not a directory name`,
		},
		{
			name:    "a shared-dir volume on a node without a shared root is refused",
			pod:     podWith(claimVol("data", "c1")),
			claims:  Claims{PVCs: map[string]*corev1.PersistentVolumeClaim{"c1": boundClaim("c1", "pv1")}, PVs: map[string]*corev1.PersistentVolume{"pv1": sharedPV("pv1", "vol-7", "c1")}},
			layout:  Layout{PodsDir: "/agent/volumes/pods"},
			wantErr: "this node has no --shared-volume-root",
		},
		{
			name:    "an unsupported volume type names itself",
			pod:     podWith(corev1.Volume{Name: "nfs", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/"}}}),
			wantErr: `volume "nfs": nfs volumes are not supported by the process runtime`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.layout
			if l.PodsDir == "" {
				l = layout
			}
			got, err := Resolve(tt.pod, tt.claims, l)
			if tt.wantErr != "" {
				var verr *Error
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				if !asError(err, &verr) || verr.Waiting != tt.waiting {
					t.Fatalf("err = %#v, want a *Error with Waiting=%v", err, tt.waiting)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func asError(err error, target **Error) bool {
	e, ok := err.(*Error)
	*target = e
	return ok
}

func TestUnattached(t *testing.T) {
	sources := []Source{
		{Name: "scratch", Kind: KindEmptyDir},
		{Name: "data", Kind: KindSharedDir, Unique: UniqueName(DriverSharedDir, "v1")},
		{Name: "logs", Kind: KindSharedDir, Unique: UniqueName(DriverSharedDir, "v2")},
	}
	attached := func(names ...corev1.UniqueVolumeName) *corev1.Node {
		n := &corev1.Node{}
		for _, name := range names {
			n.Status.VolumesAttached = append(n.Status.VolumesAttached, corev1.AttachedVolume{Name: name})
		}
		return n
	}
	tests := []struct {
		name string
		node *corev1.Node
		want []string
	}{
		{"with no node seen yet every attachable volume waits", nil, []string{"data", "logs"}},
		{"a volume listed in volumesAttached is ready", attached(UniqueName(DriverSharedDir, "v1")), []string{"logs"}},
		{"an attached volume of another driver with the same handle does not count", attached("kubernetes.io/csi/other^v1", UniqueName(DriverSharedDir, "v2")), []string{"data"}},
		{"when both are attached nothing waits", attached(UniqueName(DriverSharedDir, "v2"), UniqueName(DriverSharedDir, "v1")), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Unattached(sources, tt.node); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Unattached = %v, want %v", got, tt.want)
			}
		})
	}
	if got := UnattachedError([]string{"data"}).Message; !strings.HasPrefix(got, "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data]") {
		t.Fatalf("message = %q", got)
	}
	if got := InUse(sources); !reflect.DeepEqual(got, []corev1.UniqueVolumeName{"kubernetes.io/csi/nodeplane.io/shared-dir^v1", "kubernetes.io/csi/nodeplane.io/shared-dir^v2"}) {
		t.Fatalf("InUse = %v", got)
	}
}

func TestCheckHostPath(t *testing.T) {
	const p = "/x"
	tests := []struct {
		name    string
		typ     corev1.HostPathType
		exists  bool
		mode    fs.FileMode
		want    Create
		wantErr string
	}{
		{"an unset type checks nothing", corev1.HostPathUnset, false, 0, CreateNothing, ""},
		{"DirectoryOrCreate creates a missing directory", corev1.HostPathDirectoryOrCreate, false, 0, CreateDirectory, ""},
		{"DirectoryOrCreate accepts a directory", corev1.HostPathDirectoryOrCreate, true, fs.ModeDir | 0o755, CreateNothing, ""},
		{"DirectoryOrCreate refuses a file", corev1.HostPathDirectoryOrCreate, true, 0o644, CreateNothing, "hostPath type check failed: /x is not a directory"},
		{"Directory refuses a missing path", corev1.HostPathDirectory, false, 0, CreateNothing, "hostPath type check failed: /x is not a directory"},
		{"FileOrCreate creates a missing file", corev1.HostPathFileOrCreate, false, 0, CreateFile, ""},
		{"FileOrCreate refuses a directory", corev1.HostPathFileOrCreate, true, fs.ModeDir, CreateNothing, "hostPath type check failed: /x is not a file"},
		{"File accepts a regular file", corev1.HostPathFile, true, 0o600, CreateNothing, ""},
		{"File refuses a missing path", corev1.HostPathFile, false, 0, CreateNothing, "hostPath type check failed: /x is not a file"},
		{"Socket accepts a socket", corev1.HostPathSocket, true, fs.ModeSocket, CreateNothing, ""},
		{"Socket refuses a file", corev1.HostPathSocket, true, 0o644, CreateNothing, "hostPath type check failed: /x is not a socket file"},
		{"CharDevice accepts a character device", corev1.HostPathCharDev, true, fs.ModeDevice | fs.ModeCharDevice, CreateNothing, ""},
		{"CharDevice refuses a block device", corev1.HostPathCharDev, true, fs.ModeDevice, CreateNothing, "hostPath type check failed: /x is not a character device"},
		{"BlockDevice accepts a block device", corev1.HostPathBlockDev, true, fs.ModeDevice, CreateNothing, ""},
		{"BlockDevice refuses a character device", corev1.HostPathBlockDev, true, fs.ModeDevice | fs.ModeCharDevice, CreateNothing, "hostPath type check failed: /x is not a block device"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CheckHostPath(tt.typ, p, tt.exists, tt.mode)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestProject(t *testing.T) {
	cm := Source{Name: "cfg", Kind: KindConfigMap, ObjectName: "app", DefaultMode: 0o644}
	data := map[string][]byte{"a.conf": []byte("A"), "b.conf": []byte("B")}
	tests := []struct {
		name    string
		src     Source
		data    map[string][]byte
		found   bool
		want    []File
		wantErr string
	}{
		{"every key becomes a file with the default mode", cm, data, true,
			[]File{{"a.conf", []byte("A"), 0o644}, {"b.conf", []byte("B"), 0o644}}, ""},
		{"items pick keys, paths and modes", withItems(cm, corev1.KeyToPath{Key: "b.conf", Path: "sub/b", Mode: ptr.To[int32](0o600)}), data, true,
			[]File{{"sub/b", []byte("B"), 0o600}}, ""},
		{"a missing configmap fails", cm, nil, false, nil, `configmap "app" not found`},
		{"a missing optional configmap is an empty volume", optional(cm), nil, false, nil, ""},
		{"an item naming a missing key fails", withItems(cm, corev1.KeyToPath{Key: "nope", Path: "x"}), data, true, nil, "configmap references non-existent config key: nope"},
		{"a missing secret key fails with the secret wording", withItems(Source{Kind: KindSecret, ObjectName: "s", DefaultMode: 0o644}, corev1.KeyToPath{Key: "nope", Path: "x"}), data, true, nil, "references non-existent secret key: nope"},
		{"an item path climbing out of the volume is refused", withItems(cm, corev1.KeyToPath{Key: "a.conf", Path: "../escape"}), data, true, nil, `file "../escape" must not contain '..'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Project(tt.src, tt.data, tt.found)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func withItems(s Source, items ...corev1.KeyToPath) Source { s.Items = items; return s }

func optional(s Source) Source { s.Optional = true; return s }

func TestNeedsMounts(t *testing.T) {
	pod := podWith(corev1.Volume{Name: "v"})
	pod.Spec.Containers = []corev1.Container{{Name: "c"}}
	if NeedsMounts(pod) {
		t.Fatal("a pod that mounts nothing needs no mount namespace")
	}
	pod.Spec.InitContainers = []corev1.Container{{Name: "i", VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/v"}}}}
	if !NeedsMounts(pod) {
		t.Fatal("an init container's mount needs a namespace")
	}
}
