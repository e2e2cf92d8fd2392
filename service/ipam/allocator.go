package ipam

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// Allocator is the allocation core. It is safe for concurrent use:
// mutations of one owner are serialized, mutations of one VRF are
// serialized by that VRF's lock, and mutations of different VRFs run in
// parallel. Creating or deleting network instances, Apply and Snapshot
// take the allocator-wide lock.
type Allocator struct {
	mu        sync.RWMutex // exclusive: the VRF set changes or the state is frozen
	vrfs      map[string]*vrf
	journal   Journal
	committer Committer
	settler   SettlingJournal // journal, when it is one
	// durableReads: Settle waits for the settler too, not only for the
	// committer (WithDurableReads).
	durableReads bool
	// resets counts the completed Resets: a read made before one may have
	// seen changes the Reset discarded (ReadSettled reads again).
	resets atomic.Uint64

	ownersMu sync.Mutex
	owners   map[string]*ownerState
}

// ownerState holds the objects of one owner; its mutex serializes that
// owner's mutations.
type ownerState struct {
	mu       sync.Mutex
	name     string
	nis      map[string]*niObj
	prefixes map[nsName]*prefixObj
	ranges   map[nsName]*rangeObj
	tables   []*allocTable // its allocations, one table per VRF
	// spare is its table unlinked last, empty, for tableFor to link again
	// (an owner that allocates and releases one name at a time would
	// otherwise make a table each time); it may be linked again by undo.
	spare *allocTable
	info  OwnerInfo // see SyncRequest.Identity and Source
}

// empty reports whether os holds no object.
func (os *ownerState) empty() bool {
	return len(os.nis) == 0 && len(os.prefixes) == 0 && len(os.ranges) == 0 && os.allocCount() == 0
}

// table returns the allocation table of os in v, or nil.
func (os *ownerState) table(v *vrf) *allocTable {
	for _, t := range os.tables {
		if t.v == v {
			return t
		}
	}
	return nil
}

// link adds t to its owner's and its VRF's tables.
func link(t *allocTable) {
	if t.os.spare == t {
		t.os.spare = nil
	}
	t.os.tables = append(t.os.tables, t)
	t.v.tables[t.os] = t
}

// unlink removes t from its owner's and its VRF's tables.
func unlink(t *allocTable) {
	t.os.tables = slices.DeleteFunc(t.os.tables, func(x *allocTable) bool { return x == t })
	delete(t.v.tables, t.os)
	t.os.spare = t
}

// findAlloc returns the allocation ns/name of os and its table.
func (os *ownerState) findAlloc(ns, name string) (*allocTable, *allocRec) {
	for _, t := range os.tables {
		if r, ok := t.Get(ns, name); ok {
			return t, r
		}
	}
	return nil, nil
}

// allocCount is the number of allocations of os.
func (os *ownerState) allocCount() int {
	n := 0
	for _, t := range os.tables {
		n += t.Len()
	}
	return n
}

// Option configures an Allocator.
type Option func(*Allocator)

// WithJournal sends every committed change to j (the durable store).
func WithJournal(j Journal) Option { return func(a *Allocator) { a.journal = j } }

// WithCommitter makes every mutation commit its records through c while
// its locks are held (a store shared by several replicas, such as etcd);
// see Committer.
func WithCommitter(c Committer) Option { return func(a *Allocator) { a.committer = c } }

// WithDurableReads makes Settle (and so ReadSettled) wait, when the
// journal is a SettlingJournal (the file store's group commit), until
// the changes a read may show are durable, not only committed: a read
// then never shows a change that a failed fsync or a crash would lose,
// at the price of waiting for the fsync in progress under write load. A
// mutation that changed nothing (an idempotent repeat) waits for them
// either way before it answers, since its answer acknowledges them.
func WithDurableReads() Option { return func(a *Allocator) { a.durableReads = true } }

// MaxStaleRetries bounds how many times a mutation refused with ErrStale by
// the Committer is run again after catching up.
const MaxStaleRetries = 16

// New returns an empty allocator.
func New(opts ...Option) *Allocator {
	a := &Allocator{vrfs: make(map[string]*vrf), owners: make(map[string]*ownerState)}
	for _, o := range opts {
		o(a)
	}
	a.settler, _ = a.journal.(SettlingJournal)
	return a
}

