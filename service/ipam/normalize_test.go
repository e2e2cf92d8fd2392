package ipam

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"
)

// TestNormalizeFastPath: for every combination of the fields its fast
// path looks at, normalizeAlloc leaves the same request and error as the
// full check.
func TestNormalizeFastPath(t *testing.T) {
	names := []string{"", "a", string(make([]byte, MaxNameLength+1))}
	kinds := []Kind{"", KindNetwork, KindLoopback, KindPool, KindAggregate, "bogus"}
	families := []Family{"", IPv4, IPv6, "ipv5"}
	nis := []string{"", "vpc-1", "vpc-2"}
	sels := []Labels{nil, {LabelNetworkName: "n"}, {LabelNetworkInstance: "vpc-1"}, {LabelNetworkInstance: "vpc-1", LabelNetworkName: "n"}}
	prefixes := []netip.Prefix{{}, netip.MustParsePrefix("10.0.0.5/24")}
	lengths := []int{0, 24, 32, 129}
	counts := []int{0, 1, 4}
	n := 0
	for _, name := range names {
		for _, kind := range kinds {
			for _, f := range families {
				for _, ni := range nis {
					for _, sel := range sels {
						for _, p := range prefixes {
							for _, l := range lengths {
								for _, c := range counts {
									r := Allocation{Key: Key{Owner: "o", Namespace: "ns", Name: name}, Kind: kind, AddressFamily: f, NetworkInstance: ni,
										Selector: sel, Prefix: p, PrefixLength: l, Count: c}
									fast, full := r, r
									errFast, errFull := normalizeAlloc(&fast), checkAlloc(&full)
									if !reflect.DeepEqual(fast, full) || fmt.Sprint(errFast) != fmt.Sprint(errFull) {
										t.Fatalf("%+v:\nnormalizeAlloc %+v, %v\ncheckAlloc     %+v, %v", r, fast, errFast, full, errFull)
									}
									n++
								}
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d requests agree", n)
}
