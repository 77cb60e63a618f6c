package memstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// The rule that keeps resourceVersions from going back or being reused:
//
//   - ceilingFile holds a revision C such that no revision above C has ever
//     been handed out. A write that would get a revision above it first
//     raises C on disk (fsync, rename, fsync of the directory). The next
//     block is reserved in the background when half the current one is used,
//     so in practice writes never wait for the disk.
//   - snapshotFile holds the content at some revision S <= C, written every
//     SnapshotInterval and at Close (which also lowers C to S: nothing above
//     S was handed out, so a clean restart continues at S, unless
//     InitialRevision is higher, and a watch from S goes on without a gap).
//   - Open restarts the counter at max(S, C, Config.InitialRevision). After
//     a crash that skips the unused part of the block; a client holding a
//     revision R from before the crash can never match a revision given
//     later, and its watch from R fails with ErrCompacted (410) since the
//     history starts at the restart revision.
const (
	snapshotFile = "snapshot"
	ceilingFile  = "revision"
)

// snapshotMagic starts a snapshot file (format version 1).
var snapshotMagic = [8]byte{'n', 'p', 'm', 'e', 'm', 's', 0, 1}

// persister owns the files in Dir.
type persister struct {
	dir   string
	block int64
	log   *slog.Logger

	// ceiling is the durable ceiling and reserving says a background
	// reservation runs; both under Store.mu (reserve is called with it).
	ceiling   int64
	reserving bool

	// fileMu serialises file writes; written is the highest ceiling on
	// disk (it only grows, except when Close lowers it to the snapshot).
	fileMu  sync.Mutex
	written int64
	// raised is called, without fileMu, when a background reservation
	// has reached the disk.
	raised func(ceiling int64, err error)
	// pending counts the background reservations (Close waits for them).
	pending sync.WaitGroup
}

// restored is what Open found in Dir.
type restored struct {
	revision int64
	items    []storage.KeyValue
}

func openPersister(dir string, block, initial int64, log *slog.Logger) (*persister, restored, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, restored{}, fmt.Errorf("memstore dir: %w", err)
	}
	p := &persister{dir: dir, block: block, log: log}
	ceiling, haveCeiling, err := readCeiling(filepath.Join(dir, ceilingFile))
	if err != nil {
		// Without it the store cannot know which revisions were handed out.
		return nil, restored{}, err
	}
	snap, err := readSnapshot(filepath.Join(dir, snapshotFile))
	if err != nil {
		// The content is soft state, rebuilt by its writers; the ceiling
		// alone keeps revisions safe.
		log.Warn("lease snapshot unreadable; starting empty (holders re-create their leases)", "dir", dir, "err", err)
		snap = restored{}
	}
	if !haveCeiling && snap.revision != 0 {
		return nil, restored{}, fmt.Errorf("memstore %s: snapshot without its revision ceiling file %q (remove the whole directory to start over)", dir, ceilingFile)
	}
	r := restored{revision: max(snap.revision, ceiling, initial), items: snap.items}
	p.ceiling, p.written = r.revision, r.revision
	if err := p.write(r.revision + block); err != nil {
		return nil, restored{}, err
	}
	p.ceiling = r.revision + block
	return p, r, nil
}

// reserve makes sure revision next lies under the durable ceiling, and
// starts reserving the next block when half of this one is used. Called
// with Store.mu held.
func (p *persister) reserve(next int64) error {
	if next > p.ceiling {
		// The background reservation fell behind (or failed): wait for it.
		target := next + p.block
		if err := p.write(target); err != nil {
			return err
		}
		p.ceiling = target
		return nil
	}
	if !p.reserving && p.ceiling-next < p.block/2 {
		p.reserving = true
		target := p.ceiling + p.block
		p.pending.Go(func() {
			p.raised(target, p.write(target))
		})
	}
	return nil
}

// write raises the ceiling on disk to at least ceiling.
func (p *persister) write(ceiling int64) error {
	p.fileMu.Lock()
	defer p.fileMu.Unlock()
	if ceiling <= p.written {
		return nil
	}
	if err := p.writeCeilingLocked(ceiling); err != nil {
		return err
	}
	p.written = ceiling
	return nil
}

func (p *persister) writeCeilingLocked(ceiling int64) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(ceiling))
	if err := writeAtomic(p.dir, ceilingFile, func(w io.Writer) error { _, err := w.Write(b[:]); return err }); err != nil {
		return fmt.Errorf("reserve revisions up to %d: %w", ceiling, err)
	}
	return nil
}

