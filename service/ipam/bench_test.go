package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
)

// benchVRF builds vpc-1 with aggregate 10.0.0.0/8 holding n network /24s,
// each with its own network name and a shared site label.
func benchVRF(b *testing.B, n int) *Allocator {
	b.Helper()
	a := New()
	req := SyncRequest{Owner: "bench", NetworkInstances: []NetworkInstance{{Key: Key{Name: "vpc-1"}, Prefixes: []VRFPrefix{{Prefix: mustPrefix("10.0.0.0/8")}}}}}
	for i := range n {
		req.Prefixes = append(req.Prefixes, Prefix{Key: Key{Name: fmt.Sprintf("net-%d", i)}, NetworkInstance: "vpc-1",
			Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24), Network: fmt.Sprintf("net-%d", i),
			Labels: Labels{"site": fmt.Sprintf("s%d", i%100)}})
	}
	if _, err := a.Sync(context.Background(), req); err != nil {
		b.Fatal(err)
	}
	return a
}

// BenchmarkW3Select: the selector match of an address request among 10,000
// labelled network prefixes, answered from the label index.
func BenchmarkW3Select(b *testing.B) {
	a := benchVRF(b, 10_000)
	v := a.vrfs["vpc-1"]
	sel := Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net-4711", "site": "s11"}
	b.ReportAllocs()
	for b.Loop() {
		var buf [8]labelPair
		tm := terms(buf[:0], sel, labelPair{LabelPrefixKind, string(KindNetwork)}, labelPair{LabelAddressFamily, string(IPv4)})
		got := v.index.match(tm, func(e *entry) bool { return e.node != nil && e.node.isBitmap() })
		if len(got) != 1 {
			b.Fatalf("matched %d", len(got))
		}
	}
}

// BenchmarkAllocateRelease: the whole core path of one dynamic address
// (normalize, select, place, record, release) in a /16 network.
func BenchmarkAllocateRelease(b *testing.B) {
	a := New()
	_, err := a.Sync(context.Background(), SyncRequest{Owner: "bench", NetworkInstances: []NetworkInstance{{Key: Key{Name: "v"}, Prefixes: []VRFPrefix{{Prefix: mustPrefix("10.0.0.0/8")}}}},
		Prefixes: []Prefix{{Key: Key{Name: "n"}, NetworkInstance: "v", Prefix: mustPrefix("10.1.0.1/16"), Network: "n", Labels: Labels{LabelGateway: "true"}}}})
	if err != nil {
		b.Fatal(err)
	}
	sel := Labels{LabelNetworkInstance: "v", LabelNetworkName: "n"}
	for i := range 30_000 { // a network half full
		if _, err := a.Allocate(context.Background(), Allocation{Key: Key{Owner: "o", Name: fmt.Sprint(i)}, Selector: sel}); err != nil {
			b.Fatal(err)
		}
	}
	r := Allocation{Key: Key{Owner: "o", Name: "x"}, Selector: sel}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Allocate(context.Background(), r); err != nil {
			b.Fatal(err)
		}
		if err := a.Release(context.Background(), r.Key); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkW4SyncAddrsPerSec: the in-memory part of a Sync of a 10,000
// address package; reports addresses per second.
func BenchmarkW4SyncAddrsPerSec(b *testing.B) {
	a := New()
	_, err := a.Sync(context.Background(), SyncRequest{Owner: "infra", NetworkInstances: []NetworkInstance{{Key: Key{Name: "v"}, Prefixes: []VRFPrefix{{Prefix: mustPrefix("10.0.0.0/8")}}}},
		Prefixes: []Prefix{{Key: Key{Name: "n"}, NetworkInstance: "v", Prefix: mustPrefix("10.1.0.1/16"), Network: "n", Labels: Labels{LabelGateway: "true"}}}})
	if err != nil {
		b.Fatal(err)
	}
	const n = 10_000
	req := SyncRequest{Owner: "pkg", Prune: true}
	sel := Labels{LabelNetworkInstance: "v", LabelNetworkName: "n"}
	for i := range n {
		req.Allocations = append(req.Allocations, Allocation{Key: Key{Namespace: "ns", Name: fmt.Sprintf("a%05d", i)}, Selector: sel})
	}
	empty := SyncRequest{Owner: "pkg", Prune: true}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Sync(context.Background(), req); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if _, err := a.Sync(context.Background(), empty); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "addrs/s")
}
