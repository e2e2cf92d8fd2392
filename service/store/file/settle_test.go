package file

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nephio-project/ipam/service/internal/wal/waltest"
	"github.com/nephio-project/ipam/service/ipam"
)

// settledRead is what a settled read of allocation key answers.
type settledRead struct {
	shows bool // the allocation is in the answer
	err   error
}

// readSettled reads allocation key with Get or List through
// ReadSettled, in the background.
func readSettled(a *ipam.Allocator, list bool, key ipam.Key) <-chan settledRead {
	done := make(chan settledRead, 1)
	go func() {
		var r settledRead
		r.err = a.ReadSettled(func() {
			r.shows = shows(a, list, key)
		})
		done <- r
	}()
	return done
}

// shows reports whether a Get or a List of a shows allocation key.
func shows(a *ipam.Allocator, list bool, key ipam.Key) bool {
	if !list {
		_, err := a.GetAllocation(key)
		return err == nil
	}
	for _, r := range a.ListAllocations(ipam.Filter{Owner: key.Owner}) {
		if r.Allocation.Key == key {
			return true
		}
	}
	return false
}

// notAnswered fails the test if the read answers within a short while:
// it must wait for the held fsync.
func notAnswered(t *testing.T, done <-chan settledRead) {
	t.Helper()
	select {
	case r := <-done:
		t.Fatalf("a settled read answered (shows the allocation: %v, error: %v) while the fsync of the allocation was held", r.shows, r.err)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestReadsWaitForTheFsync: with ipam.WithDurableReads, an allocation
// whose fsync is under way is in the allocator, but Get and List through
// ReadSettled answer only once the
// fsync completed, and then show it; when the fsync fails they fail with
// ErrUnavailable and never show it; with nothing pending they answer at
// once, even while an fsync would block.
func TestReadsWaitForTheFsync(t *testing.T) {
	for _, tc := range []struct {
		name string
		list bool
		fail bool
	}{
		{"Get", false, false},
		{"List", true, false},
		{"Get/failed fsync", false, true},
		{"List/failed fsync", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := waltest.NewHeldSync()
			s, a := openAllocator(t, t.TempDir(), Options{SyncFile: h.Sync}, ipam.WithDurableReads())
			defer s.Close()
			defer h.Stop()
			benchNetwork(t, a, 16)
			ctx := context.Background()
			durable := benchKey(1)
			if _, err := a.Allocate(ctx, ipam.Allocation{Key: durable, Selector: benchSel}); err != nil {
				t.Fatal(err)
			}

			h.Holding.Store(true)
			// Nothing pending: the read answers although an fsync would block.
			if r := <-readSettled(a, tc.list, durable); r.err != nil || !r.shows {
				t.Fatalf("settled read with nothing pending: shows %v, error %v; want the allocation", r.shows, r.err)
			}

			key := benchKey(2)
			allocated := make(chan error, 1)
			go func() {
				_, err := a.Allocate(ctx, ipam.Allocation{Key: key, Selector: benchSel})
				allocated <- err
			}()
			<-h.Entered
			if !shows(a, tc.list, key) {
				t.Fatal("a plain read does not show the allocation whose fsync is held: the test shows nothing")
			}
			read := readSettled(a, tc.list, key)
			repeat := make(chan error, 1)
			go func() { // an idempotent repeat answers with the allocation too
				_, err := a.Allocate(ctx, ipam.Allocation{Key: key, Selector: benchSel})
				repeat <- err
			}()
			notAnswered(t, read)
			select {
			case err := <-repeat:
				t.Fatalf("a repeat of the allocation returned %v while its fsync was held", err)
			default:
			}

			if !tc.fail {
				h.Holding.Store(false)
				h.Release <- nil
				if r := <-read; r.err != nil || !r.shows {
					t.Fatalf("settled read after the fsync: shows %v, error %v; want the allocation", r.shows, r.err)
				}
				if err := <-allocated; err != nil {
					t.Fatal(err)
				}
				if err := <-repeat; err != nil {
					t.Fatal(err)
				}
				return
			}
			h.Holding.Store(false)
			h.Release <- errors.New("injected fsync failure")
			r := <-read
			if !errors.Is(r.err, ipam.ErrUnavailable) {
				t.Fatalf("settled read waiting for a failed fsync: error %v, want ErrUnavailable", r.err)
			}
			if err := <-allocated; err == nil {
				t.Fatal("the allocation whose fsync failed was acknowledged")
			}
			if err := <-repeat; err == nil {
				t.Fatal("a repeat of the allocation whose fsync failed was acknowledged")
			}
			if r := <-readSettled(a, tc.list, durable); !errors.Is(r.err, ipam.ErrUnavailable) {
				t.Fatalf("settled read after the failed fsync: error %v, want ErrUnavailable", r.err)
			}
		})
	}
}

// TestRepeatWaitsForTheFsync: without ipam.WithDurableReads a settled
// read answers at once with an allocation whose fsync is held (reads wait
// for durability only when asked to), but an idempotent repeat of the
// allocation, whose answer acknowledges it, waits for the fsync and then
// answers it.
func TestRepeatWaitsForTheFsync(t *testing.T) {
	h := waltest.NewHeldSync()
	s, a := openAllocator(t, t.TempDir(), Options{SyncFile: h.Sync})
	defer s.Close()
	defer h.Stop()
	benchNetwork(t, a, 16)
	ctx := context.Background()
	key := benchKey(1)
	h.Holding.Store(true)
	allocated := make(chan error, 1)
	go func() {
		_, err := a.Allocate(ctx, ipam.Allocation{Key: key, Selector: benchSel})
		allocated <- err
	}()
	<-h.Entered
	if r := <-readSettled(a, false, key); r.err != nil || !r.shows {
		t.Fatalf("settled read without durable reads: shows %v, error %v; want the allocation at once", r.shows, r.err)
	}
	repeat := make(chan error, 1)
	go func() {
		_, err := a.Allocate(ctx, ipam.Allocation{Key: key, Selector: benchSel})
		repeat <- err
	}()
	select {
	case err := <-repeat:
		t.Fatalf("a repeat of the allocation returned %v while its fsync was held", err)
	case <-time.After(50 * time.Millisecond):
	}
	h.Holding.Store(false)
	h.Release <- nil
	if err := <-allocated; err != nil {
		t.Fatal(err)
	}
	if err := <-repeat; err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentReadsSeeOnlyDurableChanges: with ipam.WithDurableReads,
// 8 writers allocate while 4
// readers list through ReadSettled; the 20th fsync takes a while and
// fails. Every allocation a settled read answered with was acknowledged
// as durable; none of those the failure lost was ever answered.
func TestConcurrentReadsSeeOnlyDurableChanges(t *testing.T) {
	var fsyncs atomic.Int64
	failure := errors.New("injected fsync failure")
	syncFile := func(f *os.File) error {
		if fsyncs.Add(1) == 20 {
			time.Sleep(20 * time.Millisecond) // the readers have time to see the batches
			return failure
		}
		return f.Sync()
	}
	s, a := openAllocator(t, t.TempDir(), Options{SyncFile: syncFile}, ipam.WithDurableReads())
	defer s.Close()
	benchNetwork(t, a, 16)
	fsyncs.Store(0)
	ctx := context.Background()

	var mu sync.Mutex
	acked, seen := map[string]bool{}, map[string]bool{}
	var next atomic.Int64
	stop := make(chan struct{})
	var writers, readers sync.WaitGroup
	for range 8 {
		writers.Go(func() {
			for {
				key := benchKey(int(next.Add(1)))
				if _, err := a.Allocate(ctx, ipam.Allocation{Key: key, Selector: benchSel}); err != nil {
					return // the log failed: every later change is refused
				}
				mu.Lock()
				acked[key.Name] = true
				mu.Unlock()
			}
		})
	}
	for range 4 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				var names []string
				if err := a.ReadSettled(func() {
					names = names[:0]
					for _, r := range a.ListAllocations(ipam.Filter{Owner: "bench"}) {
						names = append(names, r.Allocation.Key.Name)
					}
				}); err != nil {
					continue // the log failed: the read is refused
				}
				mu.Lock()
				for _, n := range names {
					seen[n] = true
				}
				mu.Unlock()
			}
		})
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	lost := 0
	for n := range seen {
		if !acked[n] {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("settled reads answered with %d allocations whose fsync failed (of %d seen, %d acknowledged)", lost, len(seen), len(acked))
	}
	if len(seen) == 0 || len(acked) == 0 {
		t.Fatalf("%d allocations acknowledged, %d seen: the test shows nothing", len(acked), len(seen))
	}
	t.Logf("%d allocations acknowledged, %d seen by settled reads", len(acked), len(seen))
}
