package process

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// The shim is a small process per container instance, started detached
// (own session) by the runtime, so the container survives a restart of the
// agent. It starts the container in its own process group, writes its pid
// (runInfo) and then tells the runtime it is done starting (one byte on
// file descriptor 3), copies the container's stdout and stderr into the
// instance's log file in the CRI format, and when the container exits it
// kills what is left of the group (a container's processes do not outlive
// its main process), writes the exit code (exitInfo) and exits.

// shimSpec is what one instance runs; the runtime writes it as JSON and
// passes its path as the shim's only argument.
type shimSpec struct {
	Argv     []string `json:"argv"`
	Path     string   `json:"path"`
	Env      []string `json:"env"`
	Dir      string   `json:"dir"`
	LogPath  string   `json:"logPath"`
	RunPath  string   `json:"runPath"`
	ExitPath string   `json:"exitPath"`
	// Mounts are the volumes to bind-mount in the container's own mount
	// namespace; Self is the shim command to re-execute as the mount
	// helper (both empty: no namespace).
	Mounts []mountSpec `json:"mounts,omitempty"`
	Self   []string    `json:"self,omitempty"`
}

// runInfo identifies a started instance (both pids with their start times,
// see procIdentity).
type runInfo struct {
	ShimPID   int       `json:"shimPID"`
	ShimStart uint64    `json:"shimStart"`
	PID       int       `json:"pid"`
	PIDStart  uint64    `json:"pidStart"`
	StartedAt time.Time `json:"startedAt"`
}