func readCeiling(path string) (int64, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read revision ceiling: %w", err)
	}
	if len(b) != 8 {
		return 0, false, fmt.Errorf("revision ceiling %s: %d bytes, want 8 (remove the whole directory to start over)", path, len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), true, nil
}

// snapshotLoop writes a snapshot every SnapshotInterval until Close.
func (s *Store) snapshotLoop() {
	defer s.done.Done()
	t := s.cfg.Clock.NewTicker(s.cfg.SnapshotInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C():
			if err := s.snapshot(false); err != nil {
				s.cfg.Logger.Warn("lease snapshot", "err", err)
			}
		}
	}
}

// snapshot writes the current content. With final (Close) it also lowers
// the ceiling to the snapshot's revision: nothing above it was handed out.
func (s *Store) snapshot(final bool) error {
	s.mu.RLock()
	rev := s.rev
	items := make([]storage.KeyValue, 0, len(s.keys))
	for _, k := range s.keys {
		items = append(items, s.entries[k].keyValue())
	}
	s.mu.RUnlock()
	p := s.persist
	if final {
		p.pending.Wait()
	}
	p.fileMu.Lock()
	defer p.fileMu.Unlock()
	err := writeAtomic(p.dir, snapshotFile, func(w io.Writer) error { return encodeSnapshot(w, rev, items) })
	if err != nil {
		return fmt.Errorf("write snapshot at revision %d: %w", rev, err)
	}
	if final {
		if err := p.writeCeilingLocked(rev); err != nil {
			return err
		}
		p.written = rev
	}
	return nil
}

// Snapshot format: magic, revision, count, then per item key length, key,
// value length, value, mod revision, create revision (big-endian uint64
// for numbers), then the CRC-32 (Castagnoli) of everything before it.
func encodeSnapshot(w io.Writer, rev int64, items []storage.KeyValue) error {
	crc := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	bw := bufio.NewWriter(io.MultiWriter(w, crc))
	var num [8]byte
	putNum := func(v uint64) {
		binary.BigEndian.PutUint64(num[:], v)
		_, _ = bw.Write(num[:])
	}
	_, _ = bw.Write(snapshotMagic[:])
	putNum(uint64(rev))
	putNum(uint64(len(items)))
	for _, kv := range items {
		putNum(uint64(len(kv.Key)))
		_, _ = bw.WriteString(kv.Key)
		putNum(uint64(len(kv.Value)))
		_, _ = bw.Write(kv.Value)
		putNum(uint64(kv.ModRevision))
		putNum(uint64(kv.CreateRevision))
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	binary.BigEndian.PutUint32(num[:4], crc.Sum32())
	_, err := w.Write(num[:4])
	return err
}

func readSnapshot(path string) (restored, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return restored{}, nil
	}
	if err != nil {
		return restored{}, err
	}
	if len(b) < len(snapshotMagic)+20 || [8]byte(b[:8]) != snapshotMagic {
		return restored{}, fmt.Errorf("%s: not a snapshot", path)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)) != sum {
		return restored{}, fmt.Errorf("%s: checksum mismatch", path)
	}
	r := snapReader{b: body[8:]}
	out := restored{revision: int64(r.num())}
	n := r.num()
	for i := uint64(0); i < n && r.err == nil; i++ {
		key := string(r.bytes())
		value := r.bytes()
		out.items = append(out.items, storage.KeyValue{Key: key, Value: value, ModRevision: int64(r.num()), CreateRevision: int64(r.num())})
	}
	if r.err != nil || len(r.b) != 0 {
		return restored{}, fmt.Errorf("%s: malformed", path)
	}
	return out, nil
}

type snapReader struct {
	b   []byte
	err error
}

func (r *snapReader) num() uint64 {
	if len(r.b) < 8 {
		r.err = io.ErrUnexpectedEOF
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *snapReader) bytes() []byte {
	n := r.num()
	if r.err != nil || uint64(len(r.b)) < n {
		r.err = io.ErrUnexpectedEOF
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// writeAtomic writes name in dir through a temporary file, fsynced and
// renamed over it, then fsyncs dir: a crash leaves the old or the new file.
func writeAtomic(dir, name string, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(dir, name+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err = write(f); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
