package etcd

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/store/record"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// pointer is the value of PREFIX/snapshot: the one complete snapshot
// readers trust.
type pointer struct {
	// ID names the chunks: PREFIX/snapshots/<ID>/<index>.
	ID string `json:"id"`
	// Seq is the last log entry the snapshot contains.
	Seq uint64 `json:"seq"`
	// Chunks is how many chunks there are; Size is their total length and
	// SHA256 the hex digest of their concatenation.
	Chunks int    `json:"chunks"`
	Size   int    `json:"size"`
	SHA256 string `json:"sha256"`
}

// scanPage bounds the log entries one read returns; chunks are read one
// by one (each may be up to SnapshotChunkBytes).
const scanPage = 1000

// loadAttempts bounds how often load starts again when etcd compacted the
// revision it was reading at.
const loadAttempts = 5

// state is the log's content at one etcd revision.
type state struct {
	recs    []ipam.Record // the snapshot's records, then the entries'
	seq     uint64        // the last entry
	snapSeq uint64        // the snapshot's last entry (0: none)
	entries int           // log entries after the snapshot
	headRev int64         // mod revision of the head (0: empty log)
	rev     int64         // the revision it was read at
}

// load reads the snapshot the pointer names and the log entries after it,
// all at one revision.
func (s *Store) load(ctx context.Context) (*state, error) {
	for attempt := 1; ; attempt++ {
		st, err := s.loadOnce(ctx)
		if err == nil || !errors.Is(err, rpctypes.ErrCompacted) || attempt == loadAttempts {
			return st, err
		}
		s.log.Info("etcd: history compacted while loading; reading again", "err", err)
	}
}

func (s *Store) loadOnce(ctx context.Context) (*state, error) {
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	resp, err := s.cli.Txn(rctx).Then(clientv3.OpGet(s.head), clientv3.OpGet(s.pointer)).Commit()
	cancel()
	if err != nil {
		return nil, fmt.Errorf("reading the head: %w", err)
	}
	st := &state{rev: resp.Header.Revision}
	var headSeq uint64
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		st.headRev = kvs[0].ModRevision
		if headSeq, err = strconv.ParseUint(string(kvs[0].Value), 10, 64); err != nil {
			return nil, fmt.Errorf("%s: %w", s.head, err)
		}
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		var p pointer
		if err := json.Unmarshal(kvs[0].Value, &p); err != nil {
			return nil, fmt.Errorf("%s: %w", s.pointer, err)
		}
		if st.recs, err = s.readSnapshot(ctx, p, st.rev); err != nil {
			return nil, err
		}
		st.snapSeq = p.Seq
	}
	st.seq = st.snapSeq
	err = s.scan(ctx, s.logKey(st.snapSeq+1), clientv3.GetPrefixRangeEnd(s.logPfx), st.rev, scanPage, func(kv *mvccpb.KeyValue) error {
		seq, err := s.seqOf(kv.Key)
		if err != nil {
			return fmt.Errorf("%s: %w", kv.Key, err)
		}
		if seq != st.seq+1 {
			return fmt.Errorf("log entry %d is missing (the next is %d)", st.seq+1, seq)
		}
		batch, err := decode(kv.Value)
		if err != nil {
			return fmt.Errorf("%s: %w", kv.Key, err)
		}
		st.recs = append(st.recs, batch...)
		st.seq = seq
		st.entries++
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the log: %w", err)
	}
	if st.seq != headSeq {
		return nil, fmt.Errorf("the log ends at entry %d but the head is entry %d", st.seq, headSeq)
	}
	return st, nil
}

