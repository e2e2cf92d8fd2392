package server_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/internal/wal/waltest"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/store/file"
)

// TestFileStoreReadsWaitForTheFsync: on the file store, an allocation whose
// fsync is under way is in the allocator, but Get, List and Tree answer
// only once the fsync completed, and then show it; when the fsync fails
// they answer Unavailable and never show it.
func TestFileStoreReadsWaitForTheFsync(t *testing.T) {
	reads := []struct {
		name string
		read func(svc *server.Service) (shows bool, err error)
	}{
		{"Get", func(svc *server.Service) (bool, error) {
			_, err := svc.Get(context.Background(), &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, Key: key("held")})
			if status.Code(err) == codes.NotFound {
				return false, nil
			}
			return err == nil, err
		}},
		{"List", func(svc *server.Service) (bool, error) {
			resp, err := svc.List(context.Background(), &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION})
			for _, o := range resp.GetObjects() {
				if o.GetAllocation().GetAllocation().GetKey().GetName() == "held" {
					return true, err
				}
			}
			return false, err
		}},
		{"Tree", func(svc *server.Service) (bool, error) {
			resp, err := svc.Tree(context.Background(), &ipamv1.TreeRequest{NetworkInstance: "vpc-1"})
			for _, n := range resp.GetNodes() { // the network counts the allocation
				if n.GetName() == "default/net" && n.GetUsed() > 3 { // network, broadcast and gateway addresses, and the allocation
					return true, err
				}
			}
			return false, err
		}},
	}
	for _, fail := range []bool{false, true} {
		for _, rd := range reads {
			name := rd.name
			if fail {
				name += "/failed fsync"
			}
			t.Run(name, func(t *testing.T) {
				g := waltest.NewHeldSync()
				st, err := file.Open(t.TempDir(), file.Options{Logger: slog.New(slog.DiscardHandler), SyncFile: g.Sync})
				must(t, err)
				defer st.Close()
				defer g.Stop()
				hub := server.NewHub(st, 0, nil)
				a := ipam.New(ipam.WithJournal(hub), ipam.WithDurableReads())
				must(t, st.Restore(a))
				svc := server.NewService(a, hub, nil)
				ctx := context.Background()
				_, err = svc.CreateNetworkInstance(ctx, &ipamv1.CreateNetworkInstanceRequest{NetworkInstance: &ipamv1.NetworkInstance{Key: key("vpc-1")}})
				must(t, err)
				_, err = svc.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("agg"), NetworkInstance: "vpc-1", Kind: "aggregate", Prefix: "10.0.0.0/8"}})
				must(t, err)
				_, err = svc.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("net"), NetworkInstance: "vpc-1",
					Prefix: "10.0.1.1/24", Network: "net", Labels: map[string]string{"nephio.org/gateway": "true"}}})
				must(t, err)
				if shows, err := rd.read(svc); err != nil || shows {
					t.Fatalf("before the allocation: shows %v, error %v", shows, err)
				}

				g.HoldNext.Store(true)
				allocated := make(chan error, 1)
				go func() {
					_, err := svc.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key("held"), NetworkInstance: "vpc-1", Prefix: "10.0.1.9/32"}})
					allocated <- err
				}()
				select {
				case <-g.Entered:
				case err := <-allocated:
					t.Fatalf("the allocation returned %v before its fsync", err)
				}
				if _, err := a.GetAllocation(ipam.Key{Owner: "test", Namespace: "default", Name: "held"}); err != nil {
					t.Fatalf("the allocator does not hold the allocation whose fsync is held (%v): the test shows nothing", err)
				}
				type answer struct {
					shows bool
					err   error
				}
				answered := make(chan answer, 1)
				go func() {
					shows, err := rd.read(svc)
					answered <- answer{shows, err}
				}()
				select {
				case r := <-answered:
					t.Fatalf("%s answered (shows the allocation: %v, error: %v) while the fsync of the allocation was held", rd.name, r.shows, r.err)
				case <-time.After(50 * time.Millisecond):
				}
				if !fail {
					g.Release <- nil
					if r := <-answered; r.err != nil || !r.shows {
						t.Fatalf("%s after the fsync: shows %v, error %v; want the allocation", rd.name, r.shows, r.err)
					}
					must(t, <-allocated)
					return
				}
				g.Release <- errors.New("injected fsync failure")
				r := <-answered
				if status.Code(r.err) != codes.Unavailable || r.shows {
					t.Fatalf("%s waiting for a failed fsync: shows %v, error %v; want Unavailable", rd.name, r.shows, r.err)
				}
				wantStatus(t, <-allocated, codes.Unavailable, "")
			})
		}
	}
}

// TestReadsWithoutPendingChangesDoNotWait: a hub on the memory store (no
// store) or on a file store with every change fsynced has nothing for a
// read to wait for.
func TestReadsWithoutPendingChangesDoNotWait(t *testing.T) {
	if w := server.NewHub(nil, 0, nil).Settled(); w != nil {
		t.Fatal("a hub in memory has changes to wait for")
	}
	st, err := file.Open(t.TempDir(), file.Options{Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	defer st.Close()
	hub := server.NewHub(st, 0, nil)
	a := ipam.New(ipam.WithJournal(hub), ipam.WithDurableReads())
	must(t, st.Restore(a))
	if err := a.CreateNetworkInstance(context.Background(), ipam.NetworkInstance{Key: ipam.Key{Owner: "test", Name: "vpc-1"}}); err != nil {
		t.Fatal(err)
	}
	if w := hub.Settled(); w != nil {
		t.Fatal("a hub on a file store has changes to wait for once they are fsynced")
	}
}
