// Package wal is a durable, append-only log of opaque records with group
// commit and snapshots: the write-ahead log of the file store.
//
// A Log is opened on a data directory, replayed once, and then appended to:
//
//	l, err := wal.Open(dir, wal.Options{})
//	err = l.Replay(loadState, applyRecord) // once, before the first Enqueue
//	p := l.Enqueue(rec1, rec2)             // no I/O: may run under the caller's lock
//	err = p.Wait()                         // nil: rec1 and rec2 are on disk
//	err = l.Snapshot(seq, writeState)      // now and then, to bound the log
//	err = l.Close()
//
// Each Enqueue call is one batch, numbered by a sequence number that starts
// at 1 and grows by one per batch. A single writer goroutine writes every
// batch queued so far with one write and one fsync (group commit; see
// Segments for when it is an fdatasync), so concurrent callers of Wait
// share fsyncs. Woken by a batch, it first lets
// the goroutines that are ready to run go ahead, so that those about to
// enqueue join the group (47 instead of 32 batches per fsync with 64
// writers, and 10-20% more durable allocations per second through
// ipam-server with a connection per client). A batch is atomic: after a crash
// either all of its records are replayed or none. Once a write or fsync
// fails the Log refuses every later batch (it fails closed).
//
// Unsynced tells a reader of the caller's state whether batches are
// enqueued but not yet fsynced, and gives it a Pending for the group commit
// that makes them durable (or for the failure that keeps them from it). It
// compares the last enqueued and the last durable sequence numbers, two
// atomic loads: a reader pays nothing when no batch is pending.
//
// Options.OnFsync and Options.OnCommit report the latency of each fsync or
// fdatasync of a segment and the records and (frame) bytes of each group
// commit, for the caller's metrics; the package itself exports none.
//
// # Files
//
// A data directory holds:
//
//	LOCK                                flock(2)ed while a Log is open; holds the owner's PID
//	ACKED                               the last acknowledged batch (see Acknowledged batches)
//	00000000000000000001.wal            segments, named by the sequence number of their first batch
//	snap-00000000000000000042.snap      snapshots, named by the sequence number of the last batch they include
//	snap-00000000000000000042.snap.tmp  a snapshot being written; removed by Open
//
// Numbers in file names are decimal, zero-padded to 20 digits. Other files
// are ignored.
//
// # Segments
//
// A segment is a sequence of frames, one per batch, in sequence order with
// no gaps. Integers are little-endian:
//
//	frame   = magic:byte(0xA7) length:uint32 crc:uint32 body
//	body    = seq:uint64 count:uint32 count*payload      (length bytes, at most 1 GiB)
//	payload = len:uvarint bytes[len]
//	crc     = CRC-32C (Castagnoli) of body
//
// A new segment is started, after the current one is fsynced, before a batch
// that would take the current one past Options.SegmentBytes; a batch larger
// than that fills a segment on its own. The new file's directory entry is
// fsynced before any batch is written to it.
//
// The active segment is kept zero-filled ahead of the writer, so that a
// group commit does not grow the file: when a group's frames would go past
// the end of the file, the writer first extends it by writing zeros (real
// zero bytes, not fallocate(2): unwritten extents cost a metadata commit
// on their first write) up to the end of the frames rounded up to a
// multiple of 1 MiB, but not past Options.SegmentBytes unless the frames
// are, and then writes the frames at the end of the previous ones. The
// commit that changed the file's size (an extension, the first commit after
// Replay, a roll) syncs with a full fsync; every other commit writes into
// space that is already allocated and written and syncs with fdatasync
// (on Linux; fsync elsewhere), which commits no metadata to the file
// system's journal (measured on ext4 for a small frame: 0.18-0.20 instead
// of 0.22-0.30 ms at the median, 0.32-0.40 instead of 0.53-1.0 ms at the
// 99th percentile). Options.SyncFile replaces both kinds.
//
// A segment's logical end is the end of its last frame when only zero bytes
// follow it (or nothing). Before a roll the writer truncates the finished
// segment to its logical end and then fsyncs it, and Close truncates the
// active one (without an fsync), so only the active segment of a running or
// killed log has a zero-filled tail. Segments without one, as a cleanly
// closed log and every version before the zero-filled tail leave them, are
// read and appended to in the same way: the tail is added by the first
// extension.
//
// # Snapshots
//
// A snapshot holds the caller's whole state after batch seq:
//
//	header  = "WALSNAP" version:byte(1) seq:uint64
//	state   = the bytes written by the callback of Snapshot
//	trailer = len(state):uint64 crc:uint32               (crc: CRC-32C of everything before it)
//
// It is written only once batch seq is durable, to a .tmp file that is
// fsynced, renamed into place, and made durable by an fsync of the
// directory. Only then are older snapshots and the segments holding only
// batches up to seq deleted (compaction); until then the previous snapshot
// and its segments remain a complete alternative.
//
// # Acknowledged batches
//
// ACKED records the highest batch whose Wait returned nil, in two slots
// written in turn, so that a torn write leaves the other one valid:
//
//	slot = magic:"WALACK\x00" version:byte(1) seq:uint64 crc:uint32 pad:uint32   (24 bytes)
//	crc  = CRC-32C of magic, version and seq
//
// The writer updates it after each group commit, once the batches are
// durable and their waiters released, with one write and no fsync (Close
// fsyncs it). It never claims more than the log holds; after a power loss
// it may claim less, which only narrows what Replay can check. A
// directory without the file (written before it existed) is not checked
// and gets one.
//
// # Recovery
//
// Replay uses the newest snapshot whose header, length and checksum are
// valid; an invalid one is logged and the next older one is tried. It then
// replays, in order, every batch after the snapshot's seq. Segments whose
// batches are all covered by the snapshot are not read. The segments must
// continue each other: a segment whose name is not the seq of its first
// batch, a gap between batches, or a log that starts after the snapshot is
// an error wrapping ErrCorrupt.
//
// A segment ends at its logical end: a frame that fails its checks with
// only zero bytes from its offset to the end of the file is the zero-filled
// tail, in any segment (a roll's truncation may have been lost with a
// crash), and Replay leaves it as it is, without a word; the writer
// continues at that offset. Any other frame that fails its checks (short
// header, bad magic, bad length, length past the end of the file, checksum
// mismatch, malformed body) is a torn write when it lies in the last
// segment and no valid frame with a higher sequence number follows it: the
// segment is truncated at the frame's offset (the writer zero-fills it
// again), and one warning is logged with the offset and the reason.
// Anywhere else it is corruption: Replay fails with an error wrapping
// ErrCorrupt that names the file and offset, and leaves the files as they
// are.
//
// A torn write is of a batch that was never acknowledged. When the log
// (after the snapshot) ends before the batch ACKED names — a segment cut
// at a frame boundary or inside an acknowledged frame, a deleted segment,
// deleted snapshots and segments — Replay fails with an error wrapping
// ErrTruncated that names the files, the batch the log ends at and the
// lost range, and leaves the files as they are. With
// Options.RecoverTruncated it logs the lost range at error level, goes on
// from what is left, and resets ACKED, so the next Replay is clean.
package wal
