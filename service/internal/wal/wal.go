package wal

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Errors returned by the Log; they are wrapped, so test with errors.Is.
var (
	// ErrClosed: the Log was closed.
	ErrClosed = errors.New("wal: log closed")
	// ErrLocked: another Log, in this or another process, has the data
	// directory open.
	ErrLocked = errors.New("wal: data directory in use")
	// ErrCorrupt: the files on disk are damaged somewhere other than a torn
	// tail of the last segment, so replaying them would lose records.
	ErrCorrupt = errors.New("wal: corrupt log")
	// ErrTooLarge: the encoded batch exceeds the 1 GiB frame limit.
	ErrTooLarge = errors.New("wal: batch too large")
)

// DefaultSegmentBytes is the segment size used when Options.SegmentBytes
// is 0.
const DefaultSegmentBytes = 64 << 20

// zeroChunk is the granularity of the zero-filled space kept ahead of the
// writer in the active segment: when a group commit's frames would go past
// the end of the file, the file is first extended with zeros to the next
// multiple of zeroChunk (but not past Options.SegmentBytes, or past the
// group's end if that is further), and that commit pays one full fsync,
// which also flushes the zeros. The commits that follow write into space
// that is already allocated and written, and use fdatasync, which commits
// no metadata.
//
// The size trades the latency of the extending commit against how often
// one comes: measured on ext4 on a busy 2-core VM, extending by 256 KiB,
// 1 MiB and 4 MiB took about 2, 5 and 16 ms (the fsync writes the zeros).
// 1 MiB is one extension per 8,000 commits of a small batch (about 130
// bytes), or per 1,000 of a 1 KiB batch: rare enough to stay out of the
// 99.9th percentile, and a bounded spike when it comes.
const zeroChunk = 1 << 20

// zeros is what the active segment is extended with.
var zeros [64 << 10]byte

// Options configure a Log.
type Options struct {
	// Logger receives warnings about torn tails, skipped snapshots and
	// write failures; nil means slog.Default().
	Logger *slog.Logger
	// NoSync skips every fsync. Only for tests and benchmarks of the
	// in-memory part: a crash may lose acknowledged batches.
	NoSync bool
	// SegmentBytes is the size after which the log continues in a new
	// segment file; 0 means DefaultSegmentBytes.
	SegmentBytes int64
	// RecoverTruncated makes Replay accept a log that ends before the
	// last acknowledged batch (ErrTruncated otherwise): it logs the lost
	// range and goes on from what is left.
	RecoverTruncated bool
	// SyncFile, when set, replaces every fsync and fdatasync of a segment
	// file (and the fsyncs of the other files): fault injection (a slow or
	// failing fsync) in tests.
	SyncFile func(*os.File) error
	// OnFsync, when set, is called by the writer with the duration of
	// each successful fsync or fdatasync of a segment file (none with
	// NoSync): the latency a group commit waits for. It must return
	// quickly.
	OnFsync func(time.Duration)
	// OnCommit, when set, is called by the writer after each successful
	// group commit with the payloads (records) of its batches and the
	// bytes it wrote. It must return quickly.
	OnCommit func(records, bytes int)
}

