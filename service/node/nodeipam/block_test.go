package nodeipam

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/nephio-project/ipam/service/ipam"
)

func alloc1(t *testing.T, e *Engine, r *Request) string {
	t.Helper()
	res, err := e.Allocate(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return res[0].IP.String()
}

// TestBlockChange: allocations the new block does not hold stay and are
// reported; their addresses are never handed out while held, nor after
// they are released; a pool whose block is gone answers NotFound.
func TestBlockChange(t *testing.T) {
	ctx := context.Background()
	e := openEngine(t, t.TempDir())
	b := seedBlock()
	setPool(t, e, "pool1", b)
	first := alloc1(t, e, req("c1", "pool1"))  // .25
	second := alloc1(t, e, req("c2", "pool1")) // .26
	if first != "192.168.0.25/16" || second != "192.168.0.26/16" {
		t.Fatal(first, second)
	}
	moved := seedBlock()
	moved.Start, moved.End = mustAddr("192.168.0.26"), mustAddr("192.168.0.28")
	ch := setPool(t, e, "pool1", moved)
	if len(ch.Outside) != 1 || ch.Outside[0].ContainerID != "c1" || ch.Outside[0].Pod.Name != "pod-c1" {
		t.Fatalf("outside: %+v", ch.Outside)
	}
	// c1 keeps .25; new containers get .27, .28, then nothing.
	if got := alloc1(t, e, req("c1", "pool1")); got != first {
		t.Fatalf("c1 again: %s", got)
	}
	if got := alloc1(t, e, req("c3", "pool1")); got != "192.168.0.27/16" {
		t.Fatal(got)
	}
	if got := alloc1(t, e, req("c4", "pool1")); got != "192.168.0.28/16" {
		t.Fatal(got)
	}
	if _, err := e.Allocate(ctx, req("c5", "pool1")); !errors.Is(err, ipam.ErrExhausted) {
		t.Fatalf("c5: %v", err)
	}
	if s := e.Stats(); len(s) != 1 || s[0].Outside != 1 || s[0].Allocations != 4 || s[0].Free != 0 {
		t.Fatalf("stats %+v", s)
	}
	// Released, .25 is not handed out again: outside the block.
	if err := e.Deallocate(ctx, req("c1", "pool1")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Allocate(ctx, req("c5", "pool1")); !errors.Is(err, ipam.ErrExhausted) {
		t.Fatalf("c5 after c1 left: %v", err)
	}
	// The block goes: NotFound; what is held stays.
	setPool(t, e, "pool1", nil)
	if _, err := e.Allocate(ctx, req("c6", "pool1")); !errors.Is(err, ipam.ErrNotFound) {
		t.Fatalf("no block: %v", err)
	}
	if err := e.IsAllocated(ctx, req("c3", "pool1")); err != nil {
		t.Fatal(err)
	}
	// A new subnet apart from the old one: both networks live.
	other := &Block{Network: netip.MustParsePrefix("10.1.0.0/24"), Start: mustAddr("10.1.0.10"), End: mustAddr("10.1.0.20")}
	setPool(t, e, "pool1", other)
	if got := alloc1(t, e, req("c7", "pool1")); got != "10.1.0.10/24" {
		t.Fatal(got)
	}
	// A subnet overlapping the old one, which still holds allocations:
	// nothing new until they are released.
	overlap := &Block{Network: netip.MustParsePrefix("192.168.0.0/24"), Start: mustAddr("192.168.0.100"), End: mustAddr("192.168.0.110")}
	if ch := setPool(t, e, "pool1", overlap); ch.Blocked == nil {
		t.Fatal("overlapping network set up")
	}
	if _, err := e.Allocate(ctx, req("c8", "pool1")); !errors.Is(err, ipam.ErrUnavailable) {
		t.Fatalf("blocked: %v", err)
	}
	for _, c := range []string{"c2", "c3", "c4"} {
		if err := e.Deallocate(ctx, req(c, "pool1")); err != nil {
			t.Fatal(err)
		}
	}
	if got := alloc1(t, e, req("c8", "pool1")); got != "192.168.0.100/24" {
		t.Fatal(got)
	}
	// The pool goes and its last allocations are released: the network
	// instance is gone too.
	setPool(t, e, "pool1", nil)
	for _, c := range []string{"c7", "c8"} {
		if err := e.Deallocate(ctx, req(c, "pool1")); err != nil {
			t.Fatal(err)
		}
	}
	if len(e.Pools()) != 0 || len(e.Allocator().ListNetworkInstances(ipam.Filter{})) != 0 {
		t.Fatalf("left: %v", e.Pools())
	}
}

// TestRestart: blocks and allocations survive a reopen of the store, and
// an address released outside the block is still not handed out.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	setPool(t, e, "pool1", seedBlock())
	a := alloc1(t, e, req("c1", "pool1"))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir)
	if got := alloc1(t, e, req("c1", "pool1")); got != a {
		t.Fatalf("c1 after restart: %s, was %s", got, a)
	}
	if got := alloc1(t, e, req("c2", "pool1")); got != "192.168.0.26/16" {
		t.Fatal(got)
	}
	res, err := e.Allocate(ctx, req("c2", "pool1"))
	if err != nil || res[0].Gateway.String() != "192.168.0.1" {
		t.Fatalf("gateway after restart: %v %v", res, err)
	}
}

