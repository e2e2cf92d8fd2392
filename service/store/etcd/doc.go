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
//     same moment share that transaction, up to MaxBatchBytes, as ONE log
//     entry that joins the entries of the changes (entry.go), which the
//     other replicas apply in turn: etcd's work and the watch events go
//     by keys. The transaction succeeds or fails for all: a refused one
//     rolls each mutation back and each retries as below.
//   - The write lead (lead.go): replicas that can forward (plaintext
//     gRPC, or mTLS with the replicas named in the policy) elect one of
//     them through an etcd election (a lease of LeaseTTL seconds
//     under PREFIX/lead/, the value its --advertise-addr; a replica
//     that sees the leader's process gone revokes its lease: Depose)
//     and forward the changes their callers ask for to it (the server's
//     forwarder); reads
//     stay where they arrive. The leader pipelines: Commit only queues the
//     entry, the mutation releases its locks and waits for the
//     transaction afterwards, so the next changes of the same network
//     instance join the next transaction instead of waiting one round
//     trip each. A leader's transaction that fails (another replica
//     committed first: no leader yet, an unreachable one, replicas that
//     do not forward; or an outcome unknown) leaves changes in the
//     allocator that etcd does not have, and later queued ones that were
//     decided on them: the replica refuses commits, fails everything
//     queued, reloads its state (below) and the waiting mutations run
//     again. An entry of another replica applied while the leader has
//     changes queued does the same. A mutation that changed nothing (an
//     idempotent repeat) waits for the changes queued before it, so no
//     answer rests on a change that is then undone; a snapshot waits for
//     them too. The lead is only a matter of speed: every transaction
//     still compares the head.
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
//   - A replica that does not lead and loses the race while another one
//     holds the write lead (it could not reach the leader, or learned of
//     it after the change began) does not retry: CatchUp answers
//     Unavailable, and the client's retry is forwarded. The leader does
//     not pipeline for PipelineQuiet after it took the lead or applied
//     another replica's entry: such entries then make its changes run
//     again instead of making it reload.
//   - A commit still stale after the retries, or a replica that cannot reach
//     etcd or is reloading for longer than the catch-up allows, answers
//     gRPC Unavailable: retry elsewhere.
//
// So every committed entry was decided on the state of all entries before
// it: two replicas never hand out the same address or overlapping
// prefixes. The compare on the head is the only arbiter; the lease only
// decides who should write, and a killed leader holds nothing others wait
// for (they commit by themselves until one of them leads). Writes are
// serialized through the one head key, one transaction in flight, which
// carries every change queued meanwhile. The leader's allocator holds
// changes on their way to etcd, so reads settle (ipam.Allocator.Settle:
// Commit without records queues a barrier behind the changes queued so
// far and waits for it; a failed one makes the read wait for the reload
// and read again), and the server's hub publishes a pipelined change to
// Watch streams only once its transaction succeeded
// (ipam.PendingJournal). A reload holds commits from its start until the
// revision it loaded is the applied one: a change admitted earlier would
// compare the head with the revision from before, fail and, pipelined,
// spoil the allocator again, a reload after each reload.
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
// Not done: reads served by a replica that is reloading without failed
// changes show its old (committed) state until the reload ends; a
// snapshot is built in memory (its encoding and gzip buffers) before it
// is written.
package etcd
