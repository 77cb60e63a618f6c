package agentapp

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeplane/nodeplane/internal/agent/config"
)

// validOptions are the defaults plus the one required flag.
func validOptions() Options {
	o := DefaultOptions()
	o.Server = "https://10.0.0.1:6443"
	return o
}

// joined returns the errors errors.Join put together (or err alone).
func joined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Options)
		// wantFlag is named by the one error expected; "" means valid.
		wantFlag string
	}{
		{name: "the defaults with a server are valid", change: func(*Options) {}},
		{name: "a missing server is refused", change: func(o *Options) { o.Server = "" }, wantFlag: "--server"},
		{name: "a plain http server is refused", change: func(o *Options) { o.Server = "http://10.0.0.1:6443" }, wantFlag: "--server"},
		{name: "a server without a host is refused", change: func(o *Options) { o.Server = "https://" }, wantFlag: "--server"},
		{name: "a token alone is valid", change: func(o *Options) { o.Token = "secret" }},
		{name: "a token file alone is valid", change: func(o *Options) { o.TokenFile = "/etc/nodeplane/token" }},
		{
			name:     "a token and a token file together are refused",
			change:   func(o *Options) { o.Token, o.TokenFile = "secret", "/etc/nodeplane/token" },
			wantFlag: "--token-file",
		},
		{name: "an empty data dir is refused", change: func(o *Options) { o.DataDir = " " }, wantFlag: "--data-dir"},
		{name: "--cloud-provider=external is valid", change: func(o *Options) { o.CloudProvider = "external" }},
		{name: "an in-tree cloud provider is refused", change: func(o *Options) { o.CloudProvider = "aws" }, wantFlag: "--cloud-provider"},
		{name: "one node IP is valid", change: func(o *Options) { o.NodeIPs = []string{"10.0.0.5"} }},
		{name: "an IPv4 and IPv6 node IP pair is valid", change: func(o *Options) { o.NodeIPs = []string{"10.0.0.5", "fd00::5"} }},
		{name: "a node IP that is not an address is refused", change: func(o *Options) { o.NodeIPs = []string{"10.0.0.300"} }, wantFlag: "--node-ip"},
		{name: "two IPv4 node IPs are refused", change: func(o *Options) { o.NodeIPs = []string{"10.0.0.5", "10.0.0.6"} }, wantFlag: "--node-ip"},
		{name: "two IPv6 node IPs are refused", change: func(o *Options) { o.NodeIPs = []string{"fd00::5", "fd00::6"} }, wantFlag: "--node-ip"},
		{
			name:     "three node IPs are refused",
			change:   func(o *Options) { o.NodeIPs = []string{"10.0.0.5", "fd00::5", "10.0.0.6"} },
			wantFlag: "--node-ip",
		},
		{
			name: "node labels a node may set on itself are valid",
			change: func(o *Options) {
				o.NodeLabels = map[string]string{"topology.kubernetes.io/zone": "a", "node.kubernetes.io/pool": "gpu", "example.com/x": "y", "rack": "r1"}
			},
		},
		{name: "kubernetes.io/role is refused", change: func(o *Options) { o.NodeLabels = map[string]string{"kubernetes.io/role": "master"} }, wantFlag: "--node-labels"},
		{name: "a node-role label is refused", change: func(o *Options) { o.NodeLabels = map[string]string{"node-role.kubernetes.io/x": ""} }, wantFlag: "--node-labels"},
		{
			name:     "a node-restriction label is refused",
			change:   func(o *Options) { o.NodeLabels = map[string]string{"node-restriction.kubernetes.io/y": "true"} },
			wantFlag: "--node-labels",
		},
		{name: "a label key that is not a qualified name is refused", change: func(o *Options) { o.NodeLabels = map[string]string{"a b": "c"} }, wantFlag: "--node-labels"},
		{name: "a label value that is too long is refused", change: func(o *Options) { o.NodeLabels = map[string]string{"a": strings.Repeat("v", 64)} }, wantFlag: "--node-labels"},
		{
			name: "taints with every effect are valid",
			change: func(o *Options) {
				o.RegisterWithTaints = []string{"a=b:NoSchedule", "c:PreferNoSchedule", "d=e:NoExecute"}
			},
		},
		{name: "a taint with an unknown effect is refused", change: func(o *Options) { o.RegisterWithTaints = []string{"a=b:Sometimes"} }, wantFlag: "--register-with-taints"},
		{name: "a taint without an effect is refused", change: func(o *Options) { o.RegisterWithTaints = []string{"a=b"} }, wantFlag: "--register-with-taints"},
		{
			name:     "the same taint key and effect twice is refused",
			change:   func(o *Options) { o.RegisterWithTaints = []string{"a=b:NoSchedule", "a=c:NoSchedule"} },
			wantFlag: "--register-with-taints",
		},
		{name: "max pods of zero is refused", change: func(o *Options) { o.MaxPods = 0 }, wantFlag: "--max-pods"},
		{name: "an eviction monitoring period of zero is refused", change: func(o *Options) { o.EvictionMonitoringPeriod = 0 }, wantFlag: "--eviction-monitoring-period"},
		{name: "logind turned off is valid", change: func(o *Options) { o.ShutdownLogind = "off" }},
		{name: "an unknown logind mode is refused", change: func(o *Options) { o.ShutdownLogind = "yes" }, wantFlag: "--shutdown-logind"},
		{name: "an empty logind config dir is refused", change: func(o *Options) { o.LogindConfigDir = "" }, wantFlag: "--logind-config-dir"},
		{name: "port 0 (pick a free one) is valid", change: func(o *Options) { o.Port = 0 }},
		{name: "a port beyond 65535 is refused", change: func(o *Options) { o.Port = 70000 }, wantFlag: "--port"},
		{name: "a negative port is refused", change: func(o *Options) { o.Port = -1 }, wantFlag: "--port"},
		{name: "an address that is not an IP is refused", change: func(o *Options) { o.Address = "localhost" }, wantFlag: "--address"},
		{name: "a zero status update frequency is refused", change: func(o *Options) { o.NodeStatusUpdateFrequency = 0 }, wantFlag: "--node-status-update-frequency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validOptions()
			tt.change(&o)
			err := o.Validate()
			if tt.wantFlag == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error naming %s", tt.wantFlag)
			}
			if errs := joined(err); len(errs) != 1 {
				t.Fatalf("Validate() = %d errors %q, want one naming %s", len(errs), err, tt.wantFlag)
			}
			if !strings.Contains(err.Error(), tt.wantFlag) {
				t.Errorf("Validate() = %q, want it to name %s", err, tt.wantFlag)
			}
		})
	}
}

