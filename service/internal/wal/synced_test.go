package wal

import (
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// heldSync is an Options.SyncFile for fault injection: while holding is
// set, each fsync of a segment signals entered and then waits for its
// outcome on release (nil: the fsync is made). After stop it holds
// nothing, so that a test that failed can close the log.
type heldSync struct {
	holding atomic.Bool
	entered chan struct{}
	release chan error
	done    chan struct{}
}

func newHeldSync() *heldSync {
	return &heldSync{entered: make(chan struct{}, 1), release: make(chan error), done: make(chan struct{})}
}

func (h *heldSync) stop() { close(h.done) }

func (h *heldSync) sync(f *os.File) error {
	if h.holding.Load() {
		select {
		case h.entered <- struct{}{}:
		case <-h.done:
			return f.Sync()
		}
		select {
		case err := <-h.release:
			if err != nil {
				return err
			}
		case <-h.done:
		}
	}
	return f.Sync()
}

// synced waits in the background for l.Unsynced's Pending, if any.
func synced(l *Log) <-chan error {
	done := make(chan error, 1)
	go func() { done <- waitUnsynced(l) }()
	return done
}

// waitUnsynced waits for l.Unsynced's Pending, if any.
func waitUnsynced(l *Log) error {
	if p := l.Unsynced(); p != nil {
		return p.Wait()
	}
	return nil
}

// notYet fails the test if done delivers within a short while: the Pending
// must still be waiting for the held fsync.
func notYet(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("the Pending of Unsynced returned %v while the fsync of an enqueued batch was held", err)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestUnsyncedWaitsForTheGroupCommit: Unsynced is nil with nothing
// pending, waits for the fsync of batches enqueued before it (in the
// group being written or in the next), and reports a failed fsync then
// and ever after.
func TestUnsyncedWaitsForTheGroupCommit(t *testing.T) {
	h := newHeldSync()
	l, _ := open(t, t.TempDir(), Options{SyncFile: h.sync})
	t.Cleanup(h.stop)
	write(t, l, 0, 3)

	h.holding.Store(true) // an fsync now would block the call below
	if p := l.Unsynced(); p != nil {
		t.Fatalf("Unsynced with nothing pending: %v, want nil", p)
	}

	// Batch 4 is being written: its fsync is held.
	p := l.Enqueue([]byte("four"))
	<-h.entered
	first := synced(l)
	notYet(t, first)
	h.release <- nil
	if err := <-first; err != nil {
		t.Fatalf("Unsynced after the fsync of batch 4: %v", err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}

	// Batch 6 waits in the next group, behind the held fsync of batch 5.
	l.Enqueue([]byte("five"))
	<-h.entered
	l.Enqueue([]byte("six"))
	second := synced(l)
	notYet(t, second)
	h.release <- nil
	<-h.entered // batch 6's group
	notYet(t, second)
	h.release <- nil
	if err := <-second; err != nil {
		t.Fatalf("Unsynced after the fsync of batch 6: %v", err)
	}

	// A failed fsync: the waiting Pending and every later one report it.
	l.Enqueue([]byte("lost"))
	<-h.entered
	waiting := synced(l)
	notYet(t, waiting)
	fail := errors.New("injected fsync failure")
	h.release <- fail
	if err := <-waiting; !errors.Is(err, fail) {
		t.Fatalf("Unsynced waiting for a failed fsync: %v, want the fsync error", err)
	}
	h.holding.Store(false)
	if err := waitUnsynced(l); !errors.Is(err, fail) {
		t.Fatalf("Unsynced after a failed fsync: %v, want the fsync error", err)
	}
}

// TestUnsyncedAfterReplay: a replayed log has nothing pending.
func TestUnsyncedAfterReplay(t *testing.T) {
	dir := t.TempDir()
	l, _ := open(t, dir, Options{})
	write(t, l, 0, 4)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	h := newHeldSync()
	h.holding.Store(true)
	l, _ = open(t, dir, Options{SyncFile: h.sync})
	t.Cleanup(h.stop)
	if p := l.Unsynced(); p != nil {
		t.Fatalf("Unsynced after Replay: %v, want nil", p)
	}
}
