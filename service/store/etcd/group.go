package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nephio-project/ipam/service/ipam"
)

// Group commit: the changes of one replica waiting to commit at the same
// moment go to etcd in ONE transaction, as the file store puts the records
// waiting at the same moment under one fsync: one log entry that joins
// the entries of the changes (entry.go), which other replicas apply in
// turn. The transaction compares the head once; each change keeps its own
// result (all of them are committed or none), and its idempotence. One
// goroutine commits: while a transaction is in flight the changes queue,
// and the next transaction takes every change queued meanwhile (up to
// MaxBatchBytes).

// MaxBatchBytes bounds the log entries of one group transaction: below
// etcd's default request limit (1.5 MiB), with room for the keys. A
// larger entry goes alone (and is refused if etcd refuses it).
const MaxBatchBytes = 1 << 20

// CommitStats counts the group transactions a replica committed: how
// many, the changes they carried and the time they took (from sending the
// transaction to etcd's answer). Changes per transaction and seconds per
// transaction are what group commit is about.
type CommitStats struct {
	Transactions uint64
	Changes      uint64
	Time         time.Duration
}

// CommitStats returns what this replica committed since it opened.
func (s *Store) CommitStats() CommitStats {
	return CommitStats{Transactions: s.txns.Load(), Changes: s.txnChanges.Load(), Time: time.Duration(s.txnTime.Load())}
}

// commitReq is one change waiting to commit: its encoded entry, whether
// its mutation already released its locks (piped), the epoch it was
// queued in and where its outcome goes.
type commitReq struct {
	val     []byte
	records int
	piped   bool
	epoch   uint64
	done    chan error
}

// Commit implements ipam.Committer: the records become the next log entry
// in a transaction that succeeds only if no other replica committed since
// this one caught up; concurrent commits of this replica share it.
//
// A replica that holds the write lead (lead.go) pipelines: Commit only
// queues the entry and returns a wait function, so the mutation's locks
// are released while its transaction is in flight and the next mutations
// of the same network instance join the next transaction. When such a
// transaction fails, the allocator holds changes etcd does not: the
// replica refuses commits, reloads its state from etcd, and the waiting
// mutations get ErrStale and run again once that is done (CatchUp).
//
// A mutation that changed nothing (no records) commits nothing, but on a
// replica that pipelines its answer may rest on changes still queued or
// in flight: it waits for them as a barrier in the queue, and runs again
// if they fail.
func (s *Store) Commit(recs []ipam.Record) (func() error, error) {
	r := &commitReq{records: len(recs), done: make(chan error, 1)}
	if len(recs) == 0 {
		r.piped = true
	} else {
		val, err := encode(recs)
		if err != nil {
			return nil, fmt.Errorf("store etcd: encoding: %w", err)
		}
		r.val, r.piped = val, s.lead.Load() && len(val) <= MaxBatchBytes && s.uncontended()
	}
	s.qmu.Lock()
	if len(recs) == 0 && s.pending == 0 && (!s.dirty || !s.spoiled) {
		// Nothing it could rest on: no change waits, and the allocator
		// holds none that failed (a reload without failed changes
		// leaves the committed state until it ends).
		s.qmu.Unlock()
		return nil, nil
	}
	if s.dirty {
		s.qmu.Unlock()
		return nil, &staleError{reloading: true}
	}
	if s.stopped {
		s.qmu.Unlock()
		return nil, &unavailableError{errors.New("store etcd: closed")}
	}
	r.epoch = s.epoch
	if r.piped {
		s.pending++
	}
	s.queue = append(s.queue, r)
	s.qmu.Unlock()
	s.committing.Do(func() {
		s.wake = make(chan struct{}, 1)
		go s.commitLoop()
	})
	select {
	case s.wake <- struct{}{}:
	default:
	}
	if r.piped {
		return func() error { return <-r.done }, nil
	}
	return nil, <-r.done
}

// PipelineQuiet is how long a leader commits without pipelining after
// it took the lead or applied an entry of another replica: a change of
// another replica that commits while the leader has pipelined changes in
// flight makes the leader reload its whole state, whereas a change that
// did not pipeline merely runs again. Other replicas commit by
// themselves while they do not know the leader (after a failover, the
// changes they were making when they learned of it) or cannot reach it.
const PipelineQuiet = 250 * time.Millisecond

// uncontended reports whether no other replica committed, and this one
// did not take the lead, within PipelineQuiet.
func (s *Store) uncontended() bool {
	return time.Since(time.Unix(0, s.contended.Load())) >= PipelineQuiet
}

// commitLoop commits the queued changes, a transaction at a time, until
// the store closes; then it refuses what is still queued.
func (s *Store) commitLoop() {
	for {
		select {
		case <-s.wake:
		case <-s.ctx.Done():
		}
		for s.commitQueued() {
		}
		if s.ctx.Err() != nil {
			s.qmu.Lock()
			s.stopped = true
			s.qmu.Unlock()
			for s.commitQueued() {
			}
			return
		}
	}
}

