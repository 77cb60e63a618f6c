package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeplane/nodeplane/internal/agent/runtime"
)

// errLimitReached stops reading once LimitBytes were written.
var errLimitReached = errors.New("log limit reached")

// Logs writes a container's output as `kubectl logs` shows it: the content
// of the current (or, with Previous, the previous) instance's log file,
// without the CRI prefix unless Timestamps is set. With Follow it keeps
// reading the file until that instance has exited and its output is
// written, or ctx ends.
func (r *Runtime) Logs(ctx context.Context, uid types.UID, name string, opts runtime.LogOptions, w io.Writer) error {
	p := r.lookup(uid)
	if p == nil {
		return fmt.Errorf("pod %s: %w", uid, runtime.ErrNotFound)
	}
	p.mu.Lock()
	c := p.find(name)
	podName := p.spec.Name
	if c == nil {
		p.mu.Unlock()
		return fmt.Errorf("container %q in pod %q: %w", name, podName, runtime.ErrNotFound)
	}
	n, dir := c.rec.Instance, c.dir
	p.mu.Unlock()
	if opts.Previous {
		n--
		if n < 0 {
			return fmt.Errorf("previous terminated container %q in pod %q not found: %w", name, podName, runtime.ErrNotFound)
		}
	}
	if n < 0 {
		return fmt.Errorf("container %q in pod %q is waiting to start: %w", name, podName, runtime.ErrNotFound)
	}
	f, err := os.Open(instanceFile(dir, n, ".log"))
	if errors.Is(err, fs.ErrNotExist) {
		// The instance never ran (it could not be started).
		return nil
	}
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer f.Close()

	rd := &logReader{f: f}
	out := &logEmitter{w: w, opts: opts}
	err = r.copyLog(ctx, rd, out, opts, func() bool { return r.instanceDone(p, c, n) })
	if errors.Is(err, errLimitReached) {
		return nil
	}
	return err
}

func (r *Runtime) copyLog(ctx context.Context, rd *logReader, out *logEmitter, opts runtime.LogOptions, done func() bool) error {
	keep := func(e logEntry) bool { return opts.Since.IsZero() || !e.time.Before(opts.Since) }
	if opts.TailLines >= 0 {
		if err := tail(rd, out, int(opts.TailLines), keep); err != nil {
			return err
		}
	}
	finishing := false
	for {
		line, ok, err := rd.next()
		if err != nil {
			return err
		}
		if ok {
			if e := parseEntry(line); keep(e) {
				if err := out.emit(e); err != nil {
					return err
				}
			}
			continue
		}
		if !opts.Follow || finishing {
			return nil
		}
		if done() {
			// Read once more: the output is complete now.
			finishing = true
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.cfg.Clock.After(r.cfg.WaitInterval):
		}
	}
}

// instanceDone tells whether instance n of c has ended and its output is
// complete.
func (r *Runtime) instanceDone(p *pod, c *container, n int) bool {
	if exists(instanceFile(c.dir, n, ".exit")) {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.removed || c.rec.Instance != n || (c.rec.State != stateRunning && c.rec.State != stateStarting)
}

// tail emits the last n lines (a line being its partial entries and the
// final one) that keep accepts, reading to the end of what is written.
func tail(rd *logReader, out *logEmitter, n int, keep func(logEntry) bool) error {
	if n == 0 {
		// Skip everything written so far.
		for {
			_, ok, err := rd.next()
			if err != nil || !ok {
				return err
			}
		}
	}
	ring := make([][]logEntry, 0, min(n, 1024))
	var cur []logEntry
	next := 0
	for {
		line, ok, err := rd.next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		e := parseEntry(line)
		if !keep(e) {
			continue
		}
		e.content = bytes.Clone(e.content)
		cur = append(cur, e)
		if e.partial {
			continue
		}
		if len(ring) < n {
			ring = append(ring, cur)
		} else {
			ring[next] = cur
			next = (next + 1) % n
		}
		cur = nil
	}
	for i := range ring {
		for _, e := range ring[(next+i)%len(ring)] {
			if err := out.emit(e); err != nil {
				return err
			}
		}
	}
	// A trailing partial line belongs to the tail too.
	for _, e := range cur {
		if err := out.emit(e); err != nil {
			return err
		}
	}
	return nil
}

// logEntry is one CRI log line.
type logEntry struct {
	rawTime []byte
	time    time.Time
	partial bool
	content []byte
}

// parseEntry splits "<time> <stream> <F|P> <content>"; a malformed line is
// passed through as content.
func parseEntry(line []byte) logEntry {
	fields := bytes.SplitN(line, []byte{' '}, 4)
	if len(fields) < 3 {
		return logEntry{content: line}
	}
	t, err := time.Parse(time.RFC3339Nano, string(fields[0]))
	if err != nil {
		return logEntry{content: line}
	}
	e := logEntry{rawTime: fields[0], time: t, partial: string(fields[2]) == "P"}
	if len(fields) == 4 {
		e.content = fields[3]
	}
	return e
}

// logReader returns the complete lines of a file that may still grow.
type logReader struct {
	f     *os.File
	buf   []byte
	off   int
	chunk [32 * 1024]byte
}

// next returns the next complete line (valid until the next call), or
// ok=false at the end of what is written so far (a trailing incomplete line
// is kept for later).
func (r *logReader) next() (line []byte, ok bool, err error) {
	for {
		if i := bytes.IndexByte(r.buf[r.off:], '\n'); i >= 0 {
			line = r.buf[r.off : r.off+i]
			r.off += i + 1
			return line, true, nil
		}
		r.buf = append(r.buf[:0], r.buf[r.off:]...)
		r.off = 0
		n, err := r.f.Read(r.chunk[:])
		if n > 0 {
			r.buf = append(r.buf, r.chunk[:n]...)
			continue
		}
		if err == nil || errors.Is(err, io.EOF) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("read log: %w", err)
	}
}

// logEmitter writes entries as kubectl shows them.
type logEmitter struct {
	w       io.Writer
	opts    runtime.LogOptions
	written int64
	midLine bool
	buf     []byte
}

func (o *logEmitter) emit(e logEntry) error {
	b := o.buf[:0]
	if o.opts.Timestamps && !o.midLine && e.rawTime != nil {
		b = e.time.UTC().AppendFormat(b, logTimeFormat)
		b = append(b, ' ')
	}
	b = append(b, e.content...)
	if !e.partial {
		b = append(b, '\n')
	}
	o.midLine = e.partial
	o.buf = b
	if o.opts.LimitBytes > 0 {
		if left := o.opts.LimitBytes - o.written; int64(len(b)) >= left {
			if _, err := o.w.Write(b[:left]); err != nil {
				return err
			}
			return errLimitReached
		}
	}
	n, err := o.w.Write(b)
	o.written += int64(n)
	return err
}
