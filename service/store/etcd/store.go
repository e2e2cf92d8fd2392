package etcd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nephio-project/ipam/service/ipam"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultPrefix is the key prefix used when Options.Prefix is empty.
const DefaultPrefix = "/ipam/"

// DefaultRequestTimeout bounds one etcd request when
// Options.RequestTimeout is zero.
const DefaultRequestTimeout = 5 * time.Second

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
}

// Store keeps the allocator's state in etcd, shared by several replicas;
// see the package documentation. It implements ipam.Committer and
// ipam.Journal.
type Store struct {
	cli     *clientv3.Client
	head    string
	logPfx  string
	timeout time.Duration
	log     *slog.Logger
	ctx     context.Context
	cancel  context.CancelFunc
	watched chan struct{} // closed when the watch loop ends

	// mu serializes commits and guards what follows; a commit holds it
	// during its transaction, so the watch never races a commit's outcome.
	mu       sync.Mutex
	a        *ipam.Allocator
	applied  int64         // mod revision of the head the allocator reflects (0: none)
	seq      uint64        // sequence number of the last applied entry
	advanced chan struct{} // closed and replaced whenever applied grows
	failed   error         // the allocator can no longer follow etcd

	publish ipam.Journal // receives other replicas' entries once applied (nil: none)
}

// staleError is a refused or undecided commit: the allocator must reach
// the head revision target (0: read it first) before trying again.
type staleError struct {
	target int64
	cause  error
}

// Error describes the refusal.
func (e *staleError) Error() string {
	if e.cause != nil {
		return "etcd: commit outcome unknown, catching up: " + e.cause.Error() + ": " + ipam.ErrStale.Error()
	}
	return fmt.Sprintf("etcd: another replica committed first (head at revision %d): %s", e.target, ipam.ErrStale)
}

// GRPCStatus makes a commit still refused after the allocator's retries
// reach clients as Unavailable: retrying later is safe.
func (e *staleError) GRPCStatus() *status.Status { return status.New(codes.Unavailable, e.Error()) }

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
	ctx, cancel := context.WithCancel(context.Background())
	return &Store{cli: cli, head: prefix + "head", logPfx: prefix + "log/", timeout: timeout, log: log,
		ctx: ctx, cancel: cancel, advanced: make(chan struct{})}, nil
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

// Restore loads every log entry into a (a fresh allocator), then follows
// the log with a watch until Close. a must use s as its Committer.
func (s *Store) Restore(a *ipam.Allocator) error {
	ctx, cancel := context.WithTimeout(s.ctx, 4*s.timeout)
	defer cancel()
	resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(s.head), clientv3.OpGet(s.logPfx, clientv3.WithPrefix())).Commit()
	if err != nil {
		return fmt.Errorf("store etcd: reading the log: %w", err)
	}
	var seq uint64
	var recs []ipam.Record
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		batch, err := decode(kv.Value)
		if err != nil {
			return fmt.Errorf("store etcd: %s: %w", kv.Key, err)
		}
		recs = append(recs, batch...)
		if seq, err = s.seqOf(kv.Key); err != nil {
			return fmt.Errorf("store etcd: %s: %w", kv.Key, err)
		}
	}
	if err := a.Apply(recs); err != nil {
		return fmt.Errorf("store etcd: replaying the log: %w", err)
	}
	var applied int64
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		applied = kvs[0].ModRevision
	}
	s.mu.Lock()
	s.a, s.applied, s.seq = a, applied, seq
	s.mu.Unlock()
	s.watched = make(chan struct{})
	go s.watch(resp.Header.Revision + 1)
	s.log.Info("etcd: restored", "entries", len(resp.Responses[1].GetResponseRange().Kvs), "revision", applied)
	return nil
}

