package agentapp

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/agent/config"
)

func TestShutdownSettings(t *testing.T) {
	type want struct {
		total, critical time.Duration
		table           []config.PriorityGracePeriod
	}
	for _, tc := range []struct {
		name string
		file string
		args []string
		want want
	}{
		{name: "with nothing set nodeplane's default is on: 30 s, 10 s of it for critical pods",
			want: want{30 * time.Second, 10 * time.Second, nil}},
		{name: "a file without shutdown fields keeps nodeplane's default", file: "maxPods: 50\n",
			want: want{30 * time.Second, 10 * time.Second, nil}},
		{name: "an explicit 0 in the file turns it off", file: "shutdownGracePeriod: 0s\n",
			want: want{0, 0, nil}},
		{name: "the flag 0 turns it off", args: []string{"--shutdown-grace-period=0"},
			want: want{0, 0, nil}},
		{name: "the file's periods are used", file: "shutdownGracePeriod: 60s\nshutdownGracePeriodCriticalPods: 20s\n",
			want: want{60 * time.Second, 20 * time.Second, nil}},
		{name: "the file's priority table replaces the default pair",
			file: "shutdownGracePeriodByPodPriority: [{priority: 0, shutdownGracePeriodSeconds: 5}, {priority: 1000, shutdownGracePeriodSeconds: 7}]\n",
			want: want{0, 0, []config.PriorityGracePeriod{{Priority: 0, GracePeriod: 5 * time.Second}, {Priority: 1000, GracePeriod: 7 * time.Second}}}},
		{name: "the priority flag replaces the default pair", args: []string{"--shutdown-grace-period-by-pod-priority=-5=3,100=4"},
			want: want{0, 0, []config.PriorityGracePeriod{{Priority: -5, GracePeriod: 3 * time.Second}, {Priority: 100, GracePeriod: 4 * time.Second}}}},
		{name: "pair flags replace the file's priority table", file: "shutdownGracePeriodByPodPriority: [{priority: 0, shutdownGracePeriodSeconds: 5}]\n",
			args: []string{"--shutdown-grace-period=40s", "--shutdown-grace-period-critical-pods=5s"},
			want: want{40 * time.Second, 5 * time.Second, nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config=" + writeConfig(t, tc.file)}, args...)
			}
			s, err := settingsFrom(t, args...)
			if err != nil {
				t.Fatalf("Settings: %v", err)
			}
			got := want{s.ShutdownGracePeriod, s.ShutdownGracePeriodCriticalPods, s.ShutdownGracePeriodByPodPriority}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("shutdown settings %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestShutdownSettingsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		args       []string
		wantText   string
	}{
		{name: "critical above total in the file names the field", file: "shutdownGracePeriod: 10s\nshutdownGracePeriodCriticalPods: 20s\n", wantText: "shutdownGracePeriodCriticalPods"},
		{name: "critical above total by flags names the field", args: []string{"--shutdown-grace-period=5s"}, wantText: "shutdownGracePeriodCriticalPods"},
		{name: "a table and a pair together name the table", args: []string{"--shutdown-grace-period=30s", "--shutdown-grace-period-by-pod-priority=0=5"}, wantText: "shutdownGracePeriodByPodPriority"},
		{name: "a negative seconds in the file's table names the entry", file: "shutdownGracePeriodByPodPriority: [{priority: 0, shutdownGracePeriodSeconds: -1}]\n", wantText: "shutdownGracePeriodByPodPriority[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config=" + writeConfig(t, tc.file)}, args...)
			}
			_, err := settingsFrom(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("Settings error %v, want one naming %s", err, tc.wantText)
			}
			var fe *config.FieldError
			if !errors.As(err, &fe) {
				t.Errorf("error %v is not a *config.FieldError", err)
			}
		})
	}
}

func TestParsePriorityGracePeriodsRefuses(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"a value without '=' is refused", "5"},
		{"a non-numeric priority is refused", "high=5"},
		{"negative seconds are refused", "0=-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParsePriorityGracePeriods([]string{tc.value}); err == nil || !strings.Contains(err.Error(), "--shutdown-grace-period-by-pod-priority") {
				t.Errorf("error %v, want one naming the flag", err)
			}
		})
	}
	if _, err := ParsePriorityGracePeriods([]string{"1=1", "1=2"}); err == nil {
		t.Error("a repeated priority was accepted")
	}
}
