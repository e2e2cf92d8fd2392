package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
)

// fuzzBase is a small VRF the fuzzer mutates: aggregate 10.0.0.0/20 with
// networks net0 (10.0.0.0/27) and net1 (10.0.1.1/28, gateway).
func fuzzBase(t testing.TB) *Allocator {
	a := New()
	_, err := a.Sync(context.Background(), SyncRequest{Owner: "infra", NetworkInstances: []NetworkInstance{{Key: Key{Name: "v"}, Prefixes: []VRFPrefix{{Prefix: mustPrefix("10.0.0.0/20")}}}},
		Prefixes: []Prefix{
			{Key: Key{Name: "net0"}, NetworkInstance: "v", Prefix: mustPrefix("10.0.0.0/27"), Network: "net0"},
			{Key: Key{Name: "net1"}, NetworkInstance: "v", Prefix: mustPrefix("10.0.1.1/28"), Network: "net1", Labels: Labels{LabelGateway: "true"}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// fuzzOp decodes one operation from three bytes and runs it.
func fuzzOp(a *Allocator, op, x, y byte) (string, error) {
	k := Key{Owner: fmt.Sprintf("o%d", x%2), Namespace: "ns", Name: fmt.Sprintf("k%d", x%12)}
	net := Labels{LabelNetworkInstance: "v", LabelNetworkName: fmt.Sprintf("net%d", y%3)}
	switch op % 10 {
	case 0:
		_, err := a.Allocate(context.Background(), Allocation{Key: k, Selector: net})
		return "alloc " + k.Name, err
	case 1:
		return "release " + k.Name, a.Release(context.Background(), k)
	case 2:
		_, err := a.Allocate(context.Background(), Allocation{Key: k, Kind: KindPool, PrefixLength: 24 + int(y%8), Selector: Labels{LabelNetworkInstance: "v"}})
		return "pool " + k.Name, err
	case 3:
		if y%4 == 3 {
			// net1 lets blocks contain its gateway, or not.
			_, err := a.CreatePrefix(context.Background(), Prefix{Key: Key{Owner: "infra", Name: "net1"}, NetworkInstance: "v",
				Prefix: mustPrefix("10.0.1.1/28"), Network: "net1", Labels: Labels{LabelGateway: "true"}, GatewayInBlocks: x%2 == 1})
			return "net1 gateway in blocks", err
		}
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 2 + y%4, (x % 4) * 64}), 26+int(x%3))
		_, err := a.CreatePrefix(context.Background(), Prefix{Key: Key{Owner: "infra", Name: fmt.Sprintf("n%d", y%4)}, NetworkInstance: "v", Prefix: p,
			Network: fmt.Sprintf("net%d", y%3), AllocateReserved: x&8 != 0})
		return "prefix " + p.String(), err
	case 4:
		return "delprefix", a.DeletePrefix(context.Background(), Key{Owner: "infra", Name: fmt.Sprintf("n%d", y%4)})
	case 5:
		// A batch with, when y is odd, one bad item.
		req := SyncRequest{Owner: k.Owner, Prune: x%3 == 0, Allocations: []Allocation{
			{Key: Key{Namespace: "ns", Name: fmt.Sprintf("k%d", y%12)}, Selector: net},
			{Key: Key{Namespace: "ns", Name: fmt.Sprintf("k%d", (y+1)%12)}, Kind: KindPool, PrefixLength: 28, Selector: Labels{LabelNetworkInstance: "v"}},
		}}
		if y%2 == 1 {
			req.Allocations = append(req.Allocations, Allocation{Key: Key{Namespace: "ns", Name: "bad"}, PrefixLength: 99, Kind: KindPool, Selector: net})
		}
		_, err := a.Sync(context.Background(), req)
		return "sync", err
	case 6:
		_, err := a.Allocate(context.Background(), Allocation{Key: k, Selector: net, Count: 2 + int(y%5)})
		return "block " + k.Name, err
	case 7:
		r := IPRange{Key: Key{Owner: "infra", Name: fmt.Sprintf("r%d", y%2)}, NetworkInstance: "v",
			Start: netip.AddrFrom4([4]byte{10, 0, 0, 4 + x%8}), End: netip.AddrFrom4([4]byte{10, 0, 0, 12 + x%8}),
			Labels: Labels{"range": fmt.Sprint(y % 2)}, PreAllocations: map[string]netip.Addr{"k3": netip.AddrFrom4([4]byte{10, 0, 0, 12})}}
		if y%3 == 1 {
			// Overlapping exclusions, merged.
			r.Exclusions = []AddrRange{{netip.AddrFrom4([4]byte{10, 0, 0, 13}), netip.AddrFrom4([4]byte{10, 0, 0, 14})},
				{netip.AddrFrom4([4]byte{10, 0, 0, 14}), netip.AddrFrom4([4]byte{10, 0, 0, 15})}}
		}
		if x&16 != 0 {
			// From the network address, which it may hand out.
			r.Start, r.AllocateReserved = netip.AddrFrom4([4]byte{10, 0, 0, 0}), true
		}
		if y%3 == 2 {
			// Its own length (invalid when the range crosses its /28)
			// and a gateway inside it.
			r.PrefixLength, r.Gateway = 28, netip.AddrFrom4([4]byte{10, 0, 0, 11 + x%2})
		}
		if x%5 == 0 {
			return "delrange", a.DeleteRange(context.Background(), r.Key)
		}
		return "range", a.CreateRange(context.Background(), r)
	case 8:
		_, err := a.Allocate(context.Background(), Allocation{Key: k, Selector: Labels{LabelNetworkInstance: "v", "range": fmt.Sprint(y % 2)}})
		return "range-alloc " + k.Name, err
	default:
		// An explicit address, checked against a range or network selector.
		sel := net
		if y%2 == 0 {
			sel = Labels{LabelNetworkInstance: "v", "range": fmt.Sprint(y / 2 % 2)}
		}
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, x % 32}), 27)
		_, err := a.Allocate(context.Background(), Allocation{Key: k, Prefix: p, Selector: sel})
		return "explicit " + p.String() + " " + k.Name, err
	}
}

