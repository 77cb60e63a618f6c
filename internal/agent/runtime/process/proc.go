package process

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// procIdentity reads a process's start time (clock ticks after boot, field
// 22 of /proc/<pid>/stat) and its state letter. The start time tells a
// process from a later one that reused its pid.
func procIdentity(pid int) (start uint64, state byte, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces or
	// parentheses itself: the fields we want follow the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	fields := bytes.Fields(b[i+2:])
	// fields[0] is field 3 (state), so field 22 is fields[19].
	if len(fields) < 20 || len(fields[0]) != 1 {
		return 0, 0, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(fields))
	}
	start, err = strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("parse /proc/%d/stat start time: %w", pid, err)
	}
	return start, fields[0][0], nil
}

// alive tells whether the process that had this pid and start time still
// runs (a zombie has finished).
func alive(pid int, start uint64) bool {
	if pid <= 1 {
		return false
	}
	s, state, err := procIdentity(pid)
	return err == nil && s == start && state != 'Z' && state != 'X'
}

// signalGroup sends sig to the process group led by pid, if that process
// is still the one recorded. Every container runs as the leader of its own
// group, so this reaches the processes it started too.
func signalGroup(pid int, start uint64, sig syscall.Signal) error {
	if !alive(pid, start) {
		return nil
	}
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %v to process group %d: %w", sig, pid, err)
	}
	return nil
}
