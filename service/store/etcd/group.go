package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nephio-project/ipam/service/ipam"
)

// Group commit: the changes of one replica waiting to commit at the same
// moment (mutations of different network instances and owners, which
// hold disjoint locks) go to etcd in ONE transaction, as the file store
// puts the records waiting at the same moment under one fsync. Each
// change stays its own log entry, so it keeps its own all-or-nothing
// result and other replicas apply it as before; the transaction compares
// the head once and advances it past all of them. One change waits for
// the transaction in flight, then the next one takes every change queued
// meanwhile (up to MaxBatchBytes).

// MaxBatchBytes bounds the log entries of one group transaction: below
// etcd's default request limit (1.5 MiB), with room for the keys. A
// larger entry goes alone (and is refused if etcd refuses it).
const MaxBatchBytes = 1 << 20

// commitReq is one change waiting to commit: its encoded entry and where
// its outcome goes (errLead: it is now its turn to lead).
type commitReq struct {
	val     []byte
	records int
	done    chan error
}

// errLead tells a queued change that it leads the next transaction.
var errLead = errors.New("lead the next group commit")

// Commit implements ipam.Committer: the records become the next log entry
// in a transaction that succeeds only if no other replica committed since
// this one caught up; concurrent commits of this replica share it.
func (s *Store) Commit(recs []ipam.Record) error {
	val, err := encode(recs)
	if err != nil {
		return fmt.Errorf("store etcd: encoding: %w", err)
	}
	r := &commitReq{val: val, records: len(recs), done: make(chan error, 1)}
	s.qmu.Lock()
	s.queue = append(s.queue, r)
	lead := !s.leading
	s.leading = true
	s.qmu.Unlock()
	for {
		if lead {
			s.leadBatch()
		}
		if err := <-r.done; err != errLead { //nolint:errorlint // a sentinel sent as is
			return err
		}
		lead = true
	}
}

// leadBatch commits the queued changes (at least one, up to MaxBatchBytes)
// in one transaction, hands each its outcome, and passes the lead to the
// next queued change, if any.
func (s *Store) leadBatch() {
	s.qmu.Lock()
	n, size := 0, 0
	for n < len(s.queue) && (n == 0 || size+len(s.queue[n].val) <= MaxBatchBytes) {
		size += len(s.queue[n].val)
		n++
	}
	batch := append([]*commitReq(nil), s.queue[:n]...)
	s.queue = append(s.queue[:0], s.queue[n:]...)
	s.qmu.Unlock()

	errs := s.commitBatch(batch)
	for i, r := range batch {
		r.done <- errs[i]
	}

	s.qmu.Lock()
	if len(s.queue) > 0 {
		s.queue[0].done <- errLead
	} else {
		s.leading = false
	}
	s.qmu.Unlock()
}

// commitBatch writes the entries of batch after the last one this replica
// applied, in one transaction guarded by the head, and returns the outcome
// of each: all the same, but when etcd refuses the transaction as too
// large, which the entries then learn one by one.
func (s *Store) commitBatch(batch []*commitReq) []error {
	same := func(err error) []error {
		errs := make([]error, len(batch))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return same(&unavailableError{s.failed})
	}
	if s.reloading {
		return same(&staleError{reloading: true})
	}
	first, last := s.seq+1, s.seq+uint64(len(batch))
	ops := make([]clientv3.Op, 0, len(batch)+1)
	ops = append(ops, clientv3.OpPut(s.head, strconv.FormatUint(last, 10)))
	for i, r := range batch {
		ops = append(ops, clientv3.OpPut(s.logKey(first+uint64(i)), string(r.val)))
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
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
	s.applied, s.seq = resp.Header.Revision, last
	if every := uint64(s.every); s.every > 0 && !s.closed && (last/every != (first-1)/every || last-s.snapSeq >= 2*every) {
		s.startSnapshots()
	}
	return same(nil)
}
