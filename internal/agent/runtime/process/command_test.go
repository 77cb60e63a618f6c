package process

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
			l, err := resolveLaunch(pod, &c, "", "/usr/local/bin:/usr/bin:/bin", "/root")
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && fmt.Sprint(l.argv) != fmt.Sprint(tt.want) {
				t.Errorf("argv = %q, want %q", l.argv, tt.want)
			}
		})
	}
}