func (a *Allocator) owner(name string) *ownerState {
	a.ownersMu.Lock()
	defer a.ownersMu.Unlock()
	os := a.owners[name]
	if os == nil {
		os = &ownerState{name: name, nis: make(map[string]*niObj), prefixes: make(map[nsName]*prefixObj), ranges: make(map[nsName]*rangeObj)}
		a.owners[name] = os
	}
	return os
}

// ownerList returns the owner states sorted by name.
func (a *Allocator) ownerList() []*ownerState {
	a.ownersMu.Lock()
	defer a.ownersMu.Unlock()
	out := make([]*ownerState, 0, len(a.owners))
	for _, k := range slices.Sorted(maps.Keys(a.owners)) {
		out = append(out, a.owners[k])
	}
	return out
}

// vrf returns a VRF the transaction holds the lock of.
func (t *tx) vrf(name string, obj string, key Key, field string) (*vrf, error) {
	v := t.a.vrfs[name]
	if v == nil {
		return nil, errf(ErrNotFound, obj, key, field, "network instance %q not found", name)
	}
	if !t.global && !slices.Contains(t.locked, v) {
		panic("ipam: VRF " + name + " used without its lock")
	}
	return v, nil
}

// mutation says what a mutation needs locked.
type mutation struct {
	owner  string
	global bool // take the allocator-wide lock (VRF set changes)
}

// mutator is what a mutation does.
type mutator interface {
	// vrfs lists the VRFs it may touch (not asked when global).
	vrfs(os *ownerState) []string
	// run makes the change.
	run(t *tx, os *ownerState) error
}

// funcs is a mutator of two functions; vrfsOf may be nil for global
// mutations.
type funcs struct {
	vrfsOf func(os *ownerState) []string
	do     func(t *tx, os *ownerState) error
}

func (f *funcs) vrfs(os *ownerState) []string { return f.vrfsOf(os) }

func (f *funcs) run(t *tx, os *ownerState) error { return f.do(t, os) }

// mutate runs op under the locks m and op ask for, commits its records to the
// committer and the journal or rolls it back, and waits until the records
// are durable. A mutation the committer refuses with ErrStale is rolled
// back and run again, after the committer caught up, at most
// MaxStaleRetries times.
//
// ctx ends the waits, not the change: a mutation whose ctx is done before
// it starts (or before a retry) is not made; one whose ctx ends while its
// records are on their way to the store is made, becomes durable unless
// the store fails, and returns an error wrapping ctx.Err(). Retrying such
// a call is safe: calls are idempotent by key.
func (a *Allocator) mutate(ctx context.Context, m mutation, op mutator) error {
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: nothing was changed", err)
		}
		err := a.mutateOnce(ctx, m, op)
		if a.committer == nil || attempt >= MaxStaleRetries || !errors.Is(err, ErrStale) {
			return err
		}
		if cerr := a.committer.CatchUp(err); cerr != nil {
			return cerr
		}
	}
}

// Settle returns once every change that a read of the allocator made
// before the call may have seen is committed and durable, so that what
// the read answers rests on such changes only. A Committer that queues
// changes (see Committer) leaves them visible before it knows their
// outcome: Settle waits for those queued so far. When one of them
// failed, Settle returns an error wrapping ErrStale once the allocator
// caught up (the change is undone): the read must be made again. A
// SettlingJournal (a log with group commit) leaves them visible before
// they are durable: with WithDurableReads, Settle then waits for those
// appended so far. Another error says the store cannot tell, or failed
// (wrapping ErrUnavailable).
//
// Without a Committer that queues, and without a SettlingJournal or
// WithDurableReads, Settle returns nil at once, as it does when nothing
// is pending.
func (a *Allocator) Settle() error {
	if a.committer != nil {
		wait, err := a.committer.Commit(nil)
		if err == nil && wait != nil {
			err = wait()
		}
		if err != nil && errors.Is(err, ErrStale) {
			if cerr := a.committer.CatchUp(err); cerr != nil {
				return cerr
			}
		}
		if err != nil {
			return err
		}
	}
	if a.durableReads && a.settler != nil {
		if wait := a.settler.Settled(); wait != nil {
			return wait()
		}
	}
	return nil
}

