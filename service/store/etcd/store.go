package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nephio-project/ipam/service/ipam"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// DefaultPrefix is the key prefix used when Options.Prefix is empty.
const DefaultPrefix = "/ipam/"

// DefaultRequestTimeout bounds one etcd request when
// Options.RequestTimeout is zero.
const DefaultRequestTimeout = 5 * time.Second

// DefaultSnapshotEvery is how many log entries a replica commits between
// two snapshots when Options.SnapshotEvery is zero.
const DefaultSnapshotEvery = 10000

// DefaultSnapshotChunkBytes bounds one snapshot chunk when
// Options.SnapshotChunkBytes is zero; etcd refuses requests larger than
// its --max-request-bytes, 1.5 MiB by default.
const DefaultSnapshotChunkBytes = 1 << 20

// Options configure Open.
type Options struct {
	// Endpoints are the etcd client URLs.
	Endpoints []string
	// Prefix is the key prefix of this IPAM's keys (DefaultPrefix if empty).
	Prefix string
	// TLS, when set, is used to reach etcd (client certificates, CA).
	TLS *tls.Config
	// RequestTimeout bounds each etcd request (DefaultRequestTimeout if 0).
	RequestTimeout time.Duration
	// Logger receives the store's logs (discarded if nil).
	Logger *slog.Logger
	// SnapshotEvery is how many log entries are committed between two
	// snapshots (DefaultSnapshotEvery if 0). A snapshot truncates the log
	// and compacts etcd's history to the previous snapshot. Negative: no
	// automatic snapshot and no compaction (Snapshot still writes one).
	SnapshotEvery int
	// SnapshotChunkBytes bounds the value of one snapshot chunk key
	// (DefaultSnapshotChunkBytes if 0); keep it below etcd's
	// --max-request-bytes.
	SnapshotChunkBytes int
}

// Store keeps the allocator's state in etcd, shared by several replicas;
// see the package documentation. It implements ipam.Committer and
// ipam.Journal.
type Store struct {
	cli        *clientv3.Client
	head       string // PREFIX/head
	logPfx     string // PREFIX/log/
	pointer    string // PREFIX/snapshot
	snapPfx    string // PREFIX/snapshots/
	leadPfx    string // PREFIX/lead/: the write lead's election (lead.go)
	timeout    time.Duration
	every      int // log entries between snapshots; <= 0: none automatic
	chunkBytes int
	log        *slog.Logger
	ctx        context.Context
	cancel     context.CancelFunc
	watched    chan struct{}  // closed when the watch loop ends
	snapping   atomic.Bool    // a background snapshot round runs
	rounds     sync.WaitGroup // background snapshot rounds

	// applyMu serializes what the watch does to the allocator (applying
	// an entry, reloading) with snapshots, so that a snapshot's sequence
	// number is exactly the state it captures.
	applyMu sync.Mutex

	// mu serializes commits and guards what follows; a commit holds it
	// during its transaction, so the watch never races a commit's outcome.
	mu        sync.Mutex
	a         *ipam.Allocator
	applied   int64         // mod revision of the head the allocator reflects (0: none)
	seq       uint64        // sequence number of the last applied entry
	snapSeq   uint64        // sequence number of the newest snapshot seen
	reloading bool          // the allocator is being reloaded: commits wait
	closed    bool          // Close was called: no new snapshot round
	advanced  chan struct{} // closed and replaced whenever applied grows

	publish ipam.Journal // receives other replicas' entries once applied (nil: none)

	// qmu guards the changes waiting to commit (see group.go), whether
	// the store stopped committing, and whether commits are refused
	// (dirty: the allocator holds changes of failed pipelined
	// transactions, or is being reloaded; until the reload ends, with the
	// revision it loaded; epoch counts the times it became so).
	qmu     sync.Mutex
	queue   []*commitReq
	stopped bool
	dirty   bool
	spoiled bool // the allocator holds changes of failed pipelined transactions (until the reload's reset)
	epoch   uint64
	pending int           // pipelined changes queued or in flight
	drained sync.Cond     // L is &qmu: broadcast when pending reaches 0 or dirty is set
	kick    chan struct{} // asks the watch loop to reload

	committing sync.Once     // starts the commit loop (group.go) on the first Commit
	txns       atomic.Uint64 // group transactions committed (CommitStats)
	txnChanges atomic.Uint64 // changes they carried
	txnTime    atomic.Int64  // nanoseconds they took
	wake       chan struct{} // tells the commit loop that changes are queued

	// failure is why the allocator can no longer follow etcd (nil: it
	// can); atomic, as Append reads it under the allocator's locks.
	failure atomic.Pointer[error]

	self      atomic.Value // string: the address this replica campaigns with (Lead)
	lead      atomic.Bool  // this replica holds the write lead: commits are pipelined (lead.go)
	contended atomic.Int64 // unix nanoseconds: when another replica's entry was applied or this one took the lead
	leader    atomic.Value // string: the gRPC address of the replica holding the write lead
	deposed   atomic.Int64 // unix nanoseconds: when this replica last revoked a leader's lease (Depose)
}

