package ipam

import "fmt"

// Reset replaces the whole state with the one recs describe (as Apply
// would build it into an empty allocator), keeping the journal and the
// committer. It journals nothing. On error the state is unchanged. A
// store uses it to reload a replica that can no longer follow its log.
func (a *Allocator) Reset(recs []Record) error {
	fresh := New()
	if err := fresh.Apply(recs); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	// Lock every owner, then the allocator (a mutation's order), and make
	// sure no owner appeared meanwhile: a mutation may hold an owner's
	// state it looked up before the reset, so existing owner states are
	// kept and given the new objects rather than replaced.
	var locked []*ownerState
	for {
		locked = a.ownerList()
		for _, os := range locked {
			os.mu.Lock()
		}
		a.mu.Lock()
		a.ownersMu.Lock()
		if len(a.owners) == len(locked) { // owners are never removed
			break
		}
		a.ownersMu.Unlock()
		a.mu.Unlock()
		for _, os := range locked {
			os.mu.Unlock()
		}
	}
	defer func() {
		a.ownersMu.Unlock()
		a.mu.Unlock()
		for _, os := range locked {
			os.mu.Unlock()
		}
	}()
	for name, os := range a.owners {
		src := fresh.owners[name]
		if src == nil {
			src = fresh.owner(name) // empty
		}
		os.nis, os.prefixes, os.ranges, os.tables, os.info = src.nis, src.prefixes, src.ranges, src.tables, src.info
		os.spare = nil
		for _, tb := range os.tables {
			delete(tb.v.tables, src)
			tb.os, tb.v.tables[os] = os, tb
		}
	}
	for name, os := range fresh.owners {
		if a.owners[name] == nil {
			a.owners[name] = os
		}
	}
	a.vrfs = fresh.vrfs
	a.resets.Add(1) // under the locks: a read that saw the old state is made again
	return nil
}
