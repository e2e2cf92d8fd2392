package ipam

import (
	"context"
	"errors"
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