// staleError is a refused or undecided commit: the allocator must reach
// the head revision target (0: read it first) before trying again.
type staleError struct {
	target    int64
	cause     error
	reloading bool // refused because the replica reloads its state
}

// Error describes the refusal.
func (e *staleError) Error() string {
	if e.cause != nil {
		return "etcd: commit outcome unknown, catching up: " + e.cause.Error() + ": " + ipam.ErrStale.Error()
	}
	if e.reloading {
		return "etcd: this replica is reloading its state from the snapshot and the log: " + ipam.ErrStale.Error()
	}
	return fmt.Sprintf("etcd: another replica committed first (head at revision %d): %s", e.target, ipam.ErrStale)
}

// Unwrap returns ipam.ErrStale and the cause.
func (e *staleError) Unwrap() []error {
	if e.cause == nil {
		return []error{ipam.ErrStale}
	}
	return []error{ipam.ErrStale, e.cause}
}

// Open connects to etcd. Call Restore with the allocator before serving.
func Open(opts Options) (*Store, error) {
	if len(opts.Endpoints) == 0 {
		return nil, errors.New("store etcd: --etcd-endpoints is required")
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	timeout := opts.RequestTimeout
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            opts.Endpoints,
		DialTimeout:          timeout,
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		TLS:                  opts.TLS,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("store etcd: %w", err)
	}
	every := opts.SnapshotEvery
	if every == 0 {
		every = DefaultSnapshotEvery
	}
	chunk := opts.SnapshotChunkBytes
	if chunk <= 0 {
		chunk = DefaultSnapshotChunkBytes
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{cli: cli, head: prefix + "head", logPfx: prefix + "log/", pointer: prefix + "snapshot", snapPfx: prefix + "snapshots/", leadPfx: prefix + "lead/",
		timeout: timeout, every: every, chunkBytes: chunk, log: log, ctx: ctx, cancel: cancel, advanced: make(chan struct{}),
		kick: make(chan struct{}, 1)}
	s.drained.L = &s.qmu
	return s, nil
}

func (s *Store) logKey(seq uint64) string { return fmt.Sprintf("%s%020d", s.logPfx, seq) }

func (s *Store) seqOf(key []byte) (uint64, error) {
	return strconv.ParseUint(strings.TrimPrefix(string(key), s.logPfx), 10, 64)
}

// Publish makes the store pass the records of other replicas' entries,
// once applied, to j (the server's watch hub) in commit order, so that
// watchers of this replica see every replica's changes. Call it before
// Restore.
func (s *Store) Publish(j ipam.Journal) { s.publish = j }

// Restore loads the newest snapshot and the log entries after it into a
// (a fresh allocator), then follows the log with a watch until Close. a
// must use s as its Committer.
func (s *Store) Restore(a *ipam.Allocator) error {
	st, err := s.load(s.ctx)
	if err != nil {
		return fmt.Errorf("store etcd: %w", err)
	}
	if err := a.Apply(st.recs); err != nil {
		return fmt.Errorf("store etcd: replaying the snapshot and the log: %w", err)
	}
	s.mu.Lock()
	s.a, s.applied, s.seq, s.snapSeq = a, st.headRev, st.seq, st.snapSeq
	s.mu.Unlock()
	s.watched = make(chan struct{})
	go s.follow(st.rev + 1)
	s.log.Info("etcd: restored", "snapshot_entry", st.snapSeq, "entries", st.entries, "revision", st.headRev)
	return nil
}

// errBehind says the allocator can no longer follow the log entry by
// entry (etcd compacted the history its watch needs, an entry is missing
// or does not apply): it must be reloaded.
var errBehind = errors.New("this replica fell behind the log")

// errPublish says the watch hub refused records: the replica stops.
var errPublish = errors.New("publishing to watchers")

// follow applies the log entries of other replicas from revision rev on,
// and reloads the allocator whenever it falls behind.
func (s *Store) follow(rev int64) {
	defer close(s.watched)
	var behind error
	retry := 100 * time.Millisecond
	for s.ctx.Err() == nil {
		if behind != nil {
			next, err := s.reload(behind)
			if err == nil {
				rev, behind, retry = next, nil, 100*time.Millisecond
				continue
			}
			if errors.Is(err, errPublish) {
				s.fail(err)
				return
			}
			s.log.Warn("etcd: reloading failed; retrying", "err", err, "in", retry)
		} else {
			var err error
			if rev, err = s.watch(rev); err != nil {
				if errors.Is(err, errBehind) {
					behind = err
					continue
				}
				s.fail(err)
				return
			}
		}
		s.pause(retry)
		if behind != nil {
			retry = min(2*retry, 5*time.Second)
		}
	}
}

// watch applies log entries from revision rev on until the watch ends;
// it returns the revision to go on from.
func (s *Store) watch(rev int64) (int64, error) {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(s.ctx))
	defer cancel()
	wch := s.cli.Watch(ctx, s.logPfx, clientv3.WithPrefix(), clientv3.WithRev(rev))
	for {
		var wr clientv3.WatchResponse
		select {
		case <-s.kick:
			return rev, fmt.Errorf("%w: a pipelined commit failed, so the allocator holds changes etcd may not have", errBehind)
		case resp, ok := <-wch:
			if !ok {
				return rev, nil
			}
			wr = resp
		}
		if err := wr.Err(); err != nil {
			if wr.CompactRevision != 0 {
				return rev, fmt.Errorf("%w: etcd compacted its history to revision %d, past revision %d the watch needs: %w",
					errBehind, wr.CompactRevision, rev, err)
			}
			s.log.Warn("etcd: watch interrupted; resuming", "revision", rev, "err", err)
			return rev, nil
		}
		for _, ev := range wr.Events {
			if ev.Type != mvccpb.PUT { // truncation deletes entries
				continue
			}
			if err := s.applyEntry(ev.Kv); err != nil {
				return rev, err
			}
			rev = ev.Kv.ModRevision + 1
		}
	}
}

