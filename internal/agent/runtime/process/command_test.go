package process

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestResolveLaunchArgv(t *testing.T) {
	pod := &corev1.Pod{}
	tests := []struct {
		name    string
		c       corev1.Container
		want    []string
		wantErr bool
	}{
		{"the image runs with its args", corev1.Container{Image: "sleep", Args: []string{"5"}}, []string{"sleep", "5"}, false},
		{"a command naming a program replaces the image", corev1.Container{Image: "sleep", Command: []string{"sh", "-c", "true"}}, []string{"sh", "-c", "true"}, false},
		{"command words that are no program are the image's arguments (kubectl create deployment --image=sleep -- 3600)",
			corev1.Container{Image: "sleep", Command: []string{"3600"}}, []string{"sleep", "3600"}, false},
		{"command and args both follow the image when command names no program",
			corev1.Container{Image: "sleep", Command: []string{"1"}, Args: []string{"2"}}, []string{"sleep", "1", "2"}, false},
		{"neither the command nor the image is a program", corev1.Container{Image: "nosuch-image", Command: []string{"nosuch-cmd"}}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			l, err := resolveLaunch(pod, &c, hostEnv{path: "/usr/local/bin:/usr/bin:/bin", home: "/root"})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && fmt.Sprint(l.argv) != fmt.Sprint(tt.want) {
				t.Errorf("argv = %q, want %q", l.argv, tt.want)
			}
		})
	}
}

func TestContainerEnvPodCIDRs(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	for _, tt := range []struct {
		name     string
		podCIDRs []string
		spec     []corev1.EnvVar
		want     map[string]string // "" value: must be absent
	}{
		{"a node without pod ranges sets neither variable", nil, nil,
			map[string]string{EnvPodCIDR: "", EnvPodCIDRs: ""}},
		{"a single-stack node's range is in both variables", []string{"10.244.3.0/24"}, nil,
			map[string]string{EnvPodCIDR: "10.244.3.0/24", EnvPodCIDRs: "10.244.3.0/24"}},
		{"a dual-stack node lists both ranges in spec order", []string{"10.244.3.0/24", "fd00:0:0:3::/64"}, nil,
			map[string]string{EnvPodCIDR: "10.244.3.0/24", EnvPodCIDRs: "10.244.3.0/24,fd00:0:0:3::/64"}},
		{"the spec's env can refer to and override them", []string{"10.244.3.0/24"},
			[]corev1.EnvVar{{Name: "MY_RANGE", Value: "$(NODEPLANE_POD_CIDR)"}, {Name: EnvPodCIDRs, Value: "mine"}},
			map[string]string{"MY_RANGE": "10.244.3.0/24", EnvPodCIDRs: "mine"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env, err := containerEnv(pod, &corev1.Container{Env: tt.spec}, hostEnv{path: "/bin", podCIDRs: tt.podCIDRs})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				got[k] = v
			}
			for k, want := range tt.want {
				v, ok := got[k]
				if want == "" && ok {
					t.Errorf("%s = %q, want it unset", k, v)
				}
				if want != "" && v != want {
					t.Errorf("%s = %q, want %q", k, v, want)
				}
			}
		})
	}
}