// Log is an open write-ahead log in a data directory. Its methods are safe
// for concurrent use, except that Replay must complete before the first
// Enqueue.
type Log struct {
	dir      string
	log      *slog.Logger
	noSync   bool
	segBytes int64
	chunk    int64 // zeroChunk; smaller in tests
	recover  bool  // Options.RecoverTruncated
	lock     *os.File
	syncFile func(*os.File) error     // full fsync: f.Sync, or Options.SyncFile; replaced by tests
	syncData func(*os.File) error     // fdatasync of a segment, or Options.SyncFile; replaced by tests
	onFsync  func(time.Duration)      // Options.OnFsync
	onCommit func(records, bytes int) // Options.OnCommit

	mu       sync.Mutex
	cur      *group // the batches enqueued since the writer last took a group
	seq      uint64 // the last enqueued batch
	replayed bool   // Replay was called
	ready    bool   // Replay succeeded and the writer runs
	closed   bool
	err      error  // the first write or fsync failure: the Log is failed
	writing  *group // the group the writer took last (nil before its first turn)

	// Synced's fast path reads these without l.mu: enqueued is l.seq,
	// stored under l.mu; durable is the last batch written and fsynced,
	// stored by the writer before it releases the group's Waits.
	enqueued atomic.Uint64
	durable  atomic.Uint64

	kick    chan struct{} // wakes the writer; capacity 1
	stopped chan struct{} // closed when the writer has returned

	// Owned by the writer goroutine (by Replay before it starts).
	f         *os.File // the active (last) segment, open for writing at segSize
	ack       *acker   // the ACKED file
	segSize   int64    // the logical end of f: where the next frame goes
	fileSize  int64    // the size of f: zeros from segSize to here
	sizeDirty bool     // f's size may not be durable: the next sync must be a full fsync
	spareBuf  []byte
	spareEnds []int

	segMu sync.Mutex
	segs  []uint64 // first seqs of the segment files, ascending; the last is active

	snapMu  sync.Mutex // serializes Replay, Snapshot and Close
	snapSeq uint64     // seq of the newest snapshot

	stats struct{ batches, commits, fsyncs, bytes atomic.Uint64 }
}

// Open opens the log in dir, creating the directory if needed, and takes an
// exclusive lock on dir/LOCK; it fails with ErrLocked while another Log has
// dir open. The log must then be replayed before it is appended to.
func Open(dir string, opts Options) (*Log, error) {
	l := &Log{
		dir:      dir,
		log:      opts.Logger,
		noSync:   opts.NoSync,
		segBytes: opts.SegmentBytes,
		chunk:    zeroChunk,
		recover:  opts.RecoverTruncated,
		syncFile: opts.SyncFile,
		onFsync:  opts.OnFsync,
		onCommit: opts.OnCommit,
		kick:     make(chan struct{}, 1),
		stopped:  make(chan struct{}),
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	l.syncData = opts.SyncFile
	if l.syncFile == nil {
		l.syncFile, l.syncData = (*os.File).Sync, fdatasync
	}
	if l.segBytes <= 0 {
		l.segBytes = DefaultSegmentBytes
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("wal: %w", err)
		}
		if err := l.syncDir(filepath.Dir(dir)); err != nil {
			return nil, err
		}
	}
	lock, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	if err := lockFile(lock); err != nil {
		_ = lock.Close()
		if errors.Is(err, ErrLocked) {
			return nil, fmt.Errorf("%w: %s is locked by another process (see the PID in it); two servers cannot share a data directory", ErrLocked, lock.Name())
		}
		return nil, fmt.Errorf("wal: locking %s: %w", lock.Name(), err)
	}
	if err := lock.Truncate(0); err == nil {
		_, _ = lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0) // informational only
	}
	l.lock = lock
	if err := l.removeTemps(); err != nil {
		_ = lock.Close()
		return nil, err
	}
	return l, nil
}

// removeTemps deletes the snapshot files left behind by interrupted
// Snapshot calls.
func (l *Log) removeTemps() error {
	temps, err := filepath.Glob(filepath.Join(l.dir, snapPrefix+"*"+snapSuffix+tmpSuffix))
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	for _, t := range temps {
		if err := os.Remove(t); err != nil {
			return fmt.Errorf("wal: %w", err)
		}
	}
	return nil
}

