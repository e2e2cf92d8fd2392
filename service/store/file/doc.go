// Package file is the embedded, crash-safe store of the allocation core: a
// write-ahead log of change records with group commit, compacted now and then
// into a snapshot of the whole state.
//
// # Use
//
//	s, err := file.Open(dir, file.Options{})
//	a := ipam.New(ipam.WithJournal(s))
//	err = s.Restore(a) // always, even for an empty dir: binds a for automatic snapshots
//	... serve a ...
//	err = s.Close()
//
// The Store is the allocator's ipam.Journal. Append, called by the core with
// the mutated VRFs locked, only encodes the records of one committed mutation
// and queues them as one batch (no I/O); the wait function it returns, which
// the core calls after releasing its locks, blocks until that batch is on
// disk. One writer goroutine of the log writes and fsyncs every batch queued
// meanwhile at once, so concurrent mutations share an fsync (group commit).
//
// # What reads see
//
// A mutation is in the allocator from the moment it releases its locks,
// before the fsync of its batch. The Store is also an
// ipam.SettlingJournal: its Settled says whether batches are appended but
// not yet fsynced. A mutation that changed nothing (an idempotent repeat,
// whose answer acknowledges what it finds) waits for that fsync (the
// group commit in progress or the next) before it answers. With
// ipam.WithDurableReads (ipam-server --durable-reads),
// (*ipam.Allocator).ReadSettled, which answers the server's Get, List,
// Tree and web view, waits for it too, so a read answers only with
// durable changes: one whose fsync fails is never shown, and the waiting
// reads fail with an error wrapping ipam.ErrUnavailable, as every change
// does from then on (the log fails closed until the store is opened
// again). With nothing pending Settled costs two atomic loads of the
// log's sequence numbers (wal.Log.Unsynced).
//
// # On disk
//
// The directory is the log's (package service/internal/wal, whose doc has
// the byte layout):
//
//	LOCK                                  flock(2)ed while a Store is open: one process per directory
//	00000000000000000001.wal              log segments: CRC-32C framed batches, one per mutation
//	snap-00000000000000000042.snap        the newest snapshot: the state after batch 42
//
// The active segment of a running (or killed) store ends with zeros ahead
// of its last batch, so that most group commits need only an fdatasync;
// finished segments, and the active one after Close, end with their last
// batch (see the wal package's Segments).
//
// Each batch holds the records of one mutation (one Allocate, one Sync, ...)
// and each of its payloads is one ipam.Record in the binary encoding of
// package record (version byte 1, op, key, then the object's present fields under a
// field mask; strings and lengths as uvarints, addresses as 4 or 16 bytes,
// maps in key order). A snapshot's state, inside the log's checksummed
// snapshot file, is
//
//	"IPAMSNAP" version:byte(1) { uvarint(len) record }* uvarint(0) uvarint(count)
//
// with the records of (*ipam.Allocator).Snapshot, which rebuild the state
// when applied in order to an empty allocator.
//
// # Snapshots
//
// After Options.SnapshotEvery records (default 100,000) the store snapshots
// the allocator in a background goroutine, one at a time; Append never waits
// for it. Mutations pause only while the core copies its state out (the
// allocator-wide lock); the log's sequence number is read at that moment, so
// the snapshot stands for exactly the batches before it. The snapshot is
// encoded and written while mutations go on, fsynced and renamed into place;
// only then does the log delete the segments and snapshots it replaces.
// Snapshot takes one on demand.
//
// # Recovery
//
// Restore loads the newest valid snapshot (an invalid one is logged and the
// previous snapshot, whose segments are still there, is used) and then every
// batch after it, decoding in a streaming fashion and applying in chunks of
// records with (*ipam.Allocator).Apply while the next chunk is decoded.
//
//   - Every acknowledged change survives kill -9 and power loss: the core
//     reports a mutation done only after its batch is fsynced.
//   - A torn tail (the last batch cut short or garbled by a crash while being
//     written) is dropped whole, with a warning naming the file and offset; a
//     batch is atomic, so a Sync is restored entirely or not at all. A change
//     that was dropped was never acknowledged.
//   - Nothing before the tail is ever dropped: damage anywhere else (a bad
//     frame followed by good ones, a gap in the sequence, a record that does
//     not decode or does not apply) fails Restore with an error rather than
//     serve a partial state that could hand out addresses already taken.
//   - Acknowledged changes that disappear after the fact (a log cut at a
//     batch boundary or inside an acknowledged batch, deleted segments or
//     snapshots) fail Restore with an error wrapping wal.ErrTruncated that
//     names the lost batches: the log's ACKED file records the last
//     acknowledged batch. Options.RecoverTruncated (ipam-server
//     --recover-truncated) accepts the loss, logs the lost range and goes on.
package file
