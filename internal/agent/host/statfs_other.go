//go:build !linux

package host

import (
	"errors"
	"runtime"
)

var errNotLinux = errors.New("host: only Linux is supported, not " + runtime.GOOS)

func statFS(string) (fsStats, error) { return fsStats{}, errNotLinux }

func kernelRelease() (string, error) { return "", errNotLinux }
