package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func TestDecode(t *testing.T) {
	tests := []struct {
		name       string
		yaml       string
		wantFields []string // fields the error names; nil means no error
	}{
		{name: "a file with only its type decodes", yaml: header},
		{
			name: "honoured fields and fields nodeplane ignores decode",
			yaml: header + `
maxPods: 50
nodeStatusUpdateFrequency: 20s
evictionHard:
  memory.available: 200Mi
registerWithTaints:
- key: dedicated
  value: infra
  effect: NoSchedule
clusterDNS: [10.96.0.10]
authentication:
  anonymous:
    enabled: false
`,
		},
		{name: "an unknown field is named", yaml: header + "maxPod: 3\n", wantFields: []string{"maxPod"}},
		{name: "field names are case-sensitive", yaml: header + "MaxPods: 3\n", wantFields: []string{"MaxPods"}},
		{name: "a number field given a word is named", yaml: header + "maxPods: many\n", wantFields: []string{"maxPods"}},
		{name: "a duration in unknown units is named", yaml: header + "nodeStatusUpdateFrequency: 10 parsecs\n", wantFields: []string{"nodeStatusUpdateFrequency"}},
		{name: "an unknown field inside a list item is named by its top-level field", yaml: header + "registerWithTaints: [{key: a, effect: NoSchedule, colour: red}]\n", wantFields: []string{"registerWithTaints"}},
		{name: "a map given a list is named", yaml: header + "evictionHard: [memory.available]\n", wantFields: []string{"evictionHard"}},
		{name: "every bad field is reported, in name order", yaml: header + "zzz: 1\nmaxPods: many\n", wantFields: []string{"maxPods", "zzz"}},
		{name: "a missing apiVersion is named", yaml: "kind: KubeletConfiguration\n", wantFields: []string{"apiVersion"}},
		{name: "another apiVersion is refused", yaml: "apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n", wantFields: []string{"apiVersion"}},
		{name: "a missing kind is named", yaml: "apiVersion: kubelet.config.k8s.io/v1beta1\n", wantFields: []string{"kind"}},
		{name: "another kind is refused", yaml: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n", wantFields: []string{"kind"}},
		{name: "an empty file lacks an apiVersion", yaml: "", wantFields: []string{"apiVersion"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Decode([]byte(tt.yaml))
			wantFields(t, err, tt.wantFields...)
			if err == nil && (cfg.APIVersion != APIVersion || cfg.Kind != Kind) {
				t.Errorf("TypeMeta = %+v, want %s %s", cfg.TypeMeta, APIVersion, Kind)
			}
		})
	}
}

func TestDecodeValues(t *testing.T) {
	cfg, err := Decode([]byte(header + `
maxPods: 50
nodeStatusUpdateFrequency: 20s
registerNode: false
evictionHard: {memory.available: 200Mi}
registerWithTaints: [{key: dedicated, value: infra, effect: NoSchedule}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxPods != 50 || cfg.NodeStatusUpdateFrequency.Duration != 20*time.Second ||
		cfg.RegisterNode == nil || *cfg.RegisterNode || cfg.EvictionHard["memory.available"] != "200Mi" ||
		len(cfg.RegisterWithTaints) != 1 || cfg.RegisterWithTaints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("decoded %+v", cfg)
	}
}

func TestDecodeUnknownFieldIsErrUnknownField(t *testing.T) {
	_, err := Decode([]byte(header + "bogus: true\n"))
	if !isUnknownField(err) {
		t.Fatalf("error = %v, want ErrUnknownField", err)
	}
	if _, err := Decode([]byte(header + "maxPods: many\n")); isUnknownField(err) {
		t.Fatalf("a malformed value reported as an unknown field: %v", err)
	}
}

func TestDecodeRefusesStructuralProblems(t *testing.T) {
	tests := []struct {
		name string
		yaml string
	}{
		{"a duplicated key is refused", header + "maxPods: 1\nmaxPods: 2\n"},
		{"a list instead of a mapping is refused", "- maxPods\n"},
		{"invalid YAML is refused", header + "maxPods: [1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Decode([]byte(tt.yaml)); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("a valid file loads", func(t *testing.T) {
		cfg, err := Load(write("ok.yaml", header+"maxPods: 30\n"))
		if err != nil || cfg.MaxPods != 30 {
			t.Fatalf("Load() = %+v, %v", cfg, err)
		}
	})
	t.Run("a value that does not resolve is reported by Load, naming the field and the file", func(t *testing.T) {
		p := write("bad.yaml", header+"evictionHard: {memory.available: lots}\n")
		_, err := Load(p)
		wantFields(t, err, "evictionHard[memory.available]")
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not name the file", err)
		}
	})
	t.Run("a missing file is reported as such", func(t *testing.T) {
		if _, err := Load(filepath.Join(dir, "absent.yaml")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("error = %v, want not-exist", err)
		}
	})
}
