package file

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nephio-project/ipam/service/internal/wal"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/store/record"
)

// Options configure a Store.
type Options struct {
	// Logger receives recovery and snapshot messages; nil means slog.Default().
	Logger *slog.Logger
	// NoSync skips fsync: changes survive a crash of the process but not of
	// the machine. Only for benchmarks of the in-memory part.
	NoSync bool
	// SnapshotEvery takes a snapshot (and compacts the log) in the
	// background after this many records; 0 means DefaultSnapshotEvery and
	// a negative value never snapshots automatically.
	SnapshotEvery int
	// RecoverTruncated restores what is left of a log that ends before
	// the last acknowledged change, logging the lost range, instead of
	// refusing to open (see wal.ErrTruncated).
	RecoverTruncated bool
	// SyncFile, when set, replaces (*os.File).Sync for the fsyncs (and
	// fdatasyncs) of the log's segments: fault injection (a slow or
	// failing fsync) in tests.
	SyncFile func(*os.File) error
	// OnFsync, when set, receives the duration of each fsync or fdatasync
	// of the log's segments (none with NoSync): a hook for metrics, called by the log's
	// writer, that must return quickly.
	OnFsync func(time.Duration)
	// OnCommit, when set, receives the records and bytes of each group
	// commit of the log, written with one fsync: a hook for metrics, called
	// by the log's writer, that must return quickly.
	OnCommit func(records, bytes int)
}

// DefaultSnapshotEvery is the number of records between automatic snapshots
// when Options.SnapshotEvery is 0.
const DefaultSnapshotEvery = 100_000

// restoreChunk is the number of records given to one Allocator.Apply
// call. At most five chunks are in flight (filled, queued, applied), and
// they are recycled: a restore allocates at most that many, so a small
// chunk keeps the memory of a restore small (a record and its allocation
// take 352 bytes) while Apply's cost per call stays negligible.
const restoreChunk = 512

// chunk is a run of decoded records for one Apply call, with the backing
// array of their allocations (a record holds at most one).
type chunk struct {
	recs   []ipam.Record
	allocs []ipam.AllocationRecord
}

// newChunk returns an empty chunk, recycled from free if one is there.
func newChunk(free chan *chunk) *chunk {
	select {
	case c := <-free:
		return c
	default:
		return &chunk{recs: make([]ipam.Record, 0, restoreChunk), allocs: make([]ipam.AllocationRecord, restoreChunk)}
	}
}

// reset empties c, dropping its references to what Apply kept.
func (c *chunk) reset() {
	clear(c.recs)
	c.recs = c.recs[:0]
	clear(c.allocs)
}

// ErrClosed is returned by the methods of a closed Store.
var ErrClosed = errors.New("file store: closed")

// Store is the durable journal of an ipam.Allocator in one directory. It is
// safe for concurrent use.
type Store struct {
	dir   string
	log   *wal.Log
	lg    *slog.Logger
	every int64

	snapMu sync.Mutex // one snapshot at a time

	mu     sync.Mutex // guards alloc and closed; never held while waiting
	alloc  *ipam.Allocator
	closed bool
	bg     sync.WaitGroup // background snapshots

	since    atomic.Int64 // records appended since the state of the last snapshot
	snapping atomic.Bool  // a background snapshot is running
}

var _ ipam.SettlingJournal = (*Store)(nil)

// Open opens (creating if needed) the store in dir. Call Restore next, even
// for an empty directory, before the allocator mutates anything.
func Open(dir string, opts Options) (*Store, error) {
	lg := opts.Logger
	if lg == nil {
		lg = slog.Default()
	}
	lg = lg.With("store", "file")
	every := int64(opts.SnapshotEvery)
	if every == 0 {
		every = DefaultSnapshotEvery
	}
	l, err := wal.Open(dir, wal.Options{Logger: lg, NoSync: opts.NoSync, RecoverTruncated: opts.RecoverTruncated,
		SyncFile: opts.SyncFile, OnFsync: opts.OnFsync, OnCommit: opts.OnCommit})
	if err != nil {
		return nil, fmt.Errorf("file store %s: %w", dir, err)
	}
	return &Store{dir: dir, log: l, lg: lg, every: every}, nil
}

