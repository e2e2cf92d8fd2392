package wal

import (
	"errors"
	"testing"
	"time"

	"github.com/nephio-project/ipam/service/internal/wal/waltest"
)

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
	h := waltest.NewHeldSync()
	l, _ := open(t, t.TempDir(), Options{SyncFile: h.Sync})
	t.Cleanup(h.Stop)
	write(t, l, 0, 3)

	h.Holding.Store(true) // an fsync now would block the call below
	if p := l.Unsynced(); p != nil {
		t.Fatalf("Unsynced with nothing pending: %v, want nil", p)
	}

	// Batch 4 is being written: its fsync is held.
	p := l.Enqueue([]byte("four"))
	<-h.Entered
	first := synced(l)
	notYet(t, first)
	h.Release <- nil
	if err := <-first; err != nil {
		t.Fatalf("Unsynced after the fsync of batch 4: %v", err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}

	// Batch 6 waits in the next group, behind the held fsync of batch 5.
	l.Enqueue([]byte("five"))
	<-h.Entered
	l.Enqueue([]byte("six"))
	second := synced(l)
	notYet(t, second)
	h.Release <- nil
	<-h.Entered // batch 6's group
	notYet(t, second)
	h.Release <- nil
	if err := <-second; err != nil {
		t.Fatalf("Unsynced after the fsync of batch 6: %v", err)
	}

	// A failed fsync: the waiting Pending and every later one report it.
	l.Enqueue([]byte("lost"))
	<-h.Entered
	waiting := synced(l)
	notYet(t, waiting)
	fail := errors.New("injected fsync failure")
	h.Release <- fail
	if err := <-waiting; !errors.Is(err, fail) {
		t.Fatalf("Unsynced waiting for a failed fsync: %v, want the fsync error", err)
	}
	h.Holding.Store(false)
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
	h := waltest.NewHeldSync()
	h.Holding.Store(true)
	l, _ = open(t, dir, Options{SyncFile: h.Sync})
	t.Cleanup(h.Stop)
	if p := l.Unsynced(); p != nil {
		t.Fatalf("Unsynced after Replay: %v, want nil", p)
	}
}
