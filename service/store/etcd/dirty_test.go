package etcd_test

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/store/etcd"
)

// TestNoDirtyReadsOnTheWriteLead: the write lead shows a change in its
// allocator while the change's transaction is in flight; the transaction
// then fails (fault injection: every transaction fails while the fault
// is on) and the change is undone. Readers that settle what they read
// (ipam.Allocator.ReadSettled, as Get, List, Tree and the web view do)
// never answer with it, while a plain read does see it in flight, and
// the Watch stream (the server's hub) never receives it; once the fault
// is off the change commits, settled reads return it and the stream
// receives it.
func TestNoDirtyReadsOnTheWriteLead(t *testing.T) {
	c := startCluster(t, 1)
	s, err := etcd.Open(etcd.Options{Endpoints: c.endpoints(), Prefix: "/dirty/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	release := make(chan struct{})
	var faulty atomic.Bool
	errInjected := errors.New("injected: the transaction failed")
	s.InjectTxnFault(func() error {
		if !faulty.Load() {
			return nil
		}
		<-release // in flight until the readers run
		return errInjected
	})
	hub := server.NewHub(s, 0, nil) // Watch streams, as the server wires them
	hub.OnFailure(func(err error) { t.Errorf("the store failed: %v", err) })
	s.Publish(hub)
	a := ipam.New(ipam.WithCommitter(s), ipam.WithJournal(hub))
	if err := s.Restore(a); err != nil {
		t.Fatal(err)
	}
	sub, err := hub.Subscribe("", "")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	s.Lead("127.0.0.1:1") // nobody forwards to it here; it pipelines
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, self := s.Leader(); self {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the store did not take the write lead")
		}
	}
	ctx := context.Background()
	if err := a.CreateNetworkInstance(ctx, ipam.NetworkInstance{Key: ipam.Key{Owner: "o", Name: "vpc-1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreatePrefix(ctx, ipam.Prefix{Key: ipam.Key{Owner: "o", Name: "agg"}, NetworkInstance: "vpc-1", Kind: ipam.KindAggregate,
		Prefix: netip.MustParsePrefix("10.0.0.0/8")}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreatePrefix(ctx, ipam.Prefix{Key: ipam.Key{Owner: "o", Name: "net"}, NetworkInstance: "vpc-1",
		Prefix: netip.MustParsePrefix("10.0.0.0/24"), Network: "net"}); err != nil {
		t.Fatal(err)
	}
	sel := ipam.Labels{ipam.LabelNetworkInstance: "vpc-1", ipam.LabelNetworkName: "net"}
	x := ipam.Key{Owner: "o", Namespace: "default", Name: "x"}

	time.Sleep(etcd.PipelineQuiet) // the leader pipelines from now on
	faulty.Store(true)
	allocated := make(chan error, 1)
	go func() {
		_, err := a.Allocate(ctx, ipam.Allocation{Key: x, Selector: sel})
		allocated <- err
	}()
	// The change is in the allocator, its transaction in flight.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := a.GetAllocation(x); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the allocation never showed in the allocator")
		}
	}

	// Readers settle what they read while the transaction fails, again
	// and again (each retry of the allocation fails too).
	var seen, answered atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				var getErr error
				var list []ipam.AllocationRecord
				if err := a.ReadSettled(func() {
					_, getErr = a.GetAllocation(x)
					list = a.ListAllocations(ipam.Filter{Owner: "o"})
				}); err != nil {
					continue // not answered: the state could not be settled
				}
				answered.Add(1)
				if getErr == nil || len(list) > 0 {
					seen.Add(1)
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond) // the readers wait for the transaction
	close(release)
	if err := <-allocated; err == nil {
		t.Fatal("the allocation succeeded although every transaction failed")
	} else {
		t.Logf("the allocation failed: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); answered.Load() < 10; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("readers answered %d times", answered.Load())
		}
	}
	close(stop)
	wg.Wait()
	if n := seen.Load(); n > 0 {
		t.Fatalf("settled reads answered %d times (of %d) with the allocation whose transaction failed", n, answered.Load())
	}
	t.Logf("settled reads answered %d times, never with the failed allocation", answered.Load())
	for drained := false; !drained; {
		select {
		case ev := <-sub.Events():
			if ev.GetKey().GetName() == x.Name && ev.GetType() == ipamv1.WatchEvent_TYPE_PUT {
				t.Fatal("the Watch stream received the allocation whose transaction failed")
			}
		default:
			drained = true
		}
	}

	// Without the fault, the allocation commits and settled reads show it.
	faulty.Store(false)
	if _, err := a.Allocate(ctx, ipam.Allocation{Key: x, Selector: sel}); err != nil {
		t.Fatal(err)
	}
	var getErr error
	if err := a.ReadSettled(func() { _, getErr = a.GetAllocation(x) }); err != nil || getErr != nil {
		t.Fatalf("settled read after the commit: %v, %v", err, getErr)
	}
	for {
		select {
		case ev := <-sub.Events():
			if ev.GetKey().GetName() == x.Name && ev.GetType() == ipamv1.WatchEvent_TYPE_PUT {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the Watch stream did not receive the committed allocation")
		}
	}
}
