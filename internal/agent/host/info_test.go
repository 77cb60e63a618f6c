package host

import (
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestInfo(t *testing.T) {
	full := map[string]string{
		"proc/sys/kernel/osrelease":      "6.1.0-13-amd64\n",
		"proc/sys/kernel/random/boot_id": "dc9cc625-9a86-48bb-8804-66c7b23f8b7f\n",
		"etc/os-release":                 "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n",
		"etc/machine-id":                 "3d1219c7c4c5404aaa1f6d2a48adfda4\n",
		"sys/class/dmi/id/product_uuid":  "4c4c4544-0042-3010-8048-b4c04f4e3732\n",
	}
	tests := []struct {
		name    string
		files   map[string]string
		want    corev1.NodeSystemInfo
		wantErr bool
	}{
		{
			name:  "every fact is read from its file",
			files: full,
			want: corev1.NodeSystemInfo{
				KernelVersion: "6.1.0-13-amd64",
				BootID:        "dc9cc625-9a86-48bb-8804-66c7b23f8b7f",
				OSImage:       "Debian GNU/Linux 12 (bookworm)",
				MachineID:     "3d1219c7c4c5404aaa1f6d2a48adfda4",
				SystemUUID:    "4c4c4544-0042-3010-8048-b4c04f4e3732",
			},
		},
		{
			name: "the machine id falls back to dbus's copy and a single-quoted pretty name is read",
			files: map[string]string{
				"proc/sys/kernel/osrelease":      "5.15.0\n",
				"proc/sys/kernel/random/boot_id": "b\n",
				"usr/lib/os-release":             "PRETTY_NAME='Alpine Linux v3.20'\n",
				"var/lib/dbus/machine-id":        "abc\n",
			},
			want: corev1.NodeSystemInfo{KernelVersion: "5.15.0", BootID: "b", OSImage: "Alpine Linux v3.20", MachineID: "abc"},
		},
		{
			name: "an os-release without PRETTY_NAME gives Linux, and missing ids are empty without error",
			files: map[string]string{
				"proc/sys/kernel/osrelease":      "5.15.0\n",
				"proc/sys/kernel/random/boot_id": "b\n",
				"etc/os-release":                 "NAME=Minimal\n",
			},
			want: corev1.NodeSystemInfo{KernelVersion: "5.15.0", BootID: "b", OSImage: "Linux"},
		},
		{
			name:    "a missing boot id is an error and the other facts are still read",
			files:   map[string]string{"proc/sys/kernel/osrelease": "6.8.0\n", "etc/machine-id": "m\n"},
			want:    corev1.NodeSystemInfo{KernelVersion: "6.8.0", OSImage: "Linux", MachineID: "m"},
			wantErr: true,
		},
		{
			name:    "an empty tree is an error with the runtime's OS and architecture",
			files:   map[string]string{},
			want:    corev1.NodeSystemInfo{OSImage: "Linux"},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fakeHost(t, tt.files).Info()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Info() error = %v, want error %v", err, tt.wantErr)
			}
			tt.want.OperatingSystem = runtime.GOOS
			tt.want.Architecture = runtime.GOARCH
			if got != tt.want {
				t.Errorf("Info() = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestOSReleaseValue(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string
	}{
		{"an unquoted value is taken as is", "PRETTY_NAME=Fedora\n", "Fedora"},
		{"a double-quoted value with an escape is unquoted", `PRETTY_NAME="Say \"hi\""` + "\n", `Say "hi"`},
		{"a key that only starts like the wanted one is not taken", "PRETTY_NAME_X=no\nPRETTY_NAME=yes\n", "yes"},
		{"a missing key gives the empty string", "NAME=x\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := osReleaseValue(tt.content, "PRETTY_NAME"); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
