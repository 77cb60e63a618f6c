package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// RuntimeHealth checks that the process runtime can start and track pods
// (SPEC §3.4 Ready=False, KubeletNotReady): its pod state directory takes
// a new file (a read-only or full filesystem, or a directory that is gone,
// fails), and the shim it re-executes to supervise each container exists
// and is executable. The error is the Ready=False message.
func RuntimeHealth(stateDir, shim string) func() error {
	return func() error {
		var errs []error
		f, err := os.CreateTemp(stateDir, ".health-")
		if err != nil {
			errs = append(errs, fmt.Errorf("pod state directory %s is not writable: %w", stateDir, errors.Unwrap(err)))
		} else {
			name := f.Name()
			err = f.Close()
			if rmErr := os.Remove(name); err == nil {
				err = rmErr
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("pod state directory %s: %w", stateDir, err))
			}
		}
		if st, err := os.Stat(shim); err != nil {
			errs = append(errs, fmt.Errorf("runtime shim %s cannot be started: %w", filepath.Base(shim), errors.Unwrap(err)))
		} else if st.Mode()&0o111 == 0 {
			errs = append(errs, fmt.Errorf("runtime shim %s cannot be started: not executable", shim))
		}
		if len(errs) == 0 {
			return nil
		}
		return fmt.Errorf("container runtime not ready: %w", errors.Join(errs...))
	}
}
