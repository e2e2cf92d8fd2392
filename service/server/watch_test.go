package server_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server"
)

// openWatch starts a Watch and waits until the server acknowledged it
// (headers), so every change committed afterwards is delivered.
func openWatch(t *testing.T, c ipamv1.IPAMClient, req *ipamv1.WatchRequest) grpc.ServerStreamingClient[ipamv1.WatchEvent] {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := c.Watch(ctx, req)
	must(t, err)
	if _, err := stream.Header(); err != nil {
		t.Fatal(err)
	}
	return stream
}

func describe(ev *ipamv1.WatchEvent) string {
	s := fmt.Sprintf("%s %s %s", ev.GetType(), ev.GetKind(), ev.GetKey().GetName())
	switch o := ev.GetObject().GetObject().(type) {
	case *ipamv1.Object_Prefix:
		s += " " + o.Prefix.GetPrefix().GetPrefix()
	case *ipamv1.Object_Allocation:
		s += " " + o.Allocation.GetResult().GetPrefix()
	}
	return s
}

func recvN(t *testing.T, stream grpc.ServerStreamingClient[ipamv1.WatchEvent], n int) []string {
	t.Helper()
	var out []string
	for range n {
		ev, err := stream.Recv()
		must(t, err)
		out = append(out, describe(ev))
	}
	return out
}

// TestWatchOrder checks that Watch delivers PUT and DELETE events in commit
// order and filters by network instance and owner, deletions included.
func TestWatchOrder(t *testing.T) {
	ts := startServer(t, server.Config{})
	c := ts.Client(t)
	ctx := context.Background()
	all := openWatch(t, c, &ipamv1.WatchRequest{})
	vpc1 := openWatch(t, c, &ipamv1.WatchRequest{NetworkInstance: "vpc-1"})
	vpc2 := openWatch(t, c, &ipamv1.WatchRequest{NetworkInstance: "vpc-2"})
	pkg := openWatch(t, c, &ipamv1.WatchRequest{Owner: "pkg"})

	seed(t, c)
	must(t, call(c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: alloc1()})))
	must(t, call(c.Release(ctx, &ipamv1.DeleteRequest{Key: key("alloc1")})))
	must(t, call(c.CreateNetworkInstance(ctx, &ipamv1.CreateNetworkInstanceRequest{NetworkInstance: &ipamv1.NetworkInstance{
		Key: key("vpc-2"), Prefixes: []*ipamv1.VRFPrefix{{Prefix: "192.168.0.0/16"}}}})))
	must(t, call(c.Sync(ctx, &ipamv1.SyncRequest{Owner: "pkg", Allocations: []*ipamv1.Allocation{
		{Key: &ipamv1.Key{Name: "p1"}, NetworkInstance: "vpc-1", Prefix: "10.0.1.7/24"},
	}})))
	must(t, call(c.Sync(ctx, &ipamv1.SyncRequest{Owner: "pkg", Prune: true})))
	must(t, call(c.DeletePrefix(ctx, &ipamv1.DeleteRequest{Key: key("net1-prefix1")})))
	// A last change in vpc-2 ends every filtered stream's expectations.
	must(t, call(c.DeleteNetworkInstance(ctx, &ipamv1.DeleteRequest{Key: key("vpc-2")})))

	want := []string{
		"TYPE_PUT OBJECT_KIND_NETWORK_INSTANCE vpc-1",
		"TYPE_PUT OBJECT_KIND_PREFIX aggregate0 10.0.0.0/8",
		"TYPE_PUT OBJECT_KIND_PREFIX net1-prefix1 10.0.1.1/24",
		"TYPE_PUT OBJECT_KIND_ALLOCATION alloc1 10.0.1.2/24",
		"TYPE_DELETE OBJECT_KIND_ALLOCATION alloc1",
		"TYPE_PUT OBJECT_KIND_NETWORK_INSTANCE vpc-2",
		"TYPE_PUT OBJECT_KIND_ALLOCATION p1 10.0.1.7/24",
		"TYPE_DELETE OBJECT_KIND_ALLOCATION p1",
		"TYPE_DELETE OBJECT_KIND_PREFIX net1-prefix1",
		"TYPE_DELETE OBJECT_KIND_NETWORK_INSTANCE vpc-2",
	}
	check := func(name string, stream grpc.ServerStreamingClient[ipamv1.WatchEvent], want []string) {
		t.Helper()
		got := recvN(t, stream, len(want))
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: event %d = %q, want %q\nall: %q", name, i, got[i], want[i], got)
				return
			}
		}
	}
	check("all", all, want)
	check("vpc-1", vpc1, []string{want[0], want[1], want[2], want[3], want[4], want[6], want[7], want[8]})
	check("vpc-2", vpc2, []string{want[5], want[9]})
	check("owner pkg", pkg, []string{want[6], want[7]})

	// Concurrent allocations from one network are handed out lowest free
	// first, so in commit order their addresses increase strictly.
	stream := openWatch(t, c, &ipamv1.WatchRequest{NetworkInstance: "vpc-1"})
	must(t, call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("big"), NetworkInstance: "vpc-1", Prefix: "10.0.16.0/20", Network: "big"}})))
	const n = 400
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for j := i; j < n; j += 16 {
				if _, err := c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key(fmt.Sprint("c", j)),
					Selector: map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "big"}}}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if ev, err := stream.Recv(); err != nil || ev.GetKind() != ipamv1.ObjectKind_OBJECT_KIND_PREFIX {
		t.Fatalf("first event %v, %v", ev, err)
	}
	var last netip.Addr
	for i := range n {
		ev, err := stream.Recv()
		must(t, err)
		a := netip.MustParsePrefix(ev.GetObject().GetAllocation().GetResult().GetPrefix()).Addr()
		if last.IsValid() && !last.Less(a) {
			t.Fatalf("event %d: %s after %s: not in commit order", i, a, last)
		}
		last = a
	}
}