func TestExplicitAddresses(t *testing.T) {
	e := openEngine(t, t.TempDir())
	b := seedBlock()
	b.Gateway = mustAddr("192.168.0.30")
	b.Exclusions = []ipam.AddrRange{{Start: mustAddr("192.168.0.40"), End: mustAddr("192.168.0.41")}}
	setPool(t, e, "pool1", b)
	idx := func(i int32) *int32 { return &i }
	for _, tc := range []struct {
		name    string
		r       *Request
		want    string // address, or an error's sentinel and text
		wantErr error
	}{
		{"requested", &Request{RequestedIPs: []string{"192.168.0.33"}}, "192.168.0.33/16", nil},
		{"requested outside", &Request{RequestedIPs: []string{"192.168.0.49"}}, "192.168.0.49 is not an address of the node's block", ipam.ErrInvalid},
		{"requested excluded", &Request{RequestedIPs: []string{"192.168.0.40"}}, "192.168.0.40 is not an address", ipam.ErrInvalid},
		{"requested elsewhere", &Request{RequestedIPs: []string{"10.0.0.1"}}, "10.0.0.1 is in none of the pools", ipam.ErrInvalid},
		{"requested held", &Request{RequestedIPs: []string{"192.168.0.33"}}, "192.168.0.33", ipam.ErrConflict},
		{"index", &Request{IPWithIndex: idx(3)}, "192.168.0.28/16", nil},
		{"index past", &Request{IPWithIndex: idx(24)}, "24 is past the node's block", ipam.ErrInvalid},
		{"index gateway", &Request{IPWithIndex: idx(5)}, "is the gateway", ipam.ErrInvalid},
		{"gateway", &Request{AllocateDefaultGateway: true}, "192.168.0.30/16", nil},
		{"gateway twice", &Request{AllocateDefaultGateway: true}, "192.168.0.30", ipam.ErrConflict},
		{"dynamic skips the gateway and exclusions", &Request{}, "192.168.0.25/16", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := req(strings.ReplaceAll(tc.name, " ", "-"), "pool1")
			r.RequestedIPs, r.IPWithIndex, r.AllocateDefaultGateway = tc.r.RequestedIPs, tc.r.IPWithIndex, tc.r.AllocateDefaultGateway
			res, err := e.Allocate(context.Background(), r)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want %v naming %q", err, tc.wantErr, tc.want)
				}
				return
			}
			if err != nil || res[0].IP.String() != tc.want {
				t.Fatalf("got %v %v, want %s", res, err, tc.want)
			}
			if r.AllocateDefaultGateway && (res[0].Gateway.IsValid() || len(res[0].Routes) > 0) {
				t.Fatalf("the gateway comes with a gateway: %+v", res[0])
			}
		})
	}
}

