package nodeipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/nephio-project/ipam/service/ipam"
)

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// seedBlock is host-b's block of the seed pool: 192.168.0.0/16, blocks of
// 24, gateway 192.168.0.1.
func seedBlock() *Block {
	return &Block{Network: netip.MustParsePrefix("192.168.0.0/16"), Start: mustAddr("192.168.0.25"), End: mustAddr("192.168.0.48"),
		Gateway: mustAddr("192.168.0.1"), Routes: []netip.Prefix{netip.MustParsePrefix("10.10.0.0/16")}, DefaultGateway: true}
}

func openEngine(t *testing.T, dir string) *Engine {
	t.Helper()
	e, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func req(cid string, pools ...string) *Request {
	return &Request{Type: IPPool, Pools: pools, ContainerID: cid, IfName: "net1", Pod: Pod{Name: "pod-" + cid, Namespace: "default", UID: "uid-" + cid}}
}

func setPool(t *testing.T, e *Engine, name string, b *Block) PoolChange {
	t.Helper()
	ch, err := e.SetPool(context.Background(), PoolKey{IPPool, name}, b)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func TestAllocateFromBlock(t *testing.T) {
	ctx := context.Background()
	e := openEngine(t, t.TempDir())
	setPool(t, e, "pool1", seedBlock())
	res, err := e.Allocate(ctx, req("c1", "pool1"))
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if r.IP.String() != "192.168.0.25/16" || r.Gateway.String() != "192.168.0.1" || fmt.Sprint(r.Routes) != "[0.0.0.0/0 10.10.0.0/16]" {
		t.Fatalf("got %+v", r)
	}
	again, err := e.Allocate(ctx, req("c1", "pool1"))
	if err != nil || again[0].IP != r.IP {
		t.Fatalf("again: %v %v", again, err)
	}
	if err := e.IsAllocated(ctx, req("c1", "pool1")); err != nil {
		t.Fatal(err)
	}
	if err := e.IsAllocated(ctx, req("c2", "pool1")); !errors.Is(err, ipam.ErrNotFound) {
		t.Fatalf("IsAllocated c2: %v", err)
	}
	// Fill the block: 24 addresses.
	for i := 2; i <= 24; i++ {
		if _, err := e.Allocate(ctx, req(fmt.Sprintf("c%d", i), "pool1")); err != nil {
			t.Fatal(i, err)
		}
	}
	if _, err := e.Allocate(ctx, req("c25", "pool1")); !errors.Is(err, ipam.ErrExhausted) {
		t.Fatalf("c25: %v", err)
	}
	if err := e.Deallocate(ctx, req("c3", "pool1")); err != nil {
		t.Fatal(err)
	}
	res, err = e.Allocate(ctx, req("c25", "pool1"))
	if err != nil || res[0].IP.String() != "192.168.0.27/16" {
		t.Fatalf("c25: %v %v", res, err)
	}
}

func TestConcurrentAllocate(t *testing.T) {
	ctx := context.Background()
	e := openEngine(t, t.TempDir())
	b := seedBlock()
	b.End = mustAddr("192.168.0.255")
	setPool(t, e, "pool1", b)
	var wg sync.WaitGroup
	got := make([]netip.Prefix, 200)
	errs := make([]error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Allocate(ctx, req(fmt.Sprintf("c%d", i), "pool1"))
			if err == nil {
				got[i] = res[0].IP
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	seen := map[netip.Prefix]bool{}
	for i, p := range got {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if seen[p] || !b.Contains(p.Addr()) {
			t.Fatalf("%v twice or outside", p)
		}
		seen[p] = true
	}
}

// TestConcurrentBlockChanges: allocations and releases race block
// changes; every address handed out is one of a block the pool had, and
// no address is held twice.
func TestConcurrentBlockChanges(t *testing.T) {
	ctx := context.Background()
	e := openEngine(t, t.TempDir())
	a, b := seedBlock(), seedBlock()
	b.Start, b.End = mustAddr("192.168.0.40"), mustAddr("192.168.0.70")
	setPool(t, e, "pool1", a)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 30 {
			blk := a
			if i%2 == 0 {
				blk = b
			}
			if _, err := e.SetPool(ctx, PoolKey{IPPool, "pool1"}, blk); err != nil {
				t.Error(err)
			}
		}
		close(stop)
	}()
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := req(fmt.Sprintf("g%d-%d", g, i), "pool1")
				res, err := e.Allocate(ctx, r)
				if err != nil {
					if !errors.Is(err, ipam.ErrExhausted) {
						t.Error(err)
					}
					continue
				}
				if ip := res[0].IP.Addr(); !a.Contains(ip) && !b.Contains(ip) {
					t.Errorf("%s outside both blocks", ip)
				}
				if i%2 == 0 {
					if err := e.Deallocate(ctx, r); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	seen := map[netip.Prefix]string{}
	for _, h := range e.List() {
		if c, ok := seen[h.IP]; ok {
			t.Fatalf("%s held by %s and %s", h.IP, c, h.ContainerID)
		}
		seen[h.IP] = h.ContainerID
	}
}
