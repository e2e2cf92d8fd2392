package ipam

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"
)

// stalledJournal holds every batch until released: a store whose fsync
// hangs (fault injection).
type stalledJournal struct {
	mu      sync.Mutex
	release chan struct{}
	recs    []Record
}

func (j *stalledJournal) Append(recs []Record) func() error {
	return func() error {
		<-j.release
		j.mu.Lock()
		j.recs = append(j.recs, recs...)
		j.mu.Unlock()
		return nil
	}
}

// TestContextEndsTheWaitNotTheChange: a call whose deadline passes while
// its change waits for the store returns DeadlineExceeded at the
// deadline; the change is made and reaches the journal once the store
// moves; calling again returns the same result. A call whose context is
// already done changes nothing.
func TestContextEndsTheWaitNotTheChange(t *testing.T) {
	j := &stalledJournal{release: make(chan struct{})}
	a := New(WithJournal(j))
	close(j.release) // the seed goes through
	if _, err := a.Sync(context.Background(), seedRequest()); err != nil {
		t.Fatal(err)
	}
	j.release = make(chan struct{})
	sel := Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1"}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := a.Allocate(ctx, Allocation{Key: k("late"), Selector: sel})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Allocate with a stalled store: %v, want DeadlineExceeded", err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("Allocate returned after %s, not at its deadline", waited)
	}
	rec, err := a.GetAllocation(k("late"))
	if err != nil {
		t.Fatalf("the change was not made: %v", err)
	}
	close(j.release)
	res, err := a.Allocate(context.Background(), Allocation{Key: k("late"), Selector: sel})
	if err != nil || res != rec.Result {
		t.Fatalf("the retry: %v %v, want the same %v", res, err, rec.Result)
	}
	j.mu.Lock()
	n := len(j.recs)
	j.mu.Unlock()
	if n == 0 {
		t.Fatal("the journal never got the change")
	}

	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := a.Allocate(done, Allocation{Key: k("never"), Selector: sel}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Allocate with a done context: %v, want Canceled", err)
	}
	if _, err := a.GetAllocation(k("never")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a call with a done context changed the state: %v", err)
	}
	checkInvariants(t, a)
}

// TestReadsDoNotWaitForTheStore: while a change of an owner waits for a
// stalled store, reads of that owner (Get, List) answer, and see it.
func TestReadsDoNotWaitForTheStore(t *testing.T) {
	j := &stalledJournal{release: make(chan struct{})}
	close(j.release)
	a := New(WithJournal(j))
	if _, err := a.Sync(context.Background(), seedRequest()); err != nil {
		t.Fatal(err)
	}
	j.release = make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := a.Allocate(context.Background(), Allocation{Key: k("waiting"), Selector: Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1"}})
		done <- err
	}()
	for {
		if _, err := a.GetAllocation(k("waiting")); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Allocate returned (%v) before the store was released", err)
		case <-time.After(time.Millisecond):
		}
	}
	if page, _ := a.ListAllocationsPage(Filter{Owner: owner}, nil, 10); len(page) == 0 {
		t.Fatal("List of the owner found nothing while its change waits for the store")
	}
	close(j.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestListAllocationsPage: the pages of any size, concatenated, are the
// whole list, and a page starts after the key it is given.
func TestListAllocationsPage(t *testing.T) {
	a := New()
	if _, err := a.Sync(context.Background(), seedRequest()); err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"o1", "o2", "o3"} {
		req := SyncRequest{Owner: o}
		for i := range 37 {
			req.Allocations = append(req.Allocations, Allocation{Key: Key{Namespace: []string{"b", "a"}[i%2], Name: fmt.Sprint("n", i)},
				Selector: Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1"}})
		}
		if _, err := a.Sync(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []Filter{{}, {Owner: "o2"}, {NetworkInstance: "vpc-1"}} {
		all := a.ListAllocations(f)
		for _, size := range []int{1, 5, 36, 37, 38, 500} {
			var got []AllocationRecord
			var after *Key
			for {
				page, more := a.ListAllocationsPage(f, after, size)
				if len(page) > size || more && len(page) != size {
					t.Fatalf("filter %+v size %d: a page of %d, more %v", f, size, len(page), more)
				}
				got = append(got, page...)
				if !more {
					break
				}
				k := page[len(page)-1].Allocation.Key
				after = &k
			}
			if !reflect.DeepEqual(got, all) {
				t.Fatalf("filter %+v size %d: pages hold %d records, the list %d", f, size, len(got), len(all))
			}
		}
	}
}
