// Package version says which nodeplane this is and which Kubernetes API
// version it serves. Release builds set Version with -ldflags.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
)

// Version is nodeplane's own version and Commit the git commit it was built
// from; release builds set both with -ldflags "-X ...version.Version=...
// -X ...version.Commit=..." (make release).
var (
	Version = "0.1.0-dev"
	Commit  = ""
)

// BuildCommit is Commit, else the VCS revision the Go toolchain stamped into
// the binary (a `go build` inside a git checkout), else "unknown"; a "-dirty"
// suffix marks a build from a modified tree.
func BuildCommit() string {
	if Commit != "" {
		return Commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// Kubernetes API compatibility reported on /version: kubectl and client-go
// pick their behaviour (and the gcloud kubectl dispatcher its binary) from it.
const (
	KubeMajor = "1"
	KubeMinor = "33"
)

// Info is what GET /version returns.
func Info() apimachineryversion.Info {
	return apimachineryversion.Info{
		Major:      KubeMajor,
		Minor:      KubeMinor,
		GitVersion: fmt.Sprintf("v%s.%s.0-nodeplane.%s", KubeMajor, KubeMinor, Version),
		GoVersion:  runtime.Version(),
		Compiler:   runtime.Compiler,
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// AgentVersion is the kubeletVersion an agent reports in node status.
func AgentVersion() string { return Info().GitVersion }