func TestValidateReportsEveryBadFlag(t *testing.T) {
	o := validOptions()
	o.Server, o.MaxPods, o.Port = "", 0, 70000
	err := o.Validate()
	for _, flag := range []string{"--server", "--max-pods", "--port"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("Validate() = %v, want it to name %s", err, flag)
		}
	}
}

func TestParseTaints(t *testing.T) {
	tests := []struct {
		name  string
		specs []string
		want  []corev1.Taint
	}{
		{name: "no taints give none"},
		{
			name:  "a key, value and effect",
			specs: []string{"dedicated=infra:NoSchedule"},
			want:  []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}},
		},
		{
			name:  "a key without a value",
			specs: []string{"maintenance:NoExecute"},
			want:  []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}},
		},
		{
			name:  "an empty value after the equals sign",
			specs: []string{"maintenance=:PreferNoSchedule"},
			want:  []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectPreferNoSchedule}},
		},
		{
			name:  "a prefixed key",
			specs: []string{"example.com/gpu=true:NoSchedule"},
			want:  []corev1.Taint{{Key: "example.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		},
		{
			name:  "one key with two effects gives two taints, in order",
			specs: []string{"gpu=a:NoSchedule", "gpu=a:NoExecute"},
			want: []corev1.Taint{
				{Key: "gpu", Value: "a", Effect: corev1.TaintEffectNoSchedule},
				{Key: "gpu", Value: "a", Effect: corev1.TaintEffectNoExecute},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTaints(tt.specs)
			if err != nil {
				t.Fatalf("ParseTaints(%q) = %v", tt.specs, err)
			}
			if !slices.EqualFunc(got, tt.want, func(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value }) {
				t.Errorf("ParseTaints(%q) = %+v, want %+v", tt.specs, got, tt.want)
			}
		})
	}
}

func TestParseTaintsRefuses(t *testing.T) {
	for _, specs := range [][]string{
		{"a=b"},
		{"a=b:Sometimes"},
		{"a:"},
		{"bad key:NoSchedule"},
		{"a=bad value:NoSchedule"},
		{"a:NoSchedule", "a=b:NoSchedule"},
	} {
		if got, err := ParseTaints(specs); err == nil {
			t.Errorf("ParseTaints(%q) = %+v, want an error", specs, got)
		} else if !strings.Contains(err.Error(), specs[len(specs)-1]) {
			t.Errorf("ParseTaints(%q) = %q, want it to quote the bad entry", specs, err)
		}
	}
}

const configHeader = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubelet.yaml")
	if err := os.WriteFile(path, []byte(configHeader+body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// settingsFrom parses args with the agent's flags and resolves Settings the
// way the command does.
func settingsFrom(t *testing.T, args ...string) (config.Settings, error) {
	t.Helper()
	o := DefaultOptions()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return Settings(o, fs.Changed)
}

func TestSettings(t *testing.T) {
	fileBody := `
maxPods: 50
nodeStatusUpdateFrequency: 20s
registerNode: false
registerWithTaints: [{key: dedicated, value: infra, effect: NoSchedule}]
`
	fileTaints := []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
	tests := []struct {
		name string
		file string // "" for no --config
		args []string
		want func(*config.Settings)
	}{
		{
			name: "without a file or flags the upstream defaults apply",
			want: func(*config.Settings) {},
		},
		{
			name: "flags apply without a file",
			args: []string{"--max-pods=30", "--register-node=false", "--register-with-taints=a=b:NoExecute", "--node-status-update-frequency=4s"},
			want: func(s *config.Settings) {
				s.MaxPods, s.RegisterNode, s.NodeStatusUpdateFrequency = 30, false, 4*time.Second
				s.RegisterWithTaints = []corev1.Taint{{Key: "a", Value: "b", Effect: corev1.TaintEffectNoExecute}}
			},
		},
		{
			name: "the file's values are used where no flag is set, even though flag defaults differ",
			file: fileBody,
			want: func(s *config.Settings) {
				s.MaxPods, s.RegisterNode, s.RegisterWithTaints = 50, false, fileTaints
				s.NodeStatusUpdateFrequency, s.NodeStatusReportFrequency = 20*time.Second, 20*time.Second
			},
		},
		{
			name: "a flag set on the command line wins over the file",
			file: fileBody,
			args: []string{"--max-pods=30", "--register-node=true"},
			want: func(s *config.Settings) {
				s.MaxPods, s.RegisterNode, s.RegisterWithTaints = 30, true, fileTaints
				s.NodeStatusUpdateFrequency, s.NodeStatusReportFrequency = 20*time.Second, 20*time.Second
			},
		},
		{
			name: "taints from the flag replace the file's",
			file: fileBody,
			args: []string{"--register-with-taints=gpu:NoSchedule", "--node-status-update-frequency=5s"},
			want: func(s *config.Settings) {
				s.MaxPods, s.RegisterNode = 50, false
				s.RegisterWithTaints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
				s.NodeStatusUpdateFrequency, s.NodeStatusReportFrequency = 5*time.Second, 20*time.Second
			},
		},
		{
			name: "--cloud-provider=external adds the uninitialized taint to the file's taints",
			file: fileBody,
			args: []string{"--cloud-provider=external"},
			want: func(s *config.Settings) {
				s.MaxPods, s.RegisterNode = 50, false
				s.RegisterWithTaints = append(append([]corev1.Taint(nil), fileTaints...),
					corev1.Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule})
				s.NodeStatusUpdateFrequency, s.NodeStatusReportFrequency = 20*time.Second, 20*time.Second
			},
		},
		{
			name: "--cloud-provider=external does not add the taint twice",
			args: []string{"--cloud-provider=external", "--register-with-taints=node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule"},
			want: func(s *config.Settings) {
				s.RegisterWithTaints = []corev1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
			},
		},
		{
			name: "flags not naming a config field leave the file alone",
			file: fileBody,
			args: []string{"--port=0", "--node-name=n1", "--log-level=debug"},
			want: func(s *config.Settings) {
				s.MaxPods, s.RegisterNode, s.RegisterWithTaints = 50, false, fileTaints
				s.NodeStatusUpdateFrequency, s.NodeStatusReportFrequency = 20*time.Second, 20*time.Second
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" {
				args = append([]string{"--config=" + writeConfig(t, tt.file)}, args...)
			}
			got, err := settingsFrom(t, args...)
			if err != nil {
				t.Fatalf("Settings: %v", err)
			}
			want := config.Defaults()
			tt.want(&want)
			if got.MaxPods != want.MaxPods || got.RegisterNode != want.RegisterNode ||
				got.NodeStatusUpdateFrequency != want.NodeStatusUpdateFrequency ||
				got.NodeStatusReportFrequency != want.NodeStatusReportFrequency ||
				got.NodeLeaseDurationSeconds != want.NodeLeaseDurationSeconds ||
				!slices.Equal(got.RegisterWithTaints, want.RegisterWithTaints) {
				t.Errorf("Settings:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestSettingsErrors(t *testing.T) {
	tests := []struct {
		name      string
		file      string // written as the --config file unless missing
		missing   bool
		args      []string
		wantField string // the *config.FieldError's field, "" when none
		wantText  []string
		unknown   bool
	}{
		{name: "an unknown field is named, with --config", file: "maxPod: 3\n", wantField: "maxPod", wantText: []string{"--config", "maxPod"}, unknown: true},
		{name: "a malformed value is named", file: "maxPods: many\n", wantField: "maxPods", wantText: []string{"--config", "maxPods"}},
		{name: "a malformed duration is named", file: "nodeStatusUpdateFrequency: 10 parsecs\n", wantField: "nodeStatusUpdateFrequency", wantText: []string{"nodeStatusUpdateFrequency"}},
		{name: "a value out of range is named", file: "nodeLeaseDurationSeconds: -1\n", wantField: "nodeLeaseDurationSeconds", wantText: []string{"--config", "nodeLeaseDurationSeconds"}},
		{name: "a bad file taint is named", file: "registerWithTaints: [{key: a, effect: Sometimes}]\n", wantField: "registerWithTaints[0]", wantText: []string{"registerWithTaints[0]"}},
		{name: "a missing file is an error naming --config", missing: true, wantText: []string{"--config"}},
		{name: "a bad taint flag is named", args: []string{"--register-with-taints=a:Sometimes"}, wantText: []string{"--register-with-taints"}},
		{name: "a negative max-pods flag is refused", args: []string{"--max-pods=-1"}, wantField: "maxPods", wantText: []string{"maxPods"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			switch {
			case tt.missing:
				args = append([]string{"--config=" + filepath.Join(t.TempDir(), "absent.yaml")}, args...)
			case tt.file != "":
				args = append([]string{"--config=" + writeConfig(t, tt.file)}, args...)
			}
			_, err := settingsFrom(t, args...)
			if err == nil {
				t.Fatalf("Settings(%q) = nil error, want one", args)
			}
			for _, text := range tt.wantText {
				if !strings.Contains(err.Error(), text) {
					t.Errorf("error %q does not name %s", err, text)
				}
			}
			if tt.wantField != "" {
				var fe *config.FieldError
				if !errors.As(err, &fe) || fe.Field != tt.wantField {
					t.Errorf("error %q: field error %+v, want field %q", err, fe, tt.wantField)
				}
			}
			if got := errors.Is(err, config.ErrUnknownField); got != tt.unknown {
				t.Errorf("errors.Is(%q, ErrUnknownField) = %v, want %v", err, got, tt.unknown)
			}
		})
	}
}
