package server_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server"
)

// gatedStore is a journal whose batches become durable (or fail) when the
// test says so; a nil entry of results makes its batch durable at once
// (Append returns no wait function).
type gatedStore struct {
	results []chan error
	n       int
}

func (s *gatedStore) Append([]ipam.Record) func() error {
	ch := s.results[s.n]
	s.n++
	if ch == nil {
		return nil
	}
	return func() error { return <-ch }
}

// TestHubPublishesInCommitOrder makes batches durable out of order, one of
// them at once and one not at all: watchers see the durable ones in the
// order they were appended, each once, and nothing of the failed one.
func TestHubPublishesInCommitOrder(t *testing.T) {
	st := &gatedStore{results: []chan error{make(chan error, 1), nil, make(chan error, 1), make(chan error, 1), nil}}
	hub := server.NewHub(st, 0, nil)
	hub.OnFailure(func(error) {})
	sub, err := hub.Subscribe("", "")
	must(t, err)
	defer sub.Close()
	batch := func(name string) []ipam.Record {
		return []ipam.Record{{Op: ipam.OpDeleteAllocation, Key: ipam.Key{Owner: "o", Namespace: "default", Name: name}}}
	}
	var waits []func() error
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		waits = append(waits, hub.Append(batch(name)))
	}
	if waits[1] != nil || waits[4] != nil {
		t.Fatal("a batch durable at once returned a wait function")
	}
	results := make(chan error, 3)
	for _, i := range []int{3, 2, 0} { // d, then c (fails), then a
		var err error
		if i == 2 {
			err = errors.New("disk gone")
		}
		st.results[i] <- err
		go func() { results <- waits[i]() }()
	}
	var got []string
	for len(got) < 4 {
		select {
		case ev := <-sub.Events():
			got = append(got, ev.GetKey().GetName())
		case <-time.After(10 * time.Second):
			t.Fatalf("events %q, then nothing", got)
		}
	}
	if want := []string{"a", "b", "d", "e"}; !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	failed := 0
	for range 3 {
		if err := <-results; err != nil {
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("%d waits failed, want 1 (batch c)", failed)
	}
	select {
	case ev := <-sub.Events():
		t.Fatalf("extra event %v", ev)
	default:
	}
}

// TestHubSkipsOwnerRecords: the binding of an owner to a package identity
// is no object, so a watcher sees only the objects of a batch: events
// come in record order, so the first one is the deletion.
func TestHubSkipsOwnerRecords(t *testing.T) {
	hub := server.NewHub(&gatedStore{results: []chan error{nil}}, 0, nil)
	sub, err := hub.Subscribe("", "")
	must(t, err)
	defer sub.Close()
	hub.Append([]ipam.Record{
		{Op: ipam.OpPutOwner, Key: ipam.Key{Owner: "o"}, Owner: &ipam.OwnerInfo{Identity: "id-1"}},
		{Op: ipam.OpDeleteAllocation, Key: ipam.Key{Owner: "o", Namespace: "default", Name: "a"}},
	})
	select {
	case ev := <-sub.Events():
		if ev.GetKey().GetName() != "a" {
			t.Fatalf("first event %v, want the deletion of a", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
}

// TestHubPublishesOnlyCommittedChanges: a change whose commit is not
// known yet (the write lead's pipelined transaction, AppendPending) takes
// its turn when appended but is published only once its commit succeeds;
// one whose commit fails is never published (it is undone), its wait
// returns the commit's error, and the store is not failed for it.
func TestHubPublishesOnlyCommittedChanges(t *testing.T) {
	hub := server.NewHub(nil, 0, nil)
	storeFailed := false
	hub.OnFailure(func(error) { storeFailed = true })
	sub, err := hub.Subscribe("", "")
	must(t, err)
	defer sub.Close()
	batch := func(name string) []ipam.Record {
		return []ipam.Record{{Op: ipam.OpDeleteAllocation, Key: ipam.Key{Owner: "o", Namespace: "default", Name: name}}}
	}
	commitA, commitB := make(chan error, 1), make(chan error, 1)
	waitA := hub.AppendPending(batch("a"), func() error { return <-commitA })
	waitB := hub.AppendPending(batch("b"), func() error { return <-commitB })
	if w := hub.Append(batch("c")); w != nil {
		t.Fatal("a committed change in memory returned a wait function")
	}
	select {
	case ev := <-sub.Events():
		t.Fatalf("%s published before the commits before it are known", ev.GetKey().GetName())
	case <-time.After(50 * time.Millisecond):
	}
	errConflict := ipam.ErrStale
	commitA <- errConflict
	if err := waitA(); !errors.Is(err, ipam.ErrStale) {
		t.Fatalf("wait of the failed commit: %v, want the commit's error", err)
	}
	commitB <- nil
	if err := waitB(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 2 {
		select {
		case ev := <-sub.Events():
			got = append(got, ev.GetKey().GetName())
		case <-time.After(10 * time.Second):
			t.Fatalf("events %q, then nothing", got)
		}
	}
	if want := []string{"b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q (a's commit failed)", got, want)
	}
	if storeFailed {
		t.Fatal("a failed commit was taken for a failure of the store")
	}
}
