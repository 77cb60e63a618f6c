// Command kubectl builds kubectl 1.27 — the oldest kubectl nodeplane
// supports — from the k8s.io/kubectl module, so the end-to-end tests can run
// their kubectl scenarios with it as well as with the current one. It lives
// in its own module so that neither nodeplane's go.mod nor tools/kubectl
// carries its dependencies.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	cli.RunNoErrOutput(command)
}