// watch applies the log entries of other replicas from revision rev on.
func (s *Store) watch(rev int64) {
	defer close(s.watched)
	for s.ctx.Err() == nil {
		wch := s.cli.Watch(clientv3.WithRequireLeader(s.ctx), s.logPfx, clientv3.WithPrefix(), clientv3.WithRev(rev))
		for wr := range wch {
			if err := wr.Err(); err != nil {
				if wr.CompactRevision != 0 {
					s.fail(fmt.Errorf("store etcd: the log was compacted past revision %d this replica needs: %w", rev, err))
					return
				}
				s.log.Warn("etcd: watch interrupted; resuming", "revision", rev, "err", err)
				break
			}
			for _, ev := range wr.Events {
				if ev.Type != mvccpb.PUT {
					continue
				}
				if err := s.applyEntry(ev.Kv); err != nil {
					s.fail(err)
					return
				}
				rev = ev.Kv.ModRevision + 1
			}
		}
		select {
		case <-s.ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// applyEntry applies one log entry unless the allocator already has it.
func (s *Store) applyEntry(kv *mvccpb.KeyValue) error {
	s.mu.Lock() // waits for a commit in flight, which may be this entry
	a, skip := s.a, kv.ModRevision <= s.applied
	s.mu.Unlock()
	if skip {
		return nil
	}
	seq, err := s.seqOf(kv.Key)
	if err != nil {
		return fmt.Errorf("store etcd: %s: %w", kv.Key, err)
	}
	recs, err := decode(kv.Value)
	if err != nil {
		return fmt.Errorf("store etcd: %s: %w", kv.Key, err)
	}
	// No commit can succeed meanwhile: the head is past s.applied.
	if err := a.Apply(recs); err != nil {
		return fmt.Errorf("store etcd: applying %s: %w", kv.Key, err)
	}
	// Before s.applied moves on, so that no later local change is
	// published first.
	if s.publish != nil {
		if wait := s.publish.Append(recs); wait != nil {
			if err := wait(); err != nil {
				return fmt.Errorf("store etcd: publishing %s: %w", kv.Key, err)
			}
		}
	}
	s.mu.Lock()
	s.applied, s.seq = kv.ModRevision, seq
	close(s.advanced)
	s.advanced = make(chan struct{})
	s.mu.Unlock()
	return nil
}

// fail records that the allocator cannot follow etcd any more.
func (s *Store) fail(err error) {
	s.log.Error("etcd: this replica can no longer follow the log", "err", err)
	s.mu.Lock()
	if s.failed == nil {
		s.failed = err
	}
	close(s.advanced)
	s.advanced = make(chan struct{})
	s.mu.Unlock()
}

// Commit implements ipam.Committer: one transaction puts the records as the
// next log entry if no other replica committed since this one caught up.
func (s *Store) Commit(recs []ipam.Record) error {
	val, err := json.Marshal(recs)
	if err != nil {
		return fmt.Errorf("store etcd: encoding: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return &unavailableError{s.failed}
	}
	next := s.seq + 1
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(s.head), "=", s.applied)).
		Then(clientv3.OpPut(s.head, strconv.FormatUint(next, 10)), clientv3.OpPut(s.logKey(next), string(val))).
		Else(clientv3.OpGet(s.head)).
		Commit()
	if err != nil {
		return &staleError{cause: err}
	}
	if !resp.Succeeded {
		var target int64
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			target = kvs[0].ModRevision
		}
		return &staleError{target: target}
	}
	s.applied, s.seq = resp.Header.Revision, next
	return nil
}

// CatchUp implements ipam.Committer: it waits until the watch has applied
// the head revision that refused a commit (read again when unknown).
func (s *Store) CatchUp(err error) error {
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
		applied, failed, advanced := s.applied, s.failed, s.advanced
		s.mu.Unlock()
		if failed != nil {
			return &unavailableError{failed}
		}
		if applied >= target {
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
	s.mu.Lock()
	failed := s.failed
	s.mu.Unlock()
	if failed != nil {
		return func() error { return failed }
	}
	return nil
}

// Snapshot does nothing yet: compaction of the etcd log is future work.
func (s *Store) Snapshot(*ipam.Allocator) error { return nil }

// Applied returns the etcd revision of the head this replica has applied.
func (s *Store) Applied() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

// Close stops following the log and closes the etcd client.
func (s *Store) Close() error {
	s.cancel()
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

// Unwrap returns the failure.
func (e *unavailableError) Unwrap() error { return e.err }

// GRPCStatus maps the failure to codes.Unavailable.
func (e *unavailableError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.err.Error())
}

func decode(b []byte) ([]ipam.Record, error) {
	var recs []ipam.Record
	if err := json.Unmarshal(b, &recs); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	return recs, nil
}