// FuzzAllocator runs random operation sequences and checks, after each:
// the structural invariants (no two holders of an address, nothing outside
// its parent, counts consistent), that a failed operation changed nothing,
// and at the end that releasing everything restores every network's
// capacity and that a snapshot restores the same state.
func FuzzAllocator(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 2, 1, 2, 3, 4, 1, 5, 0})
	f.Add([]byte{5, 3, 1, 5, 4, 0, 2, 2, 2, 6, 1, 1, 7, 1, 0, 8, 2, 0})
	f.Add([]byte{3, 0, 0, 0, 0, 0, 4, 0, 0, 7, 2, 1, 8, 3, 1, 8, 4, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 300 {
			data = data[:300]
		}
		a := fuzzBase(t)
		for i := 0; i+2 < len(data); i += 3 {
			before := dump(a)
			what, err := fuzzOp(a, data[i], data[i+1], data[i+2])
			if err != nil {
				if after := dump(a); after != before {
					t.Fatalf("%s failed (%v) but changed the state:\n%s\n---\n%s", what, err, before, after)
				}
			}
			checkInvariants(t, a)
		}
		b := New()
		if err := b.Apply(a.Snapshot(nil)); err != nil {
			t.Fatalf("restore: %v", err)
		}
		if dump(a) != dump(b) {
			t.Fatalf("restore differs")
		}
		// Release every allocation, children first, then check capacity.
		for range 4 {
			for _, r := range a.ListAllocations(Filter{}) {
				_ = a.Release(context.Background(), r.Allocation.Key)
			}
			for i := range 4 {
				_ = a.DeletePrefix(context.Background(), Key{Owner: "infra", Name: fmt.Sprintf("n%d", i)})
			}
			for i := range 2 {
				_ = a.DeleteRange(context.Background(), Key{Owner: "infra", Name: fmt.Sprintf("r%d", i)})
			}
		}
		// net1 back to its base declaration (blocks may have contained its
		// gateway); with every block released this always succeeds.
		if _, err := a.CreatePrefix(context.Background(), Prefix{Key: Key{Owner: "infra", Name: "net1"}, NetworkInstance: "v",
			Prefix: mustPrefix("10.0.1.1/28"), Network: "net1", Labels: Labels{LabelGateway: "true"}}); err != nil {
			t.Fatalf("net1 back to its base: %v", err)
		}
		if left := a.ListAllocations(Filter{}); len(left) > 0 {
			for _, r := range left {
				t.Logf("left: %+v: %v", r, a.Release(context.Background(), r.Allocation.Key))
			}
			t.Fatalf("%d allocations could not be released", len(left))
		}
		if after, base := dump(a), dump(fuzzBase(t)); after != base {
			t.Fatalf("releasing everything did not restore the initial state:\n%s\n---\n%s", after, base)
		}
	})
}
