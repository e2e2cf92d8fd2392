package servertest

import (
	"context"
	"sync/atomic"

	"github.com/nephio-project/ipam/service/ipam"
)

// UndoingCommitter is an ipam.Committer for tests of reads that must not
// answer with uncommitted changes. It commits every change at once, but
// the first barrier a read settles on (Commit without records) fails,
// as a write lead's does when a change queued before it fails; its
// CatchUp then deletes network instance Undone of owner Owner, as the
// write lead's reload undoes that change. Set A to the allocator before
// use.
type UndoingCommitter struct {
	A      *ipam.Allocator
	Owner  string
	Undone string
	// Barriers counts the barriers asked for.
	Barriers atomic.Int64
}

// Commit commits recs at once; the first barrier fails with ipam.ErrStale.
func (c *UndoingCommitter) Commit(recs []ipam.Record) (func() error, error) {
	if len(recs) > 0 || c.Barriers.Add(1) > 1 {
		return nil, nil
	}
	return func() error { return ipam.ErrStale }, nil
}

// CatchUp undoes the change: it deletes network instance Undone.
func (c *UndoingCommitter) CatchUp(error) error {
	return c.A.DeleteNetworkInstance(context.Background(), ipam.Key{Owner: c.Owner, Name: c.Undone})
}