// Restore loads the newest snapshot and the log after it into a, which
// must be fresh (empty), and remembers a for automatic snapshots. It returns
// an error when a record does not decode or does not apply: the store then
// holds something this version cannot read, and serving from a partial state
// would hand out taken addresses. After an error a holds part of the state
// and must be discarded.
//
// Decoded records share their label maps and strings with each other; the
// core copies or interns what it keeps and never mutates stored maps.
func (s *Store) Restore(a *ipam.Allocator) error {
	if err := s.check(); err != nil {
		return err
	}
	start := time.Now()

	// Decoding (here) and applying (in a second goroutine) overlap. Chunks
	// go back to the decoder once applied: Apply copies the records'
	// objects (keeping only their maps, slices and strings), so their
	// backing arrays are reused rather than left to the collector.
	chunks := make(chan *chunk, 2)
	free := make(chan *chunk, 4)
	stop := make(chan struct{})
	applied := make(chan error, 1)
	go func() {
		var err error
		n := 0 // records applied so far, snapshot first
		for c := range chunks {
			if err != nil {
				continue
			}
			if err = a.Apply(c.recs); err != nil {
				err = fmt.Errorf("applying records %d..%d (snapshot first, then log): %w", n, n+len(c.recs)-1, err)
				close(stop)
				continue
			}
			n += len(c.recs)
			c.reset()
			select {
			case free <- c:
			default:
			}
		}
		applied <- err
	}()

	var d record.Decoder
	cur := newChunk(free)
	d.UseSlab(cur.allocs)
	add := func(rec ipam.Record) error {
		cur.recs = append(cur.recs, rec)
		if len(cur.recs) < restoreChunk {
			return nil
		}
		select {
		case chunks <- cur:
		case <-stop:
			return errors.New("apply failed")
		}
		cur = newChunk(free)
		d.UseSlab(cur.allocs)
		return nil
	}
	var snapRecs, logRecs int
	err := s.log.Replay(func(r io.Reader) error {
		return readSnapshot(r, &d, func(rec ipam.Record) error {
			snapRecs++
			return add(rec)
		})
	}, func(b []byte) error {
		rec, err := d.Decode(b)
		if err != nil {
			return fmt.Errorf("log record %d: %w", logRecs, err)
		}
		logRecs++
		return add(rec)
	})
	if err == nil && len(cur.recs) > 0 {
		select {
		case chunks <- cur:
		case <-stop:
		}
	}
	close(chunks)
	aerr := <-applied
	if aerr != nil {
		return fmt.Errorf("file store %s: restore: %w", s.dir, aerr)
	}
	if err != nil {
		return fmt.Errorf("file store %s: restore: %w", s.dir, err)
	}
	s.lg.Info("restored", "dir", s.dir, "snapshotRecords", snapRecs, "logRecords", logRecs, "seq", s.log.Seq(),
		"duration", time.Since(start).Round(time.Microsecond))

	s.mu.Lock()
	s.alloc = a
	s.mu.Unlock()
	if s.since.Add(int64(logRecs)) >= s.every && s.every > 0 {
		s.snapshotInBackground()
	}
	return nil
}