// TestWatchSlowWatcher checks that a watcher that does not read is cut off
// with ResourceExhausted while allocation goes on unhindered.
func TestWatchSlowWatcher(t *testing.T) {
	ts := startServer(t, server.Config{WatchBuffer: 8})
	c := ts.Client(t)
	ctx := context.Background()
	seed(t, c)
	slow := openWatch(t, c, &ipamv1.WatchRequest{})
	req := &ipamv1.SyncRequest{Owner: "pkg"}
	for i := range 200 {
		req.Allocations = append(req.Allocations, &ipamv1.Allocation{Key: &ipamv1.Key{Name: fmt.Sprint("a", i)},
			Selector: map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net1"}})
	}
	start := time.Now()
	must(t, call(c.Sync(ctx, req)))
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Sync took %s with a stalled watcher", d)
	}
	got := 0
	for {
		_, err := slow.Recv()
		if err != nil {
			wantStatus(t, err, codes.ResourceExhausted, "watch fell behind: more than 8 events pending; list again and restart the watch")
			break
		}
		got++
	}
	if got >= 200 {
		t.Errorf("slow watcher received all %d events", got)
	}
	// A new watch works.
	fresh := openWatch(t, c, &ipamv1.WatchRequest{})
	must(t, call(c.Release(ctx, &ipamv1.DeleteRequest{Key: &ipamv1.Key{Owner: "pkg", Name: "a0"}})))
	if got := recvN(t, fresh, 1); got[0] != "TYPE_DELETE OBJECT_KIND_ALLOCATION a0" {
		t.Errorf("fresh watch got %v", got)
	}
}

// TestWatchIndexUnderChurn subscribes the first watcher filtered by network
// instance (which builds the hub's index of existing objects) while other
// clients allocate and release, then releases everything: the watcher sees
// the deletion of every object that still existed.
func TestWatchIndexUnderChurn(t *testing.T) {
	ts := startServer(t, server.Config{})
	c := ts.Client(t)
	ctx := context.Background()
	seed(t, c)
	must(t, call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("big"), NetworkInstance: "vpc-1", Prefix: "10.0.16.0/20", Network: "big"}})))
	sel := map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "big"}
	req := &ipamv1.SyncRequest{Owner: "bulk"}
	for i := range 2000 {
		req.Allocations = append(req.Allocations, &ipamv1.Allocation{Key: &ipamv1.Key{Name: fmt.Sprint("b", i)}, Selector: sel})
	}
	must(t, call(c.Sync(ctx, req)))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := &ipamv1.Key{Owner: "churn", Name: fmt.Sprint("c", g, "-", i)}
				if _, err := c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: k, Selector: sel}}); err != nil {
					t.Error(err)
					return
				}
				if i%2 == 0 {
					if _, err := c.Release(ctx, &ipamv1.DeleteRequest{Key: k}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	w, err := c.Watch(wctx, &ipamv1.WatchRequest{NetworkInstance: "vpc-1"})
	must(t, err)
	_, err = w.Header()
	must(t, err)
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()

	// Release everything that is left; the watcher must see each deletion.
	resp, err := c.List(ctx, &ipamv1.ListRequest{Kind: allocKind, PageSize: 5000})
	must(t, err)
	want := map[string]bool{}
	for _, o := range resp.GetObjects() {
		k := o.GetAllocation().GetAllocation().GetKey()
		must(t, call(c.Release(ctx, &ipamv1.DeleteRequest{Key: k})))
		want[k.GetName()] = true
	}
	if len(want) < 2000 {
		t.Fatalf("only %d allocations left", len(want))
	}
	for len(want) > 0 {
		ev, err := w.Recv()
		if err != nil {
			t.Fatalf("%v with %d deletions not seen", err, len(want))
		}
		if ev.GetType() == ipamv1.WatchEvent_TYPE_DELETE {
			delete(want, ev.GetKey().GetName())
		}
	}
}