// ReadSettled calls read, which reads the allocator, until Settle
// confirms that what it read is committed (at most MaxStaleRetries+1
// times), and returns Settle's error, if any: then what read returned
// must not be answered. A read during which the state was Reset is made
// again too: it may have seen changes that failed, which the Reset
// discarded before Settle was asked.
func (a *Allocator) ReadSettled(read func()) error {
	for attempt := 0; ; attempt++ {
		resets := a.resets.Load()
		read()
		err := a.Settle()
		if err == nil && a.resets.Load() != resets {
			err = fmt.Errorf("%w: the state was reloaded while it was read", ErrStale)
		}
		if err == nil || !errors.Is(err, ErrStale) || attempt >= MaxStaleRetries {
			return err
		}
	}
}

// awaitDurable calls wait, or returns once ctx is done: wait then goes on
// in the background, so that the journal still completes the batch.
func awaitDurable(ctx context.Context, wait func() error) error {
	if ctx.Done() == nil {
		return wait()
	}
	done := make(chan error, 1)
	go func() { done <- wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w while the change was being made durable: it was made, and is durable unless the store fails", ctx.Err())
	}
}

// bothWaits returns a wait function calling first and then second (either
// may be nil), or nil when both are.
func bothWaits(first, second func() error) func() error {
	switch {
	case first == nil:
		return second
	case second == nil:
		return first
	}
	return func() error {
		if err := first(); err != nil {
			_ = second() // the journal still completes its batch; the first error is the one to report
			return err
		}
		return second()
	}
}

// mutateOnce is one attempt of mutate.
func (a *Allocator) mutateOnce(ctx context.Context, m mutation, op mutator) error {
	os := a.owner(m.owner)
	wait, err := func() (func() error, error) {
		os.mu.Lock()
		defer os.mu.Unlock()
		t := newTx(a, m.global)
		defer t.free()
		t.authz = authorizerOf(ctx)
		if m.global {
			a.mu.Lock()
			defer a.mu.Unlock()
		} else {
			a.mu.RLock()
			defer a.mu.RUnlock()
			names := op.vrfs(os)
			slices.Sort(names)
			names = slices.Compact(names)
			for _, n := range names {
				if v := a.vrfs[n]; v != nil {
					v.mu.Lock()
					t.locked = append(t.locked, v)
				}
			}
			defer func() {
				for _, v := range t.locked {
					v.mu.Unlock()
				}
			}()
		}
		if err := op.run(t, os); err != nil {
			t.rollback()
			return nil, err
		}
		var committed func() error
		if a.committer != nil { // also without records: see Committer
			var err error
			if committed, err = a.committer.Commit(t.recs); err != nil {
				t.rollback()
				return nil, err
			}
		}
		var journaled func() error
		switch {
		case len(t.recs) > 0 && a.journal != nil:
			if pj, ok := a.journal.(PendingJournal); ok && committed != nil {
				// The journal waits for the commit before it publishes.
				journaled, committed = pj.AppendPending(t.recs, committed), nil
			} else {
				journaled = a.journal.Append(t.recs)
			}
		case len(t.recs) == 0 && a.settler != nil:
			// A change that changed nothing (an idempotent repeat) may
			// answer with changes not yet durable: it waits for them.
			journaled = a.settler.Settled()
		}
		return bothWaits(committed, journaled), nil
	}()
	if err != nil || wait == nil {
		return err
	}
	return awaitDurable(ctx, wait)
}

// CreateNetworkInstance creates or updates a network instance.
func (a *Allocator) CreateNetworkInstance(ctx context.Context, ni NetworkInstance) error {
	return a.mutate(ctx, mutation{owner: ni.Key.Owner, global: true}, &funcs{do: func(t *tx, os *ownerState) error {
		return t.putNIOf(os, ni)
	}})
}

// DeleteNetworkInstance deletes a network instance that holds no prefix
// other than its own empty aggregates.
func (a *Allocator) DeleteNetworkInstance(ctx context.Context, key Key) error {
	return a.mutate(ctx, mutation{owner: key.Owner, global: true}, &funcs{do: func(t *tx, os *ownerState) error {
		return t.deleteNIOf(os, key)
	}})
}

