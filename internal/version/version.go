// Package version says which nodeplane this is and which Kubernetes API
// version it serves. Release builds set Version with -ldflags.
package version

import (
	"fmt"
	"runtime"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
)

// Version is nodeplane's own version (set by -ldflags "-X ...version.Version=").
var Version = "0.1.0-dev"

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
