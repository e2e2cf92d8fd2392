package etcd

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/nephio-project/ipam/service/ipam"
)

// TestChanges: the records a reload publishes turn the state before into
// the state after: deletions of what is gone, children first, then puts
// of what is new or changed, in the snapshot's order (parents first).
func TestChanges(t *testing.T) {
	k := func(name string) ipam.Key { return ipam.Key{Owner: "o", Name: name} }
	ni := func(name string) ipam.Record {
		return ipam.Record{Op: ipam.OpPutNetworkInstance, Key: k(name), NetworkInstance: &ipam.NetworkInstance{Key: k(name)}}
	}
	pfx := func(name, p string) ipam.Record {
		return ipam.Record{Op: ipam.OpPutPrefix, Key: k(name), Prefix: &ipam.Prefix{Key: k(name), NetworkInstance: "v", Prefix: netip.MustParsePrefix(p)}}
	}
	alloc := func(name, p string) ipam.Record {
		return ipam.Record{Op: ipam.OpPutAllocation, Key: k(name), Allocation: &ipam.AllocationRecord{
			Allocation: ipam.Allocation{Key: k(name)}, Result: ipam.Result{NetworkInstance: "v", Prefix: netip.MustParsePrefix(p)}}}
	}
	rng := func(name string) ipam.Record {
		return ipam.Record{Op: ipam.OpPutRange, Key: k(name), Range: &ipam.IPRange{Key: k(name), NetworkInstance: "v"}}
	}
	del := func(op ipam.Op, name string) ipam.Record { return ipam.Record{Op: op, Key: k(name)} }
	owner := func(name, id string) ipam.Record {
		return ipam.Record{Op: ipam.OpPutOwner, Key: ipam.Key{Owner: name}, Owner: &ipam.OwnerInfo{Identity: id}}
	}
	for _, tc := range []struct {
		name          string
		before, after []ipam.Record
		want          []ipam.Record
	}{
		{"nothing changed", []ipam.Record{ni("v"), pfx("p", "10.0.0.0/24"), alloc("a", "10.0.0.1/24")},
			[]ipam.Record{ni("v"), pfx("p", "10.0.0.0/24"), alloc("a", "10.0.0.1/24")}, nil},
		{"from nothing", nil, []ipam.Record{ni("v"), pfx("p", "10.0.0.0/24")}, []ipam.Record{ni("v"), pfx("p", "10.0.0.0/24")}},
		{"to nothing, children first", []ipam.Record{ni("v"), pfx("p", "10.0.0.0/24"), rng("r"), alloc("a", "10.0.0.1/24")}, nil,
			[]ipam.Record{del(ipam.OpDeleteAllocation, "a"), del(ipam.OpDeleteRange, "r"), del(ipam.OpDeletePrefix, "p"), del(ipam.OpDeleteNetworkInstance, "v")}},
		{"moved, added, released", []ipam.Record{ni("v"), pfx("p", "10.0.0.0/24"), alloc("a", "10.0.0.1/24"), alloc("b", "10.0.0.2/24")},
			[]ipam.Record{ni("v"), pfx("p", "10.0.0.0/24"), alloc("a", "10.0.0.3/24"), alloc("c", "10.0.0.2/24")},
			[]ipam.Record{del(ipam.OpDeleteAllocation, "b"), alloc("a", "10.0.0.3/24"), alloc("c", "10.0.0.2/24")}},
		{"owner bound, rebound, forgotten", []ipam.Record{owner("o1", "id-1"), owner("o2", "id-2"), ni("v")},
			[]ipam.Record{owner("o1", "id-3"), ni("v")},
			[]ipam.Record{{Op: ipam.OpDeleteOwner, Key: ipam.Key{Owner: "o2"}}, owner("o1", "id-3")}},
		{"a prefix and an allocation of one name", []ipam.Record{pfx("x", "10.0.0.0/24")}, []ipam.Record{alloc("x", "10.0.0.1/24")},
			[]ipam.Record{del(ipam.OpDeletePrefix, "x"), alloc("x", "10.0.0.1/24")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := changes(tc.before, tc.after)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := render(got), render(tc.want); g != w {
				t.Fatalf("changes:\n%s\nwant\n%s", g, w)
			}
		})
	}
}

func render(recs []ipam.Record) string {
	var out string
	for _, r := range recs {
		out += fmt.Sprintf("%s %s", r.Op, r.Key)
		if r.Allocation != nil {
			out += " " + r.Allocation.Result.Prefix.String()
		}
		out += "\n"
	}
	return out
}
