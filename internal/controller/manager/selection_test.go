package manager

import (
	"strings"
	"testing"
)

func TestParseSelection(t *testing.T) {
	cases := []struct {
		name    string
		values  []string
		on      []string // names that must be enabled
		off     []string // names that must be disabled
		wantErr []string // substrings the error must contain; nil: no error
	}{
		{name: "a star enables every known controller", values: []string{"*"}, on: Known},
		{name: "a minus turns one controller off under the star", values: []string{"*", "-scheduler"},
			on: []string{"node-lifecycle-controller", "disruption-controller"}, off: []string{"scheduler"}},
		{name: "a bare name enables only that controller", values: []string{"replicaset-controller"},
			on: []string{"replicaset-controller"}, off: []string{"deployment-controller", "scheduler"}},
		{name: "spaces around a name are ignored", values: []string{" *", " -daemonset-controller "},
			on: []string{"replicaset-controller"}, off: []string{"daemonset-controller"}},
		{name: "no value enables nothing", values: nil, off: Known},
		{name: "an unknown name is an error naming it", values: []string{"*", "frobnicate-controller"},
			wantErr: []string{`"frobnicate-controller" is not in the list of known controllers`}},
		{name: "an unknown name after a minus is an error naming it", values: []string{"*", "-frobnicate-controller"},
			wantErr: []string{`"frobnicate-controller" is not in the list of known controllers`}},
		{name: "an upstream controller nodeplane does not build yet is an error", values: []string{"endpointslice-controller"},
			wantErr: []string{`"endpointslice-controller" is not in the list of known controllers`}},
		{name: "every bad name is named, with the flag and the known list", values: []string{"endpointslice-controller", "*", "route-controller", "ttl-after-finished-controller"},
			wantErr: []string{"--controllers:", `"endpointslice-controller"`, `"route-controller"`, `"ttl-after-finished-controller"`, "disruption-controller"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := ParseSelection(c.values)
			if c.wantErr != nil {
				if err == nil {
					t.Fatalf("ParseSelection(%q) = nil error, want one containing %q", c.values, c.wantErr)
				}
				for _, w := range c.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSelection(%q): %v", c.values, err)
			}
			for _, n := range c.on {
				if !s.Enabled(n) {
					t.Errorf("Enabled(%q) = false, want true", n)
				}
			}
			for _, n := range c.off {
				if s.Enabled(n) {
					t.Errorf("Enabled(%q) = true, want false", n)
				}
			}
		})
	}
}