// CreatePrefix creates or updates an IPPrefix and returns what it resolved
// to (the prefix as written and its network's gateway).
func (a *Allocator) CreatePrefix(ctx context.Context, p Prefix) (Result, error) {
	var res Result
	err := a.mutate(ctx, mutation{owner: p.Key.Owner}, &funcs{vrfsOf: func(os *ownerState) []string {
		names := []string{p.NetworkInstance}
		if old := os.prefixes[nsn(p.Key)]; old != nil {
			names = append(names, old.v.name)
		}
		return names
	}, do: func(t *tx, os *ownerState) (err error) {
		res, err = t.putPrefix(os, p)
		return err
	}})
	return res, err
}

// DeletePrefix deletes an IPPrefix; a prefix with children or allocated
// addresses is refused with ErrInUse (rule 9).
func (a *Allocator) DeletePrefix(ctx context.Context, key Key) error {
	return a.mutate(ctx, mutation{owner: key.Owner}, &funcs{vrfsOf: func(os *ownerState) []string {
		if old := os.prefixes[nsn(key)]; old != nil {
			return []string{old.v.name}
		}
		return nil
	}, do: func(t *tx, os *ownerState) error {
		return t.deletePrefix(os, key)
	}})
}

// CreateRange creates or replaces an IP range.
func (a *Allocator) CreateRange(ctx context.Context, r IPRange) error {
	return a.mutate(ctx, mutation{owner: r.Key.Owner}, &funcs{vrfsOf: func(os *ownerState) []string {
		names := []string{r.NetworkInstance}
		if old := os.ranges[nsn(r.Key)]; old != nil {
			names = append(names, old.v.name)
		}
		return names
	}, do: func(t *tx, os *ownerState) error {
		return t.putRange(os, r)
	}})
}

// DeleteRange deletes an IP range none of whose addresses is allocated.
func (a *Allocator) DeleteRange(ctx context.Context, key Key) error {
	return a.mutate(ctx, mutation{owner: key.Owner}, &funcs{vrfsOf: func(os *ownerState) []string {
		if old := os.ranges[nsn(key)]; old != nil {
			return []string{old.v.name}
		}
		return nil
	}, do: func(t *tx, os *ownerState) error {
		return t.deleteRange(os, key)
	}})
}

// Allocate allocates an address, a block or a sub-prefix. The same request
// again returns the same result; a changed request re-allocates (rule 8).
func (a *Allocator) Allocate(ctx context.Context, r Allocation) (Result, error) {
	op := &allocateOp{r: r}
	err := a.mutate(ctx, mutation{owner: r.Key.Owner}, op)
	return op.res, err
}

// allocateOp is the mutation of Allocate (one object instead of closures:
// Allocate is the hot call of the controllers).
type allocateOp struct {
	r     Allocation
	res   Result
	names [3]string
}

// vrfs lists the VRFs an allocation request may touch: the one it names
// and the one of its current allocation.
func (o *allocateOp) vrfs(os *ownerState) []string {
	o.names[0], o.names[1] = o.r.NetworkInstance, o.r.Selector[LabelNetworkInstance]
	if t, _ := os.findAlloc(o.r.Key.Namespace, o.r.Key.Name); t != nil {
		o.names[2] = t.v.name
		return o.names[:3]
	}
	return o.names[:2]
}

func (o *allocateOp) run(t *tx, os *ownerState) (err error) {
	o.res, err = t.putAllocation(os, o.r)
	return err
}

// Release releases an allocation (rule 9).
func (a *Allocator) Release(ctx context.Context, key Key) error {
	return a.mutate(ctx, mutation{owner: key.Owner}, &releaseOp{key: key})
}

// releaseOp is the mutation of Release.
type releaseOp struct {
	key   Key
	names [1]string
}

func (o *releaseOp) vrfs(os *ownerState) []string {
	if t, _ := os.findAlloc(o.key.Namespace, o.key.Name); t != nil {
		o.names[0] = t.v.name
		return o.names[:]
	}
	return nil
}

func (o *releaseOp) run(t *tx, os *ownerState) error { return t.deleteAllocation(os, o.key) }
