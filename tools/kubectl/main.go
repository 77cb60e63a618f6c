// Command kubectl builds the upstream kubectl from the k8s.io/kubectl module,
// for machines that have none on PATH (the end-to-end tests drive it). It
// lives in its own module so nodeplane's go.mod does not carry kubectl's
// dependencies.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	cli.RunNoErrOutput(command)
}
