// Package waltest holds the fault injection that tests of the write-ahead
// log, and of the stores written on it, share.
package waltest

import (
	"os"
	"sync/atomic"
)

// HeldSync is a wal.Options.SyncFile (and file.Options.SyncFile) that
// holds fsyncs: while Holding is set, each fsync of a segment signals
// Entered and then waits for its outcome on Release (nil: the fsync is
// made); HoldNext, once set, holds the next fsync only. After Stop it
// holds nothing, so that a test that failed can close the log.
type HeldSync struct {
	Holding  atomic.Bool
	HoldNext atomic.Bool
	Entered  chan struct{}
	Release  chan error
	done     chan struct{}
}

// NewHeldSync returns a HeldSync that holds nothing yet.
func NewHeldSync() *HeldSync {
	return &HeldSync{Entered: make(chan struct{}, 1), Release: make(chan error), done: make(chan struct{})}
}

// Stop makes every fsync go through, held ones included.
func (h *HeldSync) Stop() { close(h.done) }

// Sync fsyncs f, once released when it is held.
func (h *HeldSync) Sync(f *os.File) error {
	if h.Holding.Load() || h.HoldNext.CompareAndSwap(true, false) {
		select {
		case h.Entered <- struct{}{}:
		case <-h.done:
			return f.Sync()
		}
		select {
		case err := <-h.Release:
			if err != nil {
				return err
			}
		case <-h.done:
		}
	}
	return f.Sync()
}