// applyEntry applies one log entry unless the allocator already has it.
func (s *Store) applyEntry(kv *mvccpb.KeyValue) error {
	s.mu.Lock() // waits for a commit in flight, which may be this entry
	a, skip, last := s.a, kv.ModRevision <= s.applied, s.seq
	s.mu.Unlock()
	if skip {
		return nil
	}
	seq, err := s.seqOf(kv.Key)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errBehind, kv.Key, err)
	}
	if seq != last+1 {
		return fmt.Errorf("%w: log entry %d follows entry %d", errBehind, seq, last)
	}
	recs, err := decode(kv.Value)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errBehind, kv.Key, err)
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	// No commit can succeed meanwhile: the head is past s.applied.
	s.contended.Store(time.Now().UnixNano())
	if err := a.Apply(recs); err != nil {
		return fmt.Errorf("%w: applying %s: %w", errBehind, kv.Key, err)
	}
	// Before s.applied moves on, so that no later local change is
	// published first.
	if err := s.publishRecords(recs); err != nil {
		return fmt.Errorf("store etcd: %s: %w", kv.Key, err)
	}
	s.mu.Lock()
	// Pipelined changes queued before this entry was applied were decided
	// without it, yet their transaction would compare the head with the
	// revision it moves to: they must not commit.
	s.qmu.Lock()
	spoiled := s.pending > 0
	s.qmu.Unlock()
	if spoiled {
		s.spoil()
	}
	s.applied, s.seq = kv.ModRevision, seq
	close(s.advanced)
	s.advanced = make(chan struct{})
	s.mu.Unlock()
	return nil
}

