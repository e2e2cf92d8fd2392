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
//     (the next sequence number) and a log entry (the records) under
//     PREFIX/log/<sequence>. A Sync batch is one entry, so it is atomic.
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
//     etcd or follow its log, answers gRPC Unavailable: retry elsewhere.
//
// So every committed entry was decided on the state of all entries before
// it: two replicas never hand out the same address or overlapping
// prefixes. No lease and no leader election is used: the compare on the
// head is the only arbiter, and a killed replica holds nothing others wait
// for. Writes are serialized through the one head key (one transaction in
// flight per replica); per-VRF heads would let VRFs commit in parallel.
//
// Not done yet: compaction (a snapshot key and deleting old log entries; the
// log grows by one key per mutation and etcd's own revision history must
// not be compacted below the oldest replica's watch).
package etcd