// group is the unit of group commit: the frames enqueued between two turns
// of the writer, and the outcome their Pendings wait for.
type group struct {
	buf   []byte // concatenated frames
	ends  []int  // end offset in buf of each batch's frame
	first uint64 // seq of the first batch
	recs  int    // payloads of the batches

	done chan struct{} // closed once the group is durable or failed
	err  error         // set before done is closed
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// failed returns a Pending whose Wait returns err.
func failed(err error) *Pending { return &Pending{g: &group{done: closedChan, err: err}} }

// Pending is the outcome of one Enqueue call.
type Pending struct {
	g   *group
	seq uint64
}

// Wait blocks until every batch enqueued up to and including this call is
// written and fsynced, and returns nil, or returns the error that keeps them
// from ever being so.
func (p *Pending) Wait() error {
	<-p.g.done
	return p.g.err
}

// Seq is the sequence number of the batch, or of the last batch before it
// when the call enqueued no payloads; 0 when Enqueue failed.
func (p *Pending) Seq() uint64 { return p.seq }

// Enqueue appends payloads, as one batch, to the queue of the writer and
// returns at once without I/O, so the caller may hold its own locks.
// Batches reach the disk in call order, and the payloads of one call are
// atomic: after a crash all of them are replayed or none. The payloads are
// copied; the caller may reuse them when Enqueue returns. Enqueue with no
// payloads adds no batch: its Wait waits for the batches before it.
//
// Enqueue fails (its Pending's Wait returns the error) before a successful
// Replay, after Close, and after any write or fsync failure.
func (l *Log) Enqueue(payloads ...[]byte) *Pending {
	size := bodySize(payloads)
	if size > maxBody {
		return failed(fmt.Errorf("%w: %d bytes", ErrTooLarge, size))
	}
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return failed(err)
	}
	g := l.cur
	if len(payloads) > 0 {
		l.seq++
		if len(g.ends) == 0 {
			g.first = l.seq
		}
		g.buf = appendFrame(slices.Grow(g.buf, prefixSize+size), l.seq, size, payloads) // one copy of a large batch
		g.ends = append(g.ends, len(g.buf))
		g.recs += len(payloads)
		l.enqueued.Store(l.seq)
	}
	p := &Pending{g: g, seq: l.seq}
	l.mu.Unlock()
	l.wake()
	return p
}

// usable reports why batches cannot be enqueued; l.mu is held.
func (l *Log) usable() error {
	switch {
	case l.closed:
		return ErrClosed
	case l.err != nil:
		return l.err
	case !l.ready:
		return errors.New("wal: Enqueue before a successful Replay")
	}
	return nil
}

func (l *Log) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Unsynced returns nil when every batch enqueued so far is written and
// fsynced, and otherwise a Pending whose Wait returns once they are (it
// waits for the group commit that takes the last of them; Unsynced
// enqueues nothing), or returns the error that keeps them from ever being
// so, as it does at once after the Log failed. With nothing pending it
// costs two atomic loads: no lock, no channel.
func (l *Log) Unsynced() *Pending {
	last := l.enqueued.Load()
	if l.durable.Load() >= last {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return failed(l.err)
	}
	// Batch last is in the group being filled, or in the one the writer
	// took last (the writer completes groups in order), or durable.
	g := l.writing
	if cur := l.cur; len(cur.ends) > 0 && cur.first <= last {
		g = cur
	}
	if g == nil || l.durable.Load() >= last {
		return nil
	}
	return &Pending{g: g, seq: last}
}

// Seq returns the sequence number of the last enqueued batch (after Replay:
// of the last replayed one; 0 for an empty log).
func (l *Log) Seq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// Stats are cumulative counters of the writer since Open.
type Stats struct {
	Batches uint64 // batches written
	Commits uint64 // group commits: turns of the writer that wrote batches
	Fsyncs  uint64 // fsyncs and fdatasyncs of segment files (0 with NoSync)
	Bytes   uint64 // frame bytes written to segment files (not the zeros ahead of them)
}

// Stats returns the writer's counters.
func (l *Log) Stats() Stats {
	return Stats{
		Batches: l.stats.batches.Load(),
		Commits: l.stats.commits.Load(),
		Fsyncs:  l.stats.fsyncs.Load(),
		Bytes:   l.stats.bytes.Load(),
	}
}