// scan calls fn for every key in [from, end) at revision rev, reading
// limit keys per request.
func (s *Store) scan(ctx context.Context, from, end string, rev, limit int64, fn func(*mvccpb.KeyValue) error) error {
	for {
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		resp, err := s.cli.Get(rctx, from, clientv3.WithRange(end), clientv3.WithRev(rev), clientv3.WithLimit(limit))
		cancel()
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			if err := fn(kv); err != nil {
				return err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// readSnapshot reads and checks the chunks p names, at revision rev.
func (s *Store) readSnapshot(ctx context.Context, p pointer, rev int64) ([]ipam.Record, error) {
	var data bytes.Buffer
	n := 0
	err := s.scan(ctx, s.snapKey(p.ID), clientv3.GetPrefixRangeEnd(s.snapKey(p.ID)), rev, 1, func(kv *mvccpb.KeyValue) error {
		if string(kv.Key) != s.chunkKey(p.ID, n) {
			return fmt.Errorf("snapshot %s: chunk %d is missing (found %s)", p.ID, n, kv.Key)
		}
		data.Write(kv.Value)
		n++
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %s: %w", p.ID, err)
	}
	sum := sha256.Sum256(data.Bytes())
	if n != p.Chunks || data.Len() != p.Size || hex.EncodeToString(sum[:]) != p.SHA256 {
		return nil, fmt.Errorf("snapshot %s: %d chunks, %d bytes, sha256 %x; the pointer says %d, %d, %s",
			p.ID, n, data.Len(), sum, p.Chunks, p.Size, p.SHA256)
	}
	recs, err := decode(data.Bytes())
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", p.ID, err)
	}
	return recs, nil
}

func (s *Store) snapKey(id string) string         { return s.snapPfx + id + "/" }
func (s *Store) chunkKey(id string, i int) string { return fmt.Sprintf("%s%06d", s.snapKey(id), i) }

// readPointer returns the pointer and its mod revision (0: no snapshot).
func (s *Store) readPointer(ctx context.Context) (pointer, int64, error) {
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Get(rctx, s.pointer)
	if err != nil {
		return pointer{}, 0, fmt.Errorf("reading %s: %w", s.pointer, err)
	}
	if len(resp.Kvs) == 0 {
		return pointer{}, 0, nil
	}
	var p pointer
	if err := json.Unmarshal(resp.Kvs[0].Value, &p); err != nil {
		return pointer{}, 0, fmt.Errorf("%s: %w", s.pointer, err)
	}
	return p, resp.Kvs[0].ModRevision, nil
}

// Snapshot writes a snapshot of a, the allocator the store restored, if
// it holds entries the newest snapshot does not, then truncates the log
// (see the package documentation). It returns nil when another replica's
// snapshot won the round.
func (s *Store) Snapshot(a *ipam.Allocator) error {
	s.mu.Lock()
	restored := s.a
	s.mu.Unlock()
	if a != restored {
		return errors.New("store etcd: Snapshot: not the allocator this store restored")
	}
	return s.snapshot(true)
}

// startSnapshots runs snapshot rounds in the background until no snapshot
// is due; s.mu is held.
func (s *Store) startSnapshots() {
	if !s.snapping.CompareAndSwap(false, true) {
		return
	}
	s.rounds.Add(1)
	go func() {
		defer s.rounds.Done()
		for {
			err := s.snapshot(false)
			if err != nil {
				s.log.Warn("etcd: snapshot round failed", "err", err)
			}
			// Under s.mu, as commits decide whether to start rounds: a
			// commit either sees this loop running or finds it ended.
			s.mu.Lock()
			again := err == nil && s.ctx.Err() == nil && s.due(s.seq, s.snapSeq)
			if !again {
				s.snapping.Store(false)
			}
			s.mu.Unlock()
			if !again {
				return
			}
		}
	}()
}

// due says whether a replica at entry seq should snapshot when the newest
// snapshot is at entry snap: the log crossed a multiple of SnapshotEvery
// since, or grew by SnapshotEvery.
func (s *Store) due(seq, snap uint64) bool {
	every := uint64(s.every)
	return seq/every > snap/every || seq-snap >= every
}

// snapshot is one snapshot round; unless force, only when the newest
// snapshot is at least SnapshotEvery entries behind this replica.
func (s *Store) snapshot(force bool) error {
	prev, prevRev, err := s.readPointer(s.ctx)
	if err != nil {
		return fmt.Errorf("store etcd: snapshot: %w", err)
	}
	s.noteSnapshot(prev.Seq)
	s.mu.Lock()
	a, seq := s.a, s.seq
	s.mu.Unlock()
	if seq <= prev.Seq || (!force && !s.due(seq, prev.Seq)) {
		return nil
	}
	s.applyMu.Lock()
	recs := a.Snapshot(func() {
		// No mutation runs now; pipelined ones still on their way to
		// etcd are in the state, so wait until they are committed, and
		// take nothing while the state holds changes that failed.
		s.qmu.Lock()
		for s.pending > 0 && !s.dirty {
			s.drained.Wait()
		}
		dirty := s.dirty
		s.qmu.Unlock()
		if dirty {
			seq = 0
			return
		}
		s.mu.Lock()
		seq = s.seq
		s.mu.Unlock()
	})
	s.applyMu.Unlock()
	if seq <= prev.Seq {
		return nil
	}
	z, err := compress(encodeRecords(recs))
	if err != nil {
		return fmt.Errorf("store etcd: snapshot: compressing: %w", err)
	}
	data := bytes.NewBuffer(z)
	sum := sha256.Sum256(data.Bytes())
	p := pointer{ID: fmt.Sprintf("%020d-%s", seq, rand.Text()[:16]), Seq: seq, Size: data.Len(), SHA256: hex.EncodeToString(sum[:])}
	// The chunks first: readers ignore them until the pointer names them.
	for b := data.Bytes(); len(b) > 0; p.Chunks++ {
		n := min(len(b), s.chunkBytes)
		ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
		_, err := s.cli.Put(ctx, s.chunkKey(p.ID, p.Chunks), string(b[:n]))
		cancel()
		if err != nil {
			return fmt.Errorf("store etcd: snapshot %s: writing chunk %d: %w", p.ID, p.Chunks, err)
		}
		b = b[n:]
	}
	val, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("store etcd: snapshot: %w", err)
	}
	// One transaction, only if no other snapshot won meanwhile: the pointer
	// names the new snapshot, the entries it contains and the previous
	// snapshot's chunks go.
	ops := []clientv3.Op{clientv3.OpPut(s.pointer, string(val)), clientv3.OpDelete(s.logKey(0), clientv3.WithRange(s.logKey(seq+1)))}
	if prev.ID != "" {
		ops = append(ops, clientv3.OpDelete(s.snapKey(prev.ID), clientv3.WithPrefix()))
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(s.pointer), "=", prevRev)).Then(ops...).Commit()
	cancel()
	if err != nil {
		// The outcome is unknown: the chunks may be the snapshot now. A
		// later round deletes them if not.
		return fmt.Errorf("store etcd: snapshot %s: %w", p.ID, err)
	}
	if !resp.Succeeded {
		s.log.Info("etcd: another replica's snapshot won the round", "snapshot", p.ID)
		return s.deleteSnapshot(p.ID)
	}
	s.noteSnapshot(seq)
	s.log.Info("etcd: snapshot written; log truncated", "snapshot", p.ID, "entry", seq, "records", len(recs),
		"bytes", p.Size, "chunks", p.Chunks, "revision", resp.Header.Revision)
	if err := s.deleteOrphans(p); err != nil {
		return err
	}
	if s.every > 0 && prevRev > 0 {
		// etcd's history before the previous snapshot is needed by no
		// restore, and only by a watch more than a snapshot interval behind
		// (which then reloads).
		ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
		_, err := s.cli.Compact(ctx, prevRev)
		cancel()
		if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
			return fmt.Errorf("store etcd: compacting etcd's history to revision %d: %w", prevRev, err)
		}
	}
	return nil
}