// TestDualStackAllOrNothing: a call naming two pools gets both or neither.
func TestDualStackAllOrNothing(t *testing.T) {
	ctx := context.Background()
	e := openEngine(t, t.TempDir())
	setPool(t, e, "v4", seedBlock())
	v6 := &Block{Network: netip.MustParsePrefix("fd00::/64"), Start: mustAddr("fd00::10"), End: mustAddr("fd00::10"), Gateway: mustAddr("fd00::1")}
	setPool(t, e, "v6", v6)
	res, err := e.Allocate(ctx, req("c1", "v4", "v6"))
	if err != nil || res[0].IP.String() != "192.168.0.25/16" || res[1].IP.String() != "fd00::10/64" || res[1].Gateway.String() != "fd00::1" {
		t.Fatalf("%v %v", res, err)
	}
	if _, err := e.Allocate(ctx, req("c2", "v4", "v6")); !errors.Is(err, ipam.ErrExhausted) {
		t.Fatalf("c2: %v", err)
	}
	if err := e.IsAllocated(ctx, req("c2", "v4")); !errors.Is(err, ipam.ErrNotFound) {
		t.Fatalf("c2 holds v4 after a failed dual call: %v", err)
	}
	if err := e.Deallocate(ctx, req("c1", "v4", "v6")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Allocate(ctx, req("c2", "v4", "v6")); err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	long := strings.Repeat("a", 300)
	for _, tc := range []struct {
		name  string
		mod   func(r *Request)
		field string
	}{
		{"ok", func(*Request) {}, ""},
		{"type", func(r *Request) { r.Type = "x" }, "pool_type"},
		{"no pools", func(r *Request) { r.Pools = nil }, "parameters.pools"},
		{"three pools", func(r *Request) { r.Pools = []string{"a", "b", "c"} }, "parameters.pools"},
		{"dup pools", func(r *Request) { r.Pools = []string{"a", "a"} }, "parameters.pools[1]"},
		{"long pool", func(r *Request) { r.Pools = []string{long} }, "parameters.pools[0]"},
		{"control pool", func(r *Request) { r.Pools = []string{"a\x00"} }, "parameters.pools[0]"},
		{"no cid", func(r *Request) { r.ContainerID = "" }, "cni_containerid"},
		{"long cid", func(r *Request) { r.ContainerID = long }, "cni_containerid"},
		{"bad cid", func(r *Request) { r.ContainerID = "a/b" }, "cni_containerid"},
		{"no ifname", func(r *Request) { r.IfName = "" }, "cni_ifname"},
		{"long ifname", func(r *Request) { r.IfName = "0123456789abcdef" }, "cni_ifname"},
		{"slash ifname", func(r *Request) { r.IfName = "a/b" }, "cni_ifname"},
		{"dot ifname", func(r *Request) { r.IfName = ".." }, "cni_ifname"},
		{"long pod", func(r *Request) { r.Pod.Name = long }, "k8s_pod_name"},
		{"long ns", func(r *Request) { r.Pod.Namespace = long[:64] }, "k8s_pod_namespace"},
		{"bad ip", func(r *Request) { r.RequestedIPs = []string{"x"} }, "requested_ips[0]"},
		{"too many ips", func(r *Request) { r.RequestedIPs = []string{"1.1.1.1", "1.1.1.2"} }, "requested_ips"},
		{"negative index", func(r *Request) { i := int32(-1); r.IPWithIndex = &i }, "allocate_ip_with_index"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := req("c1", "pool1")
			tc.mod(r)
			err := r.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ipam.ErrInvalid) || !strings.Contains(err.Error(), tc.field) || len(err.Error()) > 300 {
				t.Fatalf("got %v, want InvalidArgument naming %s", err, tc.field)
			}
		})
	}
}

// FuzzRequest: whatever a caller sends, Validate answers, an accepted
// request is served or refused with a sentinel error, and an error never
// repeats more than a capped part of the input.
func FuzzRequest(f *testing.F) {
	f.Add("pool1", "", "c1", "net1", "pod", "192.168.0.30", int32(-1), false)
	f.Add("pool1", "v6", "c\x00", "eth0/1", "p", "::1", int32(3), true)
	e, err := Open(f.TempDir(), Options{})
	if err != nil {
		f.Fatal(err)
	}
	defer func() { _ = e.Close() }()
	if _, err := e.SetPool(context.Background(), PoolKey{IPPool, "pool1"}, seedBlock()); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, p1, p2, cid, ifname, pod, ip string, idx int32, gw bool) {
		r := &Request{Type: IPPool, Pools: []string{p1}, ContainerID: cid, IfName: ifname, Pod: Pod{Name: pod}, AllocateDefaultGateway: gw}
		if p2 != "" {
			r.Pools = append(r.Pools, p2)
		}
		if ip != "" {
			r.RequestedIPs = []string{ip}
		}
		if idx >= 0 {
			r.IPWithIndex = &idx
		}
		_, err := e.Allocate(context.Background(), r)
		if err == nil {
			_ = e.Deallocate(context.Background(), r)
			return
		}
		known := false
		for _, s := range []error{ipam.ErrInvalid, ipam.ErrNotFound, ipam.ErrConflict, ipam.ErrExhausted} {
			known = known || errors.Is(err, s)
		}
		if !known {
			t.Fatalf("unmapped error %v", err)
		}
		if len(err.Error()) > 2048 {
			t.Fatalf("error of %d bytes", len(err.Error()))
		}
	})
}