// exitInfo is how an instance ended.
type exitInfo struct {
	ExitCode   int32     `json:"exitCode"`
	Signal     int32     `json:"signal,omitempty"`
	Reason     string    `json:"reason"`
	Message    string    `json:"message,omitempty"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
}

const (
	// readyFD is the descriptor on which the shim reports that the
	// container was started (or failed to start).
	readyFD = 3
	// exitCodeStartError is what the kubelet reports for a container that
	// could not be started.
	exitCodeStartError = 128
	// logLineMax is the longest log entry; longer lines are split into
	// partial ("P") entries.
	logLineMax = 16 * 1024
	// drainTimeout bounds how long the shim copies output after the
	// container exited (a process that left the group may hold the pipe).
	drainTimeout = 2 * time.Second
	// logTimeFormat is the kubelet's fixed-width RFC 3339 time with
	// nanoseconds.
	logTimeFormat = "2006-01-02T15:04:05.000000000Z07:00"
)

// ShimMain runs the shim. args are the arguments after the configured
// ShimCommand (the path of the instance's spec file). It returns the
// process exit code: 0 once the container ran and its exit was recorded
// (whatever the container's own exit code), non-zero only when the shim
// itself could not work.
func ShimMain(args []string) int {
	if len(args) == 2 && args[0] == mountExecArg {
		return mountExecMain(args[1])
	}
	// Descriptor 3 is the runtime's pipe; anything else there (the shim
	// run by hand) is left alone.
	var ready *os.File
	var st syscall.Stat_t
	if syscall.Fstat(readyFD, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO {
		syscall.CloseOnExec(readyFD)
		ready = os.NewFile(readyFD, "ready")
	}
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: agent-shim SPEC-FILE")
		return 2
	}
	var spec shimSpec
	if err := readJSON(args[0], &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s := &shim{spec: spec, specPath: args[0], clock: clock.RealClock{}, ready: ready}
	return s.run()
}

type shim struct {
	spec     shimSpec
	specPath string
	clock    clock.Clock
	ready    *os.File
	once     sync.Once
}

// signalReady tells the runtime that runInfo or exitInfo is written.
func (s *shim) signalReady() {
	s.once.Do(func() {
		if s.ready != nil {
			_, _ = s.ready.Write([]byte{1})
			_ = s.ready.Close()
		}
	})
}

func (s *shim) fail(started time.Time, err error) int {
	ex := exitInfo{ExitCode: exitCodeStartError, Reason: "StartError", Message: err.Error(), StartedAt: started, FinishedAt: s.clock.Now()}
	if werr := writeJSON(s.spec.ExitPath, ex); werr != nil {
		fmt.Fprintln(os.Stderr, werr)
		s.signalReady()
		return 1
	}
	s.signalReady()
	return 0
}

func (s *shim) run() int {
	defer s.signalReady()
	started := s.clock.Now()
	logFile, err := os.OpenFile(s.spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return s.fail(started, fmt.Errorf("open log: %w", err))
	}
	defer logFile.Close()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return s.fail(started, err)
	}
	defer devNull.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		return s.fail(started, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return s.fail(started, err)
	}

	cmd := &exec.Cmd{
		Path:        s.spec.Path,
		Args:        s.spec.Argv,
		Env:         s.spec.Env,
		Dir:         s.spec.Dir,
		Stdin:       devNull,
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	// With volumes, the mount helper starts in a new mount namespace and
	// becomes the program (see mounts.go); it reports failure on reportR.
	var reportR, reportW *os.File
	if len(s.spec.Mounts) > 0 {
		if len(s.spec.Self) == 0 {
			return s.fail(started, errors.New("volume mounts: no shim command to run the mount helper"))
		}
		if err := inMountNamespace(cmd.SysProcAttr); err != nil {
			return s.fail(started, err)
		}
		if reportR, reportW, err = os.Pipe(); err != nil {
			return s.fail(started, err)
		}
		cmd.Path = s.spec.Self[0]
		cmd.Args = append(append([]string{}, s.spec.Self...), mountExecArg, s.specPath)
		cmd.Dir = ""
		cmd.ExtraFiles = []*os.File{reportW}
	}
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if reportW != nil {
		reportW.Close()
	}
	if err != nil {
		outR.Close()
		errR.Close()
		if reportR != nil {
			reportR.Close()
		}
		return s.fail(started, err)
	}
	if reportR != nil {
		msg, _ := io.ReadAll(reportR)
		reportR.Close()
		if len(msg) > 0 {
			_ = cmd.Wait()
			outR.Close()
			errR.Close()
			return s.fail(started, errors.New(string(msg)))
		}
	}
	started = s.clock.Now()
	pid := cmd.Process.Pid
	info := runInfo{ShimPID: os.Getpid(), PID: pid, StartedAt: started}
	info.ShimStart, _, _ = procIdentity(info.ShimPID)
	info.PIDStart, _, _ = procIdentity(pid)
	if err := writeJSON(s.spec.RunPath, info); err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return s.fail(started, err)
	}
	s.signalReady()

	logs := &logWriter{w: logFile, clock: s.clock}
	var copying sync.WaitGroup
	copying.Add(2)
	go func() { defer copying.Done(); logs.copyLines(outR, "stdout") }()
	go func() { defer copying.Done(); logs.copyLines(errR, "stderr") }()

	waitErr := cmd.Wait()
	finished := s.clock.Now()
	// The container's other processes go with its main process.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	drained := make(chan struct{})
	go func() { copying.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-s.clock.After(drainTimeout):
		outR.Close()
		errR.Close()
		<-drained
	}

	ex := exitInfo{StartedAt: started, FinishedAt: finished}
	var exitErr *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &exitErr):
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			ex.Signal = int32(ws.Signal())
			ex.ExitCode = 128 + ex.Signal
		} else {
			ex.ExitCode = int32(exitErr.ExitCode())
		}
	default:
		ex.ExitCode, ex.Message = exitCodeStartError, waitErr.Error()
	}
	ex.Reason = "Completed"
	if ex.ExitCode != 0 {
		ex.Reason = "Error"
	}
	if err := writeJSON(s.spec.ExitPath, ex); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// logWriter writes CRI log entries: "<time> <stream> <F|P> <content>\n".
type logWriter struct {
	mu    sync.Mutex
	w     io.Writer
	clock clock.PassiveClock
}

func (l *logWriter) entry(stream string, content []byte, partial bool) {
	tag := " F "
	if partial {
		tag = " P "
	}
	line := make([]byte, 0, len(logTimeFormat)+len(stream)+len(content)+4)
	line = l.clock.Now().UTC().AppendFormat(line, logTimeFormat)
	line = append(line, ' ')
	line = append(line, stream...)
	line = append(line, tag...)
	line = append(line, content...)
	line = append(line, '\n')
	l.mu.Lock()
	_, _ = l.w.Write(line)
	l.mu.Unlock()
}

// copyLines turns a stream into log entries until it ends.
func (l *logWriter) copyLines(r io.Reader, stream string) {
	br := bufio.NewReaderSize(r, logLineMax)
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			l.entry(stream, line[:len(line)-1], false)
		case errors.Is(err, bufio.ErrBufferFull):
			l.entry(stream, line, true)
		default:
			if len(line) > 0 {
				l.entry(stream, line, false)
			}
			return
		}
	}
}