// deleteSnapshot deletes the chunks of snapshot id.
func (s *Store) deleteSnapshot(id string) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	if _, err := s.cli.Delete(ctx, s.snapKey(id), clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("store etcd: deleting snapshot %s: %w", id, err)
	}
	return nil
}

// deleteOrphans deletes the chunks of snapshots no pointer will ever name
// after p: those of rounds that lost or died, up to p's entry. A round
// still writing a newer snapshot is left alone.
func (s *Store) deleteOrphans(p pointer) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	resp, err := s.cli.Get(ctx, s.snapPfx, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	cancel()
	if err != nil {
		return fmt.Errorf("store etcd: listing snapshots: %w", err)
	}
	done := map[string]bool{p.ID: true}
	for _, kv := range resp.Kvs {
		id, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), s.snapPfx), "/")
		if done[id] {
			continue
		}
		done[id] = true
		seqPart, _, _ := strings.Cut(id, "-")
		if seq, err := strconv.ParseUint(seqPart, 10, 64); err != nil || seq > p.Seq {
			continue
		}
		s.log.Info("etcd: deleting an abandoned snapshot", "snapshot", id)
		if err := s.deleteSnapshot(id); err != nil {
			return err
		}
	}
	return nil
}

// noteSnapshot records that a snapshot up to entry seq exists.
func (s *Store) noteSnapshot(seq uint64) {
	s.mu.Lock()
	s.snapSeq = max(s.snapSeq, seq)
	s.mu.Unlock()
}

// changes returns the records that turn the state of snapshot before into
// that of snapshot after: deletions of the objects that are gone
// (children first), then puts of those that are new or changed (parents
// first).
func changes(before, after []ipam.Record) ([]ipam.Record, error) {
	type id struct {
		op  ipam.Op
		key ipam.Key
	}
	old := make(map[id][]byte, len(before))
	for _, r := range before {
		old[id{r.Op, r.Key}] = record.Append(nil, &r)
	}
	var puts []ipam.Record
	kept := make(map[id]bool, len(after))
	for _, r := range after {
		b := record.Append(nil, &r)
		k := id{r.Op, r.Key}
		kept[k] = true
		if prev, ok := old[k]; !ok || !bytes.Equal(prev, b) {
			puts = append(puts, r)
		}
	}
	var out []ipam.Record
	for i := len(before) - 1; i >= 0; i-- {
		if r := before[i]; !kept[id{r.Op, r.Key}] {
			out = append(out, ipam.Record{Op: deleteOf(r.Op), Key: r.Key})
		}
	}
	return append(out, puts...), nil
}

// deleteOf returns the delete operation of a put operation's kind.
func deleteOf(op ipam.Op) ipam.Op {
	switch op {
	case ipam.OpPutNetworkInstance:
		return ipam.OpDeleteNetworkInstance
	case ipam.OpPutPrefix:
		return ipam.OpDeletePrefix
	case ipam.OpPutRange:
		return ipam.OpDeleteRange
	case ipam.OpPutOwner:
		return ipam.OpDeleteOwner
	}
	return ipam.OpDeleteAllocation
}
