package process

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeplane/nodeplane/internal/agent/runtime"
)

// needMountPrivilege skips a test that mounts when this process may not
// (not root), except under CI=true: CI runs as root (.ci/run installs
// packages), so there a missing privilege is a broken machine.
func needMountPrivilege(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	reason := "mount namespaces and bind mounts need root (CAP_SYS_ADMIN)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s, and CI=true runs as root", reason)
	}
	t.Skip(reason)
}

// TestVolumeMounts runs real containers in private mount namespaces: two
// pods mount different volumes at the same path and each sees, and writes
// into, only its own; nothing is mounted in the agent's namespace; a
// readOnly mount refuses writes; a subPath shows only its part.
func TestVolumeMounts(t *testing.T) {
	needMountPrivilege(t)
	h := newHarness(t)
	rt := h.runtime()
	base := t.TempDir()
	target := filepath.Join(base, "mnt", "data") // the same mountPath for every pod
	volA, volB := filepath.Join(base, "vol-a"), filepath.Join(base, "vol-b")
	for dir, who := range map[string]string{volA: "a", volB: "b"} {
		if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "who"), []byte(who), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "sub", "inner"), []byte("inner-"+who), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mount := func(c corev1.Container, m corev1.VolumeMount) corev1.Container {
		c.VolumeMounts = append(c.VolumeMounts, m)
		return c
	}
	script := `cat "$T/who"; echo; echo "written by $HOSTNAME" > "$T/mark" && echo wrote || echo refused; ls "$T"`
	podA := testPod("pod-a", corev1.RestartPolicyNever, mount(shell("c", script, env("T", target)), corev1.VolumeMount{Name: "data", MountPath: target}))
	podB := testPod("pod-b", corev1.RestartPolicyNever, mount(shell("c", script, env("T", target)), corev1.VolumeMount{Name: "data", MountPath: target}))
	podRO := testPod("pod-ro", corev1.RestartPolicyNever, mount(shell("c", script+` 2>&1`, env("T", target)), corev1.VolumeMount{Name: "data", MountPath: target, ReadOnly: true}))
	podSub := testPod("pod-sub", corev1.RestartPolicyNever, mount(shell("c", `cat "$T/inner"; echo; ls "$T"`, env("T", target)), corev1.VolumeMount{Name: "data", MountPath: target, SubPath: "sub"}))
	// pod-ro and pod-sub use pod b's volume.
	for _, p := range []struct {
		pod *corev1.Pod
		dir string
	}{{podA, volA}, {podB, volB}, {podRO, volB}, {podSub, volB}} {
		if err := rt.SyncPodWithVolumes(context.Background(), p.pod, map[string]runtime.Volume{"data": {HostPath: p.dir}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*corev1.Pod{podA, podB, podRO, podSub} {
		h.eventually(rt, p.Name+" exited", func() bool { return terminated(status(t, rt, p.UID), "c") })
	}

	tests := []struct {
		name string
		pod  *corev1.Pod
		want []string
		// exit is the container's expected exit code.
		exit int32
	}{
		{"pod a sees its own volume at the shared path", podA, []string{"a\n", "wrote\n", "mark\n"}, 0},
		{"pod b sees its own volume at the same path", podB, []string{"b\n", "wrote\n"}, 0},
		{"a readOnly mount refuses writes", podRO, []string{"b\n", "Read-only file system", "refused\n"}, 0},
		{"a subPath mount shows only that directory", podSub, []string{"inner-b\n"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := containerOf(status(t, rt, tt.pod.UID), "c")
			out := logs(t, rt, tt.pod.UID, "c", all())
			if c.State.Terminated.ExitCode != tt.exit {
				t.Fatalf("exit code %d (%s: %s), output %q", c.State.Terminated.ExitCode, c.State.Terminated.Reason, c.State.Terminated.Message, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output %q lacks %q", out, w)
				}
			}
		})
	}
	if out := logs(t, rt, podSub.UID, "c", all()); strings.Contains(out, "who") {
		t.Errorf("the subPath mount shows the volume's root: %q", out)
	}
	for dir, want := range map[string]string{volA: "written by pod-a\n", volB: "written by pod-b\n"} {
		if got, err := os.ReadFile(filepath.Join(dir, "mark")); err != nil || string(got) != want {
			t.Errorf("%s/mark = %q, %v; want %q", dir, got, err, want)
		}
	}
	// The mounts lived in the containers' namespaces only.
	if entries, err := os.ReadDir(target); err != nil || len(entries) != 0 {
		t.Errorf("the node's %s holds %v (%v), want an empty mount point", target, entries, err)
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err != nil || strings.Contains(string(mi), target) {
		t.Errorf("the agent's mount table shows %s (err %v)", target, err)
	}
}

// TestVolumeMountFailureIsAStartError: a volume whose source is gone makes
// the container's start fail with the mount helper's reason, not run the
// program without its volume.
func TestVolumeMountFailureIsAStartError(t *testing.T) {
	needMountPrivilege(t)
	h := newHarness(t)
	rt := h.runtime()
	base := t.TempDir()
	marker := filepath.Join(base, "ran")
	c := shell("c", `touch "$M"`, env("M", marker))
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: filepath.Join(base, "data")}}
	pod := testPod("gone", corev1.RestartPolicyNever, c)
	if err := rt.SyncPodWithVolumes(context.Background(), pod, map[string]runtime.Volume{"data": {HostPath: filepath.Join(base, "missing")}}); err != nil {
		t.Fatal(err)
	}
	h.eventually(rt, "the container ended", func() bool { return terminated(status(t, rt, pod.UID), "c") })
	term := containerOf(status(t, rt, pod.UID), "c").State.Terminated
	if term.Reason != "StartError" || !strings.Contains(term.Message, "missing") {
		t.Fatalf("terminated %s: %q, want StartError naming the missing source", term.Reason, term.Message)
	}
	if exists(marker) {
		t.Fatal("the program ran without its volume")
	}
}

func TestPlanMounts(t *testing.T) {
	vols := map[string]runtime.Volume{"data": {HostPath: "/v/data"}, "cfg": {HostPath: "/v/cfg", ReadOnly: true}}
	tests := []struct {
		name    string
		mounts  []corev1.VolumeMount
		want    []mountSpec
		wantErr string
	}{
		{"a mount binds the volume at its path", []corev1.VolumeMount{{Name: "data", MountPath: "/data/"}}, []mountSpec{{Source: "/v/data", Target: "/data"}}, ""},
		{"a read-only volume stays read-only whatever the mount says", []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/app"}}, []mountSpec{{Source: "/v/cfg", Target: "/etc/app", ReadOnly: true}}, ""},
		{"a subPath binds part of the volume", []corev1.VolumeMount{{Name: "data", MountPath: "/d", SubPath: "a/b", ReadOnly: true}}, []mountSpec{{Source: "/v/data/a/b", Target: "/d", ReadOnly: true}}, ""},
		{"a subPath with .. is refused", []corev1.VolumeMount{{Name: "data", MountPath: "/d", SubPath: "a/../../etc"}}, nil, "must be a relative path without '..'"},
		{"an unprepared volume is refused", []corev1.VolumeMount{{Name: "nope", MountPath: "/d"}}, nil, `volume "nope" is not prepared`},
		{"subPathExpr is refused", []corev1.VolumeMount{{Name: "data", MountPath: "/d", SubPathExpr: "$(POD)"}}, nil, "subPathExpr is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := planMounts(&corev1.Container{VolumeMounts: tt.mounts}, vols)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// TestAdoptedPodRemountsOnRestart: a runtime that adopts a pod (agent
// restart) keeps its volumes, so a restarted container sees its volume
// again.
func TestAdoptedPodRemountsOnRestart(t *testing.T) {
	needMountPrivilege(t)
	h := newHarness(t)
	rt1 := h.runtime()
	base := t.TempDir()
	vol, target := filepath.Join(base, "vol"), filepath.Join(base, "data")
	if err := os.MkdirAll(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "who"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := shell("c", `cat "$T/who"; echo; exec sleep 30`, env("T", target))
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: target}}
	pod := testPod("adopted", corev1.RestartPolicyAlways, c)
	if err := rt1.SyncPodWithVolumes(context.Background(), pod, map[string]runtime.Volume{"data": {HostPath: vol}}); err != nil {
		t.Fatal(err)
	}
	h.eventually(rt1, "the container runs", func() bool { return containerOf(status(t, rt1, pod.UID), "c").State.Running != nil })
	rt1.Close()

	rt2 := h.runtime()
	pid := containerOf(status(t, rt2, pod.UID), "c").PID
	if pid == 0 {
		t.Fatal("the adopted container is not running")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h.eventually(rt2, "the container was restarted", func() bool {
		cs := containerOf(status(t, rt2, pod.UID), "c")
		return cs.RestartCount == 1 && cs.State.Running != nil
	})
	h.eventually(rt2, "the restarted container read its volume", func() bool {
		return strings.Contains(logs(t, rt2, pod.UID, "c", all()), "kept")
	})
}