// publishRecords passes records to the journal given to Publish and
// waits until it took them.
func (s *Store) publishRecords(recs []ipam.Record) error {
	if s.publish == nil || len(recs) == 0 {
		return nil
	}
	if wait := s.publish.Append(recs); wait != nil {
		if err := wait(); err != nil {
			return fmt.Errorf("%w: %w", errPublish, err)
		}
	}
	return nil
}

// reload replaces the allocator's state with the one etcd holds now (the
// snapshot and the log after it) and returns the revision to watch from.
// Commits of this replica wait meanwhile. Watchers (Publish) receive the
// difference between the state before and after, as put and delete
// records.
func (s *Store) reload(why error) (int64, error) {
	s.log.Warn("etcd: reloading from the snapshot and the log", "reason", why)
	s.mu.Lock() // after the commit in flight, whose entry the load will see
	s.reloading = true
	s.mu.Unlock()
	s.holdCommits()
	st, err := s.load(s.ctx)
	if err != nil {
		return 0, fmt.Errorf("store etcd: reloading: %w", err)
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	var before []ipam.Record
	if s.publish != nil {
		before = s.a.Snapshot(nil)
	}
	if err := s.a.Reset(st.recs); err != nil {
		return 0, fmt.Errorf("store etcd: reloading: %w", err)
	}
	s.qmu.Lock()
	s.spoiled = false // the failed changes are gone
	s.qmu.Unlock()
	if s.publish != nil {
		diff, err := changes(before, s.a.Snapshot(nil))
		if err != nil {
			return 0, fmt.Errorf("store etcd: reloading: %w: %w", errPublish, err)
		}
		if err := s.publishRecords(diff); err != nil {
			return 0, fmt.Errorf("store etcd: reloading: %w", err)
		}
	}
	s.mu.Lock()
	s.applied, s.seq, s.reloading = st.headRev, st.seq, false
	s.snapSeq = max(s.snapSeq, st.snapSeq)
	// Only now, with the revision the reset state reflects: a change
	// admitted before would compare the head with the old one, fail and,
	// pipelined, spoil the allocator again: a reload after each reload.
	s.qmu.Lock()
	s.dirty = false
	s.qmu.Unlock()
	close(s.advanced)
	s.advanced = make(chan struct{})
	s.mu.Unlock()
	s.log.Info("etcd: reloaded", "snapshot_entry", st.snapSeq, "entries", st.entries, "revision", st.headRev)
	return st.rev + 1, nil
}

// pause waits for d, or until the store closes.
func (s *Store) pause(d time.Duration) {
	select {
	case <-s.ctx.Done():
	case <-time.After(d):
	}
}

// fail records that the allocator cannot follow etcd any more.
func (s *Store) fail(err error) {
	s.log.Error("etcd: this replica can no longer follow the log", "err", err)
	s.mu.Lock()
	s.failure.CompareAndSwap(nil, &err)
	close(s.advanced)
	s.advanced = make(chan struct{})
	s.mu.Unlock()
}

// CatchUp implements ipam.Committer: it waits until the watch has applied
// the head revision that refused a commit (read again when unknown).
//
// A replica whose own transaction lost the race for the head (or did not
// learn its outcome) although another replica holds the write lead
// answers Unavailable instead: it could not reach the leader, or not yet
// (a killed leader whose lease still lives; a new leader while this one
// still made changes by itself). Trying again here would race the
// leader's transactions; the caller retries, forwarded to the leader
// once it answers.
func (s *Store) CatchUp(err error) error {
	var se *staleError
	lost := errors.As(err, &se) && !se.reloading
	if leader, self := s.Leader(); lost && !self && leader != "" && leader != s.self.Load() {
		return &unavailableError{fmt.Errorf("store etcd: the replica at %s holds the write lead; not racing it: %w", leader, err)}
	}
	return s.catchUp(err)
}

// catchUp is CatchUp without the test on the write lead.
func (s *Store) catchUp(err error) error {
	var se *staleError
	var target int64
	if errors.As(err, &se) {
		target = se.target
	}
	ctx, cancel := context.WithTimeout(s.ctx, 2*s.timeout)
	defer cancel()
	if target == 0 {
		resp, gerr := s.cli.Get(ctx, s.head)
		if gerr != nil {
			return &unavailableError{fmt.Errorf("store etcd: reading the head: %w", errors.Join(gerr, err))}
		}
		if len(resp.Kvs) > 0 {
			target = resp.Kvs[0].ModRevision
		}
	}
	for {
		s.mu.Lock()
		applied, advanced, reloading := s.applied, s.advanced, s.reloading
		s.mu.Unlock()
		if failed := s.failed(); failed != nil {
			return &unavailableError{failed}
		}
		s.qmu.Lock()
		dirty := s.dirty
		s.qmu.Unlock()
		if applied >= target && !reloading && !dirty {
			return nil
		}
		select {
		case <-advanced:
		case <-ctx.Done():
			return &unavailableError{fmt.Errorf("store etcd: catching up to revision %d (at %d): %w", target, applied, errors.Join(ctx.Err(), err))}
		}
	}
}

// Append implements ipam.Journal. Commit already made the records durable;
// once the replica can no longer follow etcd, Append reports that failure.
func (s *Store) Append([]ipam.Record) func() error {
	if failed := s.failed(); failed != nil {
		return func() error { return failed }
	}
	return nil
}

// failed returns why the allocator can no longer follow etcd, if it
// cannot.
func (s *Store) failed() error {
	if p := s.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// Applied returns the etcd revision of the head this replica has applied.
func (s *Store) Applied() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

// WaitApplied waits until this replica has applied revision rev of the
// head (and is not reloading), so that its reads show every change
// committed up to rev, as another replica answered it. It returns ctx's
// error when ctx ends first, and the store's failure when the replica can
// no longer follow etcd.
func (s *Store) WaitApplied(ctx context.Context, rev int64) error {
	for {
		if failed := s.failed(); failed != nil {
			return failed
		}
		s.mu.Lock()
		applied, advanced, reloading := s.applied, s.advanced, s.reloading
		s.mu.Unlock()
		if applied >= rev && !reloading {
			return nil
		}
		select {
		case <-advanced:
		case <-ctx.Done():
			return fmt.Errorf("store etcd: waiting for revision %d (at %d): %w", rev, applied, ctx.Err())
		}
	}
}

// Close stops following the log, stops a snapshot round and closes the
// etcd client.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.rounds.Wait()
	if s.watched != nil {
		<-s.watched
	}
	return s.cli.Close()
}

// unavailableError is a failure to reach etcd or to follow its log: the
// change was rolled back and clients may retry (on another replica).
type unavailableError struct{ err error }

// Error returns the message of the failure.
func (e *unavailableError) Error() string { return e.err.Error() }

// Unwrap returns the failure and ipam.ErrUnavailable.
func (e *unavailableError) Unwrap() []error { return []error{e.err, ipam.ErrUnavailable} }

// tooLargeError is a change whose log entry etcd refuses as larger than
// its request limit. Trying again cannot help: it is the caller's request
// that is too large.
type tooLargeError struct {
	bytes, records int
}

// Error says what was refused and what to do.
func (e *tooLargeError) Error() string {
	return fmt.Sprintf("store etcd: a change of %d records (%d bytes compressed) is larger than etcd's request limit: split it (fewer objects per package) or raise etcd's --max-request-bytes: %s",
		e.records, e.bytes, ipam.ErrInvalid)
}

// Unwrap returns ipam.ErrInvalid.
func (e *tooLargeError) Unwrap() error { return ipam.ErrInvalid }