// Append encodes recs and queues them to the log as one batch, atomic on
// disk: after a crash either all of recs are restored or none. It does no
// I/O; the returned function blocks until the batch is durable (one fsync
// shared with every batch queued meanwhile) and reports a write failure.
// Append implements ipam.Journal.
func (s *Store) Append(recs []ipam.Record) func() error {
	if len(recs) == 0 {
		return func() error { return nil }
	}
	eb := encodePool.Get().(*encodeBuf)
	buf, payloads := eb.buf[:0], eb.payloads[:0]
	for i := range recs {
		if len(buf) > 0 && cap(buf)-len(buf) < maxPooledBuf/4 {
			// A large batch goes on in a new array rather than in a
			// larger copy of this one: it is encoded once, without the
			// garbage of the copies.
			buf = make([]byte, 0, maxPooledBuf)
		}
		start := len(buf)
		buf = record.Append(buf, &recs[i])
		// When buf grows, earlier payloads keep pointing into the old
		// array, which stays valid.
		payloads = append(payloads, buf[start:len(buf):len(buf)])
	}
	p := s.log.Enqueue(payloads...) // copies the payloads
	if cap(buf) <= maxPooledBuf {
		clear(payloads)
		eb.buf, eb.payloads = buf, payloads
		encodePool.Put(eb)
	}
	if n := s.since.Add(int64(len(recs))); s.every > 0 && n >= s.every {
		s.snapshotInBackground()
	}
	return p.Wait
}

// Settled returns nil when every batch appended so far is durable, and
// otherwise a function that waits for the fsync that makes them so (the
// group commit's next), or returns the write failure that keeps them from
// it, wrapping ipam.ErrUnavailable: the store then refuses every change
// until it is opened again. With nothing pending it costs two atomic
// loads. Settled implements ipam.SettlingJournal: reads answer only
// durable changes.
func (s *Store) Settled() func() error {
	p := s.log.Unsynced()
	if p == nil {
		return nil
	}
	return func() error {
		if err := p.Wait(); err != nil {
			return fmt.Errorf("%w: file store %s: %w", ipam.ErrUnavailable, s.dir, err)
		}
		return nil
	}
}

// encodeBuf is Append's scratch space; the log copies what Enqueue gets, so
// it is reused across calls.
type encodeBuf struct {
	buf      []byte
	payloads [][]byte
}

// maxPooledBuf bounds the buffers kept for reuse (a large Sync's is dropped).
const maxPooledBuf = 64 << 10

var encodePool = sync.Pool{New: func() any { return new(encodeBuf) }}

// snapshotInBackground starts a snapshot of the bound allocator unless one
// is running, the store is closed or no allocator is bound yet.
func (s *Store) snapshotInBackground() {
	if !s.snapping.CompareAndSwap(false, true) {
		return
	}
	s.mu.Lock()
	a := s.alloc
	if s.closed || a == nil {
		s.mu.Unlock()
		s.snapping.Store(false)
		return
	}
	s.bg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.bg.Done()
		defer s.snapping.Store(false)
		if err := s.snapshot(a); err != nil {
			s.lg.Error("automatic snapshot failed", "dir", s.dir, "err", err)
		}
	}()
}

// Snapshot writes the current state of a as a snapshot and lets the log
// drop what it covers. Mutations are paused only while a's state is copied
// (not while it is written). It also remembers a for automatic snapshots.
func (s *Store) Snapshot(a *ipam.Allocator) error {
	if err := s.check(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.alloc == nil {
		s.alloc = a
	}
	s.mu.Unlock()
	return s.snapshot(a)
}

func (s *Store) snapshot(a *ipam.Allocator) error {
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	start := time.Now()
	var seq uint64
	var since int64
	recs := a.Snapshot(func() {
		// Nothing is being journaled: every appended record is queued, and
		// seq is the last of them.
		seq = s.log.Seq()
		since = s.since.Swap(0)
	})
	frozen := time.Since(start)
	if err := s.log.Snapshot(seq, func(w io.Writer) error { return writeSnapshot(w, recs) }); err != nil {
		s.since.Add(since) // still not covered by a snapshot
		return fmt.Errorf("file store %s: snapshot at %d: %w", s.dir, seq, err)
	}
	s.lg.Info("snapshot written", "dir", s.dir, "seq", seq, "records", len(recs),
		"frozen", frozen.Round(time.Microsecond), "duration", time.Since(start).Round(time.Microsecond))
	return nil
}

func (s *Store) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

// Close waits for a running snapshot and closes the log. Changes appended
// before Close and not yet waited for are flushed by the log's Close.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	s.bg.Wait()
	return s.log.Close()
}