// spoil records that the allocator holds changes etcd refused or may not
// have (a pipelined transaction failed): commits are refused, queued ones
// included, until the reload it asks for ends.
//
// While the allocator is spoiled no change enters the queue, so a change
// refused meanwhile was made before the reload's reset, which removes it:
// nothing more to do.
func (s *Store) spoil() {
	s.qmu.Lock()
	s.spoiled = true
	if s.dirty {
		s.qmu.Unlock()
		return
	}
	s.dirty = true
	s.epoch++
	s.drained.Broadcast()
	s.qmu.Unlock()
	s.reloading = true // s.mu is held
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// holdCommits makes Commit refuse changes, and the commit loop the
// changes already queued, until the reload that calls it ends: the
// allocator's state is about to be replaced, and no change decided before
// or during that can commit (its transaction would compare the head with
// the revision the replica had before the reload).
func (s *Store) holdCommits() {
	s.qmu.Lock()
	if !s.dirty {
		s.dirty = true
		s.epoch++
		s.drained.Broadcast()
	}
	s.qmu.Unlock()
}

// commitQueued commits the queued changes (up to MaxBatchBytes) in one
// transaction and hands each its outcome; false when none was queued.
func (s *Store) commitQueued() bool {
	s.qmu.Lock()
	n, size := 0, 0
	for n < len(s.queue) && (n == 0 || size+len(s.queue[n].val) <= MaxBatchBytes) {
		size += len(s.queue[n].val)
		n++
	}
	batch := append([]*commitReq(nil), s.queue[:n]...)
	s.queue = append(s.queue[:0], s.queue[n:]...)
	s.qmu.Unlock()
	if n == 0 {
		return false
	}

	errs := s.commitBatch(batch)
	piped := 0
	for i, r := range batch {
		r.done <- errs[i]
		if r.piped {
			piped++
		}
	}
	s.qmu.Lock()
	if s.pending -= piped; s.pending == 0 {
		s.drained.Broadcast()
	}
	s.qmu.Unlock()
	return true
}

// commitBatch writes the entries of batch after the last one this replica
// applied, in one transaction guarded by the head, and returns the outcome
// of each: all the same, but when etcd refuses the transaction as too
// large, which the entries then learn one by one. Pipelined entries
// queued before the allocator was last spoiled are refused; a failed
// transaction with pipelined entries spoils it.
func (s *Store) commitBatch(batch []*commitReq) (errs []error) {
	same := func(err error) []error {
		errs := make([]error, len(batch))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Refused pipelined changes (for any reason) stay in the allocator.
	defer func() {
		failed := slices.ContainsFunc(errs, func(err error) bool { return err != nil })
		if failed && slices.ContainsFunc(batch, func(r *commitReq) bool { return r.piped }) {
			s.spoil()
			for i, err := range errs {
				if se := (*staleError)(nil); errors.As(err, &se) {
					errs[i] = &staleError{reloading: true}
				}
			}
		}
	}()
	if failed := s.failed(); failed != nil {
		return same(&unavailableError{failed})
	}
	s.qmu.Lock()
	epoch := s.epoch
	s.qmu.Unlock()
	if s.reloading || slices.ContainsFunc(batch, func(r *commitReq) bool { return r.epoch != epoch }) {
		return same(&staleError{reloading: true})
	}
	var vals [][]byte // barriers have none
	for _, r := range batch {
		if r.records > 0 {
			vals = append(vals, r.val)
		}
	}
	if len(vals) == 0 { // barriers only: what they waited for is committed
		return same(nil)
	}
	// One log key for the whole group: etcd's work, and the events every
	// replica's watch receives, go by keys.
	val := vals[0]
	if len(vals) > 1 {
		val = join(vals)
	}
	next := s.seq + 1
	ops := []clientv3.Op{clientv3.OpPut(s.head, strconv.FormatUint(next, 10)), clientv3.OpPut(s.logKey(next), string(val))}
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	start := time.Now()
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(s.head), "=", s.applied)).
		Then(ops...).
		Else(clientv3.OpGet(s.head)).
		Commit()
	if errors.Is(err, rpctypes.ErrRequestTooLarge) {
		if len(batch) == 1 {
			return same(&tooLargeError{bytes: len(batch[0].val), records: batch[0].records})
		}
		// etcd's limit is below MaxBatchBytes: one by one.
		errs := make([]error, len(batch))
		s.mu.Unlock()
		for i, r := range batch {
			errs[i] = s.commitBatch([]*commitReq{r})[0]
		}
		s.mu.Lock()
		return errs
	}
	if err != nil {
		return same(&staleError{cause: err})
	}
	if !resp.Succeeded {
		var target int64
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			target = kvs[0].ModRevision
		}
		return same(&staleError{target: target})
	}
	s.applied, s.seq = resp.Header.Revision, next
	s.txns.Add(1)
	s.txnChanges.Add(uint64(len(vals)))
	s.txnTime.Add(int64(time.Since(start)))
	if every := uint64(s.every); s.every > 0 && !s.closed && (next%every == 0 || next-s.snapSeq >= 2*every) {
		s.startSnapshots()
	}
	return same(nil)
}