// Close waits for a Snapshot in progress, writes and fsyncs every batch
// enqueued so far, stops the writer, cuts the zero-filled tail off the
// active segment and releases the directory lock. It returns the error
// that failed the Log, if any. Enqueue after Close fails with ErrClosed.
func (l *Log) Close() error {
	l.snapMu.Lock()
	defer l.snapMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed = true
	running := l.ready
	l.mu.Unlock()

	var err error
	if running {
		l.wake()
		<-l.stopped
		l.mu.Lock()
		err = l.err
		l.mu.Unlock()
		if err == nil && l.fileSize > l.segSize {
			// A cleanly closed segment ends with its last frame, as a
			// finished one does. Not fsynced: if the cut is lost, the
			// zero-filled tail is back, and Replay reads it as the end.
			if terr := l.f.Truncate(l.segSize); terr != nil {
				err = fmt.Errorf("wal: cutting the zero-filled tail of %s: %w", l.f.Name(), terr)
			}
		}
		if cerr := l.f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("wal: %w", cerr)
		}
		if cerr := l.fsync(l.ack.f); err == nil && cerr != nil {
			err = fmt.Errorf("wal: %w", cerr)
		}
		if cerr := l.ack.f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("wal: %w", cerr)
		}
	}
	if cerr := l.lock.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("wal: %w", cerr)
	}
	return err
}

// run is the writer: each turn it takes every batch enqueued so far, writes
// them with one write and one fsync or fdatasync (more only across an
// extension of the zero-filled tail or a segment roll), and releases their
// Waits.
func (l *Log) run() {
	defer close(l.stopped)
	for {
		<-l.kick
		// Let the goroutines that are ready to run go first: those about
		// to enqueue join this group instead of waiting a whole fsync for
		// the next one. With nothing else to run, this returns at once.
		runtime.Gosched()
		next := &group{buf: l.spareBuf, ends: l.spareEnds, done: make(chan struct{})}
		l.mu.Lock()
		g := l.cur
		l.cur = next
		l.writing = g
		final := l.closed // no batch can follow g
		err := l.err
		l.mu.Unlock()

		if err == nil && len(g.ends) > 0 {
			if err = l.commit(g); err != nil {
				err = fmt.Errorf("wal: writing batches %d..%d: %w (the log accepts no more batches)", g.first, g.first+uint64(len(g.ends))-1, err)
				l.log.Error("wal: write failed, log is now failed", "dir", l.dir, "err", err)
				l.mu.Lock()
				l.err = err
				l.mu.Unlock()
			}
		}
		if cap(g.buf) <= 4<<20 { // keep a moderate buffer for the next group
			l.spareBuf, l.spareEnds = g.buf[:0], g.ends[:0]
		} else {
			l.spareBuf, l.spareEnds = nil, nil
		}
		batches := len(g.ends)
		g.buf, g.ends = nil, nil
		g.err = err
		if err == nil && batches > 0 {
			l.durable.Store(g.first + uint64(batches) - 1)
		}
		close(g.done)
		if err == nil && batches > 0 {
			// After the waiters are released: ACKED never runs ahead of
			// the log, and a crash before this write only leaves it behind.
			if werr := l.ack.write(g.first + uint64(batches) - 1); werr != nil {
				l.log.Warn("wal: recording the acknowledged batch", "file", l.ack.f.Name(), "err", werr)
			}
		}
		if final {
			return
		}
	}
}

// commit writes the frames of g to the active segment, rolling to a new
// segment before a batch that does not fit, and syncs it: with fdatasync,
// or with a full fsync when the file's size changed.
func (l *Log) commit(g *group) error {
	start, prev := 0, 0 // g.buf[start:prev] is accepted but not yet written
	for i, end := range g.ends {
		pending := int64(prev - start)
		if l.segSize+pending > 0 && l.segSize+int64(end-start) > l.segBytes {
			if err := l.write(g.buf[start:prev], true); err != nil {
				return err
			}
			if err := l.roll(g.first + uint64(i)); err != nil {
				return err
			}
			start = prev
		}
		prev = end
	}
	if err := l.write(g.buf[start:prev], false); err != nil {
		return err
	}
	if err := l.syncSegment(); err != nil {
		return err
	}
	l.stats.batches.Add(uint64(len(g.ends)))
	l.stats.commits.Add(1)
	if l.onCommit != nil {
		l.onCommit(g.recs, len(g.buf))
	}
	return nil
}

