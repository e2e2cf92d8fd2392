// Package etcd is the store for several ipam-server replicas sharing one
// etcd cluster.
//
// Every replica holds the whole state in its own ipam.Allocator. The store
// is both the allocator's ipam.Committer and its ipam.Journal:
//
//   - A mutation runs in the local allocator, which decides the result;
//     then, still under the mutation's VRF locks, Commit writes its records
//     in ONE etcd transaction that compares the mod revision of the head
//     key with the revision this replica has applied, and puts the head
//     (the next sequence number) and a log entry (the records in package
//     record's versioned binary encoding, framed as entry.go describes,
//     gzipped past 1 KiB) under PREFIX/log/<sequence>. A Sync batch is one
//     entry, so it is atomic; an entry over etcd's request limit is refused
//     with InvalidArgument, not retried.
//   - Group commit (group.go): the commits of one replica waiting at the
//     same moment (mutations of different network instances and owners,
//     whose locks are disjoint) share that transaction, each its own log
//     entry, up to MaxBatchBytes; the head moves past all of them at
//     once. The transaction succeeds or fails for all: a refused one rolls
//     each mutation back and each retries as below. Other replicas apply
//     the entries of one revision one by one and count the revision as
//     applied after its last entry.
//   - If the head moved (another replica committed first), the transaction
//     puts nothing and the allocator rolls the mutation back (ipam.ErrStale);
//     CatchUp waits until the watch has applied the head's revision, and the
//     allocator runs the mutation again, at most ipam.MaxStaleRetries times.
//   - A transaction whose outcome is unknown (a timeout, a member lost
//     mid-call) is also rolled back and treated as stale: CatchUp reads the
//     head linearizably and waits for it, so an entry that did commit comes
//     back through the watch and the retry finds its result (the same
//     request again returns the same result).
//   - A watch on PREFIX/log/ applies other replicas' entries, in revision
//     order, with ipam.Allocator.Apply, and passes them to the journal given
//     to Publish (the server's watch hub); entries at or below the applied
//     revision (this replica's own) are skipped.
//   - A commit still stale after the retries, or a replica that cannot reach
//     etcd or is reloading for longer than the catch-up allows, answers
//     gRPC Unavailable: retry elsewhere.
//
// So every committed entry was decided on the state of all entries before
// it: two replicas never hand out the same address or overlapping
// prefixes. No lease and no leader election is used: the compare on the
// head is the only arbiter, and a killed replica holds nothing others wait
// for. Writes are serialized through the one head key (one transaction in
// flight per replica, carrying every commit waiting meanwhile); per-VRF
// heads would let replicas writing to different VRFs commit in parallel.
//
// # Snapshots and log truncation
//
// Keys under PREFIX: head (the last entry's sequence number), log/<seq>
// (the entries after the snapshot), snapshot (the pointer: JSON {id, seq,
// chunks, size, sha256}) and snapshots/<id>/<index> (the chunks of a
// gzipped entry of the records ipam.Allocator.Snapshot returns; stores
// written by earlier versions hold JSON arrays there and in the log, which
// are still read).
//
//   - A replica whose commit makes the log reach a multiple of
//     Options.SnapshotEvery entries (or 2×SnapshotEvery entries past the
//     newest snapshot, should that replica have died) snapshots in the
//     background: it reads the pointer, captures its allocator together
//     with the sequence number it reflects, writes the chunks (each at
//     most Options.SnapshotChunkBytes, below etcd's request limit) under
//     a fresh id, then ONE transaction, guarded by the pointer's mod
//     revision, puts the new pointer, deletes the log entries up to the
//     snapshot's sequence number and the previous snapshot's chunks.
//     Readers only trust the snapshot the pointer names, so chunks
//     without a flip (a round that lost the compare or died) are ignored;
//     a loser deletes its own chunks, and the winner deletes abandoned
//     ones older than its snapshot.
//   - The winner then compacts etcd's revision history up to the previous
//     snapshot's pointer revision: no restore needs it, and only a watch
//     more than a snapshot interval behind is cut (and reloads, below).
//     Deleted keys free space in etcd once compacted; the file shrinks
//     only after etcdctl defrag.
//   - Restore reads, at one etcd revision, the pointer, its chunks (their
//     count, size and sha256 are checked) and the log entries after it,
//     which must follow each other up to the head.
//   - A replica that falls behind (its watch gets ErrCompacted, an entry
//     is missing or does not apply) reloads by itself: its commits wait,
//     it loads as Restore does and replaces its allocator's state with
//     ipam.Allocator.Reset; the journal given to Publish receives the
//     difference (deletes of the objects that are gone, puts of those new
//     or changed), then the watch resumes after the loaded revision.
//
// Not done: reads served by a replica that is reloading show its old
// state until the reload ends; a snapshot is built in memory (its encoding
// and gzip buffers) before it is written.
package etcd
