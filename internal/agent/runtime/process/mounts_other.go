//go:build !linux

package process

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

func inMountNamespace(*syscall.SysProcAttr) error {
	return errors.New("volume mounts need Linux mount namespaces")
}

func mountExecMain(string) int {
	fmt.Fprintln(os.Stderr, "volume mounts need Linux mount namespaces")
	return exitCodeStartError
}
