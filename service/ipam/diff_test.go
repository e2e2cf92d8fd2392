package ipam

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// refAllocator is a naive reference for the dynamic rules: lowest free
// address of one network, and best fit (smallest maximal free aligned
// block, lowest address) of pool prefixes in one aggregate, by brute force.
type refAllocator struct {
	network netip.Prefix
	usedIP  map[netip.Addr]string
	agg     netip.Prefix
	pools   map[string]netip.Prefix
	ips     map[string]netip.Addr
}

func (r *refAllocator) alloc(name string) (netip.Addr, bool) {
	if a, ok := r.ips[name]; ok {
		return a, true
	}
	first := r.network.Addr().Next()
	last := lastAddr(r.network)
	for a := first; a.Less(last); a = a.Next() {
		if _, used := r.usedIP[a]; !used && !(r.network.Contains(a) && r.inPool(a)) {
			r.usedIP[a] = name
			r.ips[name] = a
			return a, true
		}
	}
	return netip.Addr{}, false
}

func (r *refAllocator) inPool(a netip.Addr) bool {
	for _, p := range r.pools {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (r *refAllocator) free(p netip.Prefix) bool {
	if p.Overlaps(r.network) {
		return false
	}
	for _, q := range r.pools {
		if q.Overlaps(p) {
			return false
		}
	}
	return true
}

func (r *refAllocator) pool(name string, bits int) (netip.Prefix, bool) {
	if p, ok := r.pools[name]; ok {
		if p.Bits() == bits {
			return p, true
		}
		// Rule 8: a changed request gets its new result while the old one
		// is still held, then the old one is released.
		p, ok := r.pool(name+"\x00new", bits)
		if ok {
			r.pools[name] = p
			delete(r.pools, name+"\x00new")
		}
		return p, ok
	}
	// Maximal free aligned blocks: free, and the whole aggregate or a block
	// whose parent is not free.
	var best netip.Prefix
	found := false
	for l := r.agg.Bits(); l <= bits; l++ {
		step := uint64(1) << uint(32-l)
		base, _ := offsetOf(netip.IPv4Unspecified(), r.agg.Addr())
		for off := uint64(0); off < sizeOf(r.agg); off += step {
			p := netip.PrefixFrom(addOffset(netip.IPv4Unspecified(), base+off), l)
			if !r.free(p) {
				continue
			}
			parent, _ := p.Addr().Prefix(l - 1)
			if l > r.agg.Bits() && r.free(parent) {
				continue
			}
			if !found || l > best.Bits() || (l == best.Bits() && p.Addr().Less(best.Addr())) {
				best, found = p, true
			}
		}
	}
	if !found {
		return netip.Prefix{}, false
	}
	p := netip.PrefixFrom(best.Addr(), bits)
	r.pools[name] = p
	return p, true
}

func (r *refAllocator) release(name string) {
	if a, ok := r.ips[name]; ok {
		delete(r.usedIP, a)
		delete(r.ips, name)
	}
	delete(r.pools, name)
}

// TestDifferentialAgainstReference drives the core and the reference with
// the same random operations and requires identical answers.
func TestDifferentialAgainstReference(t *testing.T) {
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 42))
		a := New()
		_, err := a.Sync(context.Background(), SyncRequest{Owner: "infra", NetworkInstances: []NetworkInstance{{Key: Key{Name: "v"}, Prefixes: []VRFPrefix{{Prefix: mustPrefix("10.0.0.0/22")}}}},
			Prefixes: []Prefix{{Key: Key{Name: "net"}, NetworkInstance: "v", Prefix: mustPrefix("10.0.0.64/26"), Network: "net"}}})
		if err != nil {
			t.Fatal(err)
		}
		ref := &refAllocator{network: mustPrefix("10.0.0.64/26"), usedIP: map[netip.Addr]string{}, agg: mustPrefix("10.0.0.0/22"),
			pools: map[string]netip.Prefix{}, ips: map[string]netip.Addr{}}
		names := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p"}
		for step := range 3000 {
			name := names[rng.IntN(len(names))]
			addrKey, poolKey := Key{Owner: "x", Name: "ip-" + name}, Key{Owner: "x", Name: "pool-" + name}
			switch rng.IntN(4) {
			case 0, 1:
				want, ok := ref.alloc(addrKey.Name)
				got, err := a.Allocate(context.Background(), Allocation{Key: addrKey, Selector: Labels{LabelNetworkInstance: "v", LabelNetworkName: "net"}})
				if ok != (err == nil) || (ok && got.Prefix != netip.PrefixFrom(want, 26)) {
					t.Fatalf("seed %d step %d alloc %s: core %v %v, reference %v %v", seed, step, name, got.Prefix, err, want, ok)
				}
			case 2:
				bits := 24 + rng.IntN(7)
				want, ok := ref.pool(poolKey.Name, bits)
				got, err := a.Allocate(context.Background(), Allocation{Key: poolKey, Kind: KindPool, PrefixLength: bits, Selector: Labels{LabelNetworkInstance: "v"}})
				if ok != (err == nil) || (ok && got.Prefix != want) {
					t.Fatalf("seed %d step %d pool /%d %s: core %v %v, reference %v %v (pools %v)\n%s", seed, step, bits, name, got.Prefix, err, want, ok, ref.pools, dump(a))
				}
			default:
				ref.release(addrKey.Name)
				ref.release(poolKey.Name)
				_ = a.Release(context.Background(), addrKey)
				_ = a.Release(context.Background(), poolKey)
			}
		}
		var got []string
		for _, r := range a.ListAllocations(Filter{}) {
			got = append(got, r.Result.Prefix.String())
		}
		var want []string
		for _, ip := range ref.ips {
			want = append(want, netip.PrefixFrom(ip, 26).String())
		}
		for _, p := range ref.pools {
			want = append(want, p.String())
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: final state differs:\n core %v\n  ref %v", seed, got, want)
		}
	}
}
