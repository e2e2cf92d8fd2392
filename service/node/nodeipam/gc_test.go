package nodeipam

import (
	"context"
	"errors"
	"testing"

	"github.com/nephio-project/ipam/service/ipam"
)

// TestGarbageCollect: every allocation of the pools named whose interface
// is not valid is released, and nothing else: not the valid ones, not
// those of another pool; the addresses are handed out again.
func TestGarbageCollect(t *testing.T) {
	ctx := context.Background()
	e := openEngine(t, t.TempDir())
	setPool(t, e, "pool1", seedBlock())
	setPool(t, e, "pool2", seedBlock())
	for _, c := range []string{"c1", "c2", "c3"} {
		alloc1(t, e, req(c, "pool1"))
	}
	alloc1(t, e, req("c9", "pool2"))
	released, err := e.GarbageCollect(ctx, IPPool, []string{"pool1"}, []Attachment{{ContainerID: "c2", IfName: "net1"}, {ContainerID: "c3", IfName: "eth9"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(released) != 2 || released[0].ContainerID == "c2" || released[1].ContainerID == "c2" {
		t.Fatalf("released %+v, want c1 and c3 (c3 holds net1, not eth9)", released)
	}
	if err := e.IsAllocated(ctx, req("c2", "pool1")); err != nil {
		t.Errorf("c2 is valid: %v", err)
	}
	for _, c := range []string{"c1", "c3"} {
		if err := e.IsAllocated(ctx, req(c, "pool1")); !errors.Is(err, ipam.ErrNotFound) {
			t.Errorf("%s after GC: %v", c, err)
		}
	}
	if err := e.IsAllocated(ctx, req("c9", "pool2")); err != nil {
		t.Errorf("another pool's allocation: %v", err)
	}
	if got := alloc1(t, e, req("c4", "pool1")); got != "192.168.0.25/16" {
		t.Errorf("after GC the lowest address is %s", got)
	}
	// Again: nothing left to release.
	if released, err := e.GarbageCollect(ctx, IPPool, []string{"pool1"}, []Attachment{{"c2", "net1"}, {"c4", "net1"}}); err != nil || len(released) != 0 {
		t.Fatalf("second GC: %+v %v", released, err)
	}
	for _, bad := range [][]Attachment{{{ContainerID: "", IfName: "net1"}}, {{ContainerID: "c1", IfName: "a/b"}}} {
		if _, err := e.GarbageCollect(ctx, IPPool, []string{"pool1"}, bad); !errors.Is(err, ipam.ErrInvalid) {
			t.Errorf("attachment %+v: %v", bad, err)
		}
	}
	if _, err := e.GarbageCollect(ctx, IPPool, nil, nil); !errors.Is(err, ipam.ErrInvalid) {
		t.Errorf("no pools: %v", err)
	}
}

// TestPoolStatus: a pool is ready when the node holds a block of it.
func TestPoolStatus(t *testing.T) {
	e := openEngine(t, t.TempDir())
	setPool(t, e, "pool1", seedBlock())
	st, err := e.PoolStatus(IPPool, []string{"pool1", "pool2"})
	if err != nil || !st[0].Ready || st[1].Ready || st[1].Reason == "" {
		t.Fatalf("%+v %v", st, err)
	}
	setPool(t, e, "pool1", nil)
	if st, _ := e.PoolStatus(IPPool, []string{"pool1"}); st[0].Ready {
		t.Fatalf("a pool whose block is gone: %+v", st)
	}
}

// TestCheck: Check verifies the address held is the result's and inside
// the node's block.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	e := openEngine(t, t.TempDir())
	setPool(t, e, "pool1", seedBlock())
	alloc1(t, e, req("c1", "pool1")) // .25
	r := req("c1", "pool1")
	if err := e.Check(ctx, r); err != nil {
		t.Fatal(err)
	}
	r.RequestedIPs = []string{"192.168.0.25"}
	if err := e.Check(ctx, r); err != nil {
		t.Fatal(err)
	}
	r.RequestedIPs = []string{"192.168.0.26"}
	if err := e.Check(ctx, r); !errors.Is(err, ipam.ErrNotFound) {
		t.Fatalf("another address: %v", err)
	}
	if err := e.Check(ctx, req("c2", "pool1")); !errors.Is(err, ipam.ErrNotFound) {
		t.Fatalf("nothing held: %v", err)
	}
	moved := seedBlock()
	moved.Start = mustAddr("192.168.0.30")
	setPool(t, e, "pool1", moved)
	if err := e.Check(ctx, req("c1", "pool1")); !errors.Is(err, ErrOutsideBlock) {
		t.Fatalf("outside the block: %v", err)
	}
	if err := e.IsAllocated(ctx, req("c1", "pool1")); err != nil {
		t.Fatalf("IsAllocated answers as NVIDIA's daemon: %v", err)
	}
	setPool(t, e, "pool1", nil)
	if err := e.Check(ctx, req("c1", "pool1")); !errors.Is(err, ErrOutsideBlock) {
		t.Fatalf("no block: %v", err)
	}
}