// write writes frames b at the logical end of the active segment, first
// extending the file's zero-filled tail when b does not fit in it; when
// the segment is finished after b (a roll follows), b just grows the file,
// since the roll would cut the zeros off again.
func (l *Log) write(b []byte, finished bool) error {
	if len(b) == 0 {
		return nil
	}
	end := l.segSize + int64(len(b))
	if end > l.fileSize {
		if finished {
			l.sizeDirty = true
		} else if err := l.extend(end); err != nil {
			return err
		}
	}
	n, err := l.f.WriteAt(b, l.segSize)
	l.segSize += int64(n)
	l.fileSize = max(l.fileSize, l.segSize)
	l.stats.bytes.Add(uint64(n))
	return err
}

// extend writes zeros from the end of the active segment up to need
// rounded up to a multiple of zeroChunk, but not past Options.SegmentBytes
// unless need is past it: real zeros, not fallocate(2), whose unwritten
// extents would cost a metadata commit on their first write. The next
// sync is a full fsync.
func (l *Log) extend(need int64) error {
	target := max(need, min((need+l.chunk-1)/l.chunk*l.chunk, l.segBytes))
	l.sizeDirty = true
	for l.fileSize < target {
		n, err := l.f.WriteAt(zeros[:min(int64(len(zeros)), target-l.fileSize)], l.fileSize)
		l.fileSize += int64(n)
		if err != nil {
			return fmt.Errorf("zero-filling %s: %w", l.f.Name(), err)
		}
	}
	return nil
}

// syncSegment syncs the active segment, with a full fsync when its size
// may not be durable and with fdatasync otherwise, and reports the time it
// took to Options.OnFsync.
func (l *Log) syncSegment() error {
	sync := l.syncData
	if l.sizeDirty {
		sync = l.syncFile
	}
	report := l.onFsync != nil && !l.noSync
	var start time.Time
	if report {
		start = time.Now()
	}
	if err := l.sync(l.f, sync); err != nil {
		return err
	}
	l.sizeDirty = false
	if report {
		l.onFsync(time.Since(start))
	}
	return nil
}

// fsync makes f, its data and metadata, durable.
func (l *Log) fsync(f *os.File) error { return l.sync(f, l.syncFile) }

// sync syncs f with fn, unless NoSync, and counts it.
func (l *Log) sync(f *os.File, fn func(*os.File) error) error {
	if l.noSync {
		return nil
	}
	l.stats.fsyncs.Add(1)
	return fn(f)
}

// roll cuts the zero-filled tail off the active segment, fsyncs and closes
// it, and makes a new, empty segment, for the batches from first on, the
// active one.
func (l *Log) roll(first uint64) error {
	if l.fileSize > l.segSize {
		if err := l.f.Truncate(l.segSize); err != nil {
			return fmt.Errorf("cutting the zero-filled tail of %s: %w", l.f.Name(), err)
		}
		l.fileSize, l.sizeDirty = l.segSize, true
	}
	if err := l.syncSegment(); err != nil {
		return err
	}
	if err := l.f.Close(); err != nil {
		return err
	}
	f, err := l.createSegment(first)
	if err != nil {
		return err
	}
	l.f, l.segSize, l.fileSize, l.sizeDirty = f, 0, 0, false
	l.segMu.Lock()
	l.segs = append(l.segs, first)
	l.segMu.Unlock()
	return nil
}

// createSegment creates the empty segment file for the batches from first
// on, durably, and returns it open for writing.
func (l *Log) createSegment(first uint64) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(l.dir, segName(first)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	if err := l.syncDir(l.dir); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// syncDir makes the directory entries of dir durable.
func (l *Log) syncDir(dir string) error {
	if l.noSync {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("wal: fsync of directory %s: %w", dir, err)
	}
	return nil
}
