package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/store/file"
)

var (
	prefixKind = ipamv1.ObjectKind_OBJECT_KIND_PREFIX
	allocKind  = ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION
	niKind     = ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE
	rangeKind  = ipamv1.ObjectKind_OBJECT_KIND_RANGE
)

func alloc1() *ipamv1.Allocation {
	return &ipamv1.Allocation{Key: key("alloc1"), Kind: "network",
		Selector: map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net1"}}
}

// TestEveryRPC walks every unary RPC through a real server: create, get,
// list, tree, allocate, release and delete of every kind.
func TestEveryRPC(t *testing.T) {
	c := startServer(t, server.Config{}).Client(t)
	ctx := context.Background()
	seed(t, c)

	res, err := c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: alloc1()})
	must(t, err)
	want := &ipamv1.Result{NetworkInstance: "vpc-1", Prefix: "10.0.1.2/24", Gateway: "10.0.1.1"}
	if !proto.Equal(res.GetResult(), want) {
		t.Fatalf("Allocate = %v, want %v", res.GetResult(), want)
	}
	again, err := c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: alloc1()})
	must(t, err)
	if !proto.Equal(again.GetResult(), want) {
		t.Fatalf("Allocate again = %v, want the same %v", again.GetResult(), want)
	}

	_, err = c.CreateRange(ctx, &ipamv1.CreateRangeRequest{Range: &ipamv1.IPRange{Key: key("r1"), NetworkInstance: "vpc-1",
		Start: "10.0.1.100", End: "10.0.1.110", Labels: map[string]string{"pool": "metal3"},
		PreAllocations: map[string]string{"host-a": "10.0.1.105"}}})
	must(t, err)
	got, err := c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key("host-a"),
		Selector: map[string]string{"nephio.org/network-instance": "vpc-1", "pool": "metal3"}}})
	must(t, err)
	if got.GetResult().GetPrefix() != "10.0.1.105/24" {
		t.Fatalf("pre-allocated address = %v, want 10.0.1.105/24", got.GetResult())
	}

	pool, err := c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key("pool1"), Kind: "pool", PrefixLength: 16,
		Selector: map[string]string{"nephio.org/network-instance": "vpc-1"}}})
	must(t, err)
	if pool.GetResult().GetPrefix() != "10.1.0.0/16" {
		t.Fatalf("pool = %v, want 10.1.0.0/16", pool.GetResult())
	}

	// Get every kind.
	for _, tc := range []struct {
		kind ipamv1.ObjectKind
		key  *ipamv1.Key
		want *ipamv1.Object
	}{
		{niKind, &ipamv1.Key{Name: "vpc-1"}, &ipamv1.Object{Object: &ipamv1.Object_NetworkInstance{NetworkInstance: &ipamv1.NetworkInstance{Key: key("vpc-1")}}}},
		{prefixKind, key("net1-prefix1"), &ipamv1.Object{Object: &ipamv1.Object_Prefix{Prefix: &ipamv1.PrefixRecord{
			Prefix: &ipamv1.Prefix{Key: key("net1-prefix1"), NetworkInstance: "vpc-1", Kind: "network", Prefix: "10.0.1.1/24", Network: "net1",
				Labels: map[string]string{"nephio.org/gateway": "true"}},
			Result: &ipamv1.Result{NetworkInstance: "vpc-1", Prefix: "10.0.1.1/24", Gateway: "10.0.1.1"}}}}},
		{rangeKind, key("r1"), &ipamv1.Object{Object: &ipamv1.Object_Range{Range: &ipamv1.IPRange{Key: key("r1"), NetworkInstance: "vpc-1",
			Start: "10.0.1.100", End: "10.0.1.110", Labels: map[string]string{"pool": "metal3"}, PreAllocations: map[string]string{"host-a": "10.0.1.105"}}}}},
		{allocKind, &ipamv1.Key{Namespace: "default", Name: "alloc1"}, &ipamv1.Object{Object: &ipamv1.Object_Allocation{Allocation: &ipamv1.AllocationRecord{
			Allocation: &ipamv1.Allocation{Key: key("alloc1"), NetworkInstance: "vpc-1", Kind: "network", AddressFamily: "",
				Selector: map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net1"}},
			Result: want}}}},
	} {
		resp, err := c.Get(ctx, &ipamv1.GetRequest{Kind: tc.kind, Key: tc.key})
		must(t, err)
		if !proto.Equal(tc.want, resp.GetObject()) {
			t.Errorf("Get %s %s =\n%v\nwant\n%v", tc.kind, tc.key.GetName(), resp.GetObject(), tc.want)
		}
	}

	// List every kind, with filters.
	for _, tc := range []struct {
		req  *ipamv1.ListRequest
		want []string
	}{
		{&ipamv1.ListRequest{Kind: niKind}, []string{"vpc-1"}},
		{&ipamv1.ListRequest{Kind: prefixKind}, []string{"aggregate0", "net1-prefix1"}},
		{&ipamv1.ListRequest{Kind: prefixKind, Labels: map[string]string{"nephio.org/gateway": "true"}}, []string{"net1-prefix1"}},
		{&ipamv1.ListRequest{Kind: prefixKind, NetworkInstance: "vpc-2"}, nil},
		{&ipamv1.ListRequest{Kind: rangeKind, NetworkInstance: "vpc-1"}, []string{"r1"}},
		{&ipamv1.ListRequest{Kind: allocKind, Owner: "test"}, []string{"alloc1", "host-a", "pool1"}},
		{&ipamv1.ListRequest{Kind: allocKind, Owner: "someone-else"}, nil},
	} {
		resp, err := c.List(ctx, tc.req)
		must(t, err)
		if got := names(resp.GetObjects()); !slices.Equal(got, tc.want) {
			t.Errorf("List %v = %v, want %v", tc.req, got, tc.want)
		}
	}

	tree, err := c.Tree(ctx, &ipamv1.TreeRequest{NetworkInstance: "vpc-1"})
	must(t, err)
	var lines []string
	for _, n := range tree.GetNodes() {
		lines = append(lines, fmt.Sprintf("%d %s %s %s %d/%d", n.GetDepth(), n.GetPrefix(), n.GetKind(), n.GetName(), n.GetUsed(), n.GetTotal()))
	}
	wantTree := []string{
		"0 10.0.0.0/8 aggregate default/aggregate0 65792/16777216",
		"1 10.0.1.0/24 network default/net1-prefix1 5/256", // .0 .255 reserved, .1 gateway, .2 alloc1, .105 host-a
		"1 10.1.0.0/16 pool default/pool1 0/65536",
	}
	if !slices.Equal(lines, wantTree) {
		t.Errorf("Tree =\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(wantTree, "\n"))
	}

	// Release and delete everything, children first.
	for _, step := range []struct {
		name string
		err  error
	}{
		{"release alloc1", call(c.Release(ctx, &ipamv1.DeleteRequest{Key: key("alloc1")}))},
		{"release host-a", call(c.Release(ctx, &ipamv1.DeleteRequest{Key: key("host-a")}))},
		{"release pool1", call(c.Release(ctx, &ipamv1.DeleteRequest{Key: key("pool1")}))},
		{"delete r1", call(c.DeleteRange(ctx, &ipamv1.DeleteRequest{Key: key("r1")}))},
		{"delete net1-prefix1", call(c.DeletePrefix(ctx, &ipamv1.DeleteRequest{Key: key("net1-prefix1")}))},
		{"delete aggregate0", call(c.DeletePrefix(ctx, &ipamv1.DeleteRequest{Key: key("aggregate0")}))},
		{"delete vpc-1", call(c.DeleteNetworkInstance(ctx, &ipamv1.DeleteRequest{Key: key("vpc-1")}))},
	} {
		if step.err != nil {
			t.Fatalf("%s: %v", step.name, step.err)
		}
	}
	for _, k := range []ipamv1.ObjectKind{niKind, prefixKind, rangeKind, allocKind} {
		resp, err := c.List(ctx, &ipamv1.ListRequest{Kind: k})
		must(t, err)
		if len(resp.GetObjects()) != 0 {
			t.Errorf("List %s after deleting everything = %v", k, names(resp.GetObjects()))
		}
	}
}

// TestErrorCodes checks every error code with its message and the
// SyncFailure detail naming the object and field.
func TestErrorCodes(t *testing.T) {
	c := startServer(t, server.Config{}).Client(t)
	ctx := context.Background()
	seed(t, c)
	_, err := c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: alloc1()})
	must(t, err)
	// A /30 network with two usable addresses, both taken.
	_, err = c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("tiny"), NetworkInstance: "vpc-1",
		Prefix: "10.0.2.0/30", Network: "tiny"}})
	must(t, err)
	tiny := func(name string) *ipamv1.AllocateRequest {
		return &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key(name),
			Selector: map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "tiny"}}}
	}
	must(t, call(c.Allocate(ctx, tiny("t1"))))
	must(t, call(c.Allocate(ctx, tiny("t2"))))

	type item struct {
		object, name, field string
		code                codes.Code
	}
	for _, tc := range []struct {
		name string
		call func() error
		code codes.Code
		msg  string
		item *item // the one SyncFailure item, nil: no detail
	}{
		{
			name: "malformed prefix",
			call: func() error {
				return call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("net1"), NetworkInstance: "vpc-1", Prefix: "10.0.1.1/33"}}))
			},
			code: codes.InvalidArgument,
			msg:  `IPPrefix default/net1: spec.prefix: "10.0.1.1/33" is not a prefix`,
			item: &item{"IPPrefix", "net1", "spec.prefix", codes.InvalidArgument},
		},
		{
			name: "address without length",
			call: func() error {
				return call(c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key("a"), NetworkInstance: "vpc-1", Prefix: "10.0.1.9"}}))
			},
			code: codes.InvalidArgument,
			msg:  `IPAllocation default/a: spec.prefix: "10.0.1.9" is not a prefix (write it with a length, e.g. 10.0.1.9/32)`,
			item: &item{"IPAllocation", "a", "spec.prefix", codes.InvalidArgument},
		},
		{
			name: "malformed range address",
			call: func() error {
				return call(c.CreateRange(ctx, &ipamv1.CreateRangeRequest{Range: &ipamv1.IPRange{Key: key("r"), NetworkInstance: "vpc-1", Start: "10.0.1.300", End: "10.0.1.5"}}))
			},
			code: codes.InvalidArgument,
			msg:  `IPRange default/r: spec.start: "10.0.1.300" is not an IP address`,
			item: &item{"IPRange", "r", "spec.start", codes.InvalidArgument},
		},
		{
			name: "prefix length too long (core)",
			call: func() error {
				return call(c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key("n3"), NetworkInstance: "vpc-1", PrefixLength: 33, AddressFamily: "ipv4"}}))
			},
			code: codes.InvalidArgument,
			msg:  "IPAllocation default/n3: spec.prefixLength: 33 exceeds /32",
			item: &item{"IPAllocation", "n3", "spec.prefixLength", codes.InvalidArgument},
		},
		{
			name: "empty name",
			call: func() error {
				return call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key(""), NetworkInstance: "vpc-1", Prefix: "10.0.3.0/24"}}))
			},
			code: codes.InvalidArgument,
			msg:  "IPPrefix default/: metadata.name: a name is required",
			item: &item{"IPPrefix", "", "metadata.name", codes.InvalidArgument},
		},
		{
			name: "empty name on delete",
			call: func() error { return call(c.Release(ctx, &ipamv1.DeleteRequest{Key: &ipamv1.Key{Owner: "test"}})) },
			code: codes.InvalidArgument,
			msg:  "IPAllocation: metadata.name: a name is required",
			item: &item{"IPAllocation", "", "metadata.name", codes.InvalidArgument},
		},
		{
			name: "missing object",
			call: func() error { return call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{})) },
			code: codes.InvalidArgument,
			msg:  "prefix: is required",
		},
		{
			name: "unknown kind in Get",
			call: func() error { return call(c.Get(ctx, &ipamv1.GetRequest{Key: key("x")})) },
			code: codes.InvalidArgument,
			msg:  "kind: OBJECT_KIND_UNSPECIFIED is not an object kind",
		},
		{
			name: "Sync without owner",
			call: func() error { return call(c.Sync(ctx, &ipamv1.SyncRequest{})) },
			code: codes.InvalidArgument,
			msg:  "owner: an owner is required (the kpt package or controller that declares the objects)",
		},
		{
			name: "bad page token",
			call: func() error { return call(c.List(ctx, &ipamv1.ListRequest{Kind: allocKind, PageToken: "!!"})) },
			code: codes.InvalidArgument,
			msg:  "page_token: malformed; pass the next_page_token of the previous response",
		},
		{
			name: "selector matches nothing",
			call: func() error {
				return call(c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key("n9"),
					Selector: map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net9"}}}))
			},
			code: codes.NotFound,
			msg:  "IPAllocation default/n9: spec.selector: selector {nephio.org/network-instance=vpc-1, nephio.org/network-name=net9} matches no network prefix in network instance vpc-1",
			item: &item{"IPAllocation", "n9", "spec.selector", codes.NotFound},
		},
		{
			name: "missing network instance",
			call: func() error {
				return call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("p"), NetworkInstance: "vpc-9", Prefix: "10.0.0.0/24"}}))
			},
			code: codes.NotFound,
			msg:  `IPPrefix default/p: spec.networkInstance: network instance "vpc-9" not found`,
			item: &item{"IPPrefix", "p", "spec.networkInstance", codes.NotFound},
		},
		{
			name: "get missing",
			call: func() error { return call(c.Get(ctx, &ipamv1.GetRequest{Kind: allocKind, Key: key("nope")})) },
			code: codes.NotFound,
			msg:  "IPAllocation default/nope: not found",
			item: &item{"IPAllocation", "nope", "", codes.NotFound},
		},
		{
			name: "address taken",
			call: func() error {
				return call(c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key("static"), NetworkInstance: "vpc-1", Prefix: "10.0.1.2/24"}}))
			},
			code: codes.AlreadyExists,
			msg:  "IPAllocation default/static: spec.prefix: 10.0.1.2 is already held by IPAllocation default/alloc1 of owner \"test\"",
			item: &item{"IPAllocation", "static", "spec.prefix", codes.AlreadyExists},
		},
		{
			name: "prefix exists",
			call: func() error {
				return call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("dup"), NetworkInstance: "vpc-1", Kind: "pool", Prefix: "10.0.1.0/24"}}))
			},
			code: codes.AlreadyExists,
			msg:  "IPPrefix default/dup: spec.prefix: 10.0.1.0/24 already exists in network instance vpc-1 (network IPPrefix default/net1-prefix1 of owner \"test\")",
			item: &item{"IPPrefix", "dup", "spec.prefix", codes.AlreadyExists},
		},
		{
			name: "network full",
			call: func() error { return call(c.Allocate(ctx, tiny("t3"))) },
			code: codes.ResourceExhausted,
			msg:  "IPAllocation default/t3: spec.selector: no free address left in network 10.0.2.0/30",
			item: &item{"IPAllocation", "t3", "spec.selector", codes.ResourceExhausted},
		},
		{
			name: "prefix in use",
			call: func() error { return call(c.DeletePrefix(ctx, &ipamv1.DeleteRequest{Key: key("tiny")})) },
			code: codes.FailedPrecondition,
		},
		{
			name: "network instance in use",
			call: func() error { return call(c.DeleteNetworkInstance(ctx, &ipamv1.DeleteRequest{Key: key("vpc-1")})) },
			code: codes.FailedPrecondition,
			item: &item{"NetworkInstance", "vpc-1", "", codes.FailedPrecondition},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := wantStatus(t, tc.call(), tc.code, tc.msg)
			if tc.item == nil {
				if len(st.Details()) != 0 && tc.msg != "" {
					t.Errorf("unexpected details %v", st.Details())
				}
				return
			}
			f := syncFailure(t, st)
			if len(f.GetItems()) != 1 {
				t.Fatalf("SyncFailure has %d items, want 1: %v", len(f.GetItems()), f)
			}
			it := f.GetItems()[0]
			got := item{it.GetObject(), it.GetKey().GetName(), it.GetField(), codes.Code(it.GetCode())}
			if got != *tc.item || it.GetMessage() != st.Message() {
				t.Errorf("item = %+v %q, want %+v %q", got, it.GetMessage(), *tc.item, st.Message())
			}
			// The typed kind names the same kind as the old string.
			if k := ipamv1.KindName(it.GetKind()); k != tc.item.object {
				t.Errorf("item kind %v (%s), want %s", it.GetKind(), k, tc.item.object)
			}
		})
	}
	// The FailedPrecondition message of a prefix in use names what holds it.
	st := wantStatus(t, call(c.DeletePrefix(ctx, &ipamv1.DeleteRequest{Key: key("tiny")})), codes.FailedPrecondition, "")
	if !strings.HasPrefix(st.Message(), "IPPrefix default/tiny: ") || !strings.Contains(st.Message(), "10.0.2.") {
		t.Errorf("in-use message %q does not name the prefix and its held addresses", st.Message())
	}
}

// TestSyncAllOrNothing sends a batch with one bad item through gRPC: it
// fails with a SyncFailure naming exactly that item and changes nothing.
func TestSyncAllOrNothing(t *testing.T) {
	c := startServer(t, server.Config{}).Client(t)
	ctx := context.Background()
	seed(t, c)
	listAll := func() string {
		var b strings.Builder
		for _, k := range []ipamv1.ObjectKind{niKind, prefixKind, rangeKind, allocKind} {
			resp, err := c.List(ctx, &ipamv1.ListRequest{Kind: k})
			must(t, err)
			for _, o := range resp.GetObjects() {
				fmt.Fprintln(&b, o)
			}
		}
		return b.String()
	}
	sel := map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net1"}
	good := &ipamv1.SyncRequest{Owner: "pkg1", Prune: true,
		Prefixes: []*ipamv1.Prefix{{Key: &ipamv1.Key{Namespace: "default", Name: "net2"}, NetworkInstance: "vpc-1", Prefix: "10.0.2.1/24",
			Network: "net2", Labels: map[string]string{"nephio.org/gateway": "true"}}},
		Allocations: []*ipamv1.Allocation{
			{Key: &ipamv1.Key{Namespace: "default", Name: "a1"}, Selector: sel},
			{Key: &ipamv1.Key{Namespace: "default", Name: "a2"}, Selector: sel},
		}}
	resp, err := c.Sync(ctx, good)
	must(t, err)
	if got := []string{resp.GetPrefixes()[0].GetPrefix(), resp.GetAllocations()[0].GetPrefix(), resp.GetAllocations()[1].GetPrefix()}; !slices.Equal(got, []string{"10.0.2.1/24", "10.0.1.2/24", "10.0.1.3/24"}) {
		t.Fatalf("Sync results = %v", got)
	}
	before := listAll()

	bad := proto.Clone(good).(*ipamv1.SyncRequest)
	bad.Allocations = append(bad.Allocations[1:], // a1 pruned (released) by this batch
		&ipamv1.Allocation{Key: &ipamv1.Key{Namespace: "default", Name: "a3"}, Selector: sel},
		&ipamv1.Allocation{Key: &ipamv1.Key{Namespace: "default", Name: "a4"}, NetworkInstance: "vpc-1", Prefix: "10.0.1.3/24"}, // held by a2
	)
	bad.Prefixes = append(bad.Prefixes, &ipamv1.Prefix{Key: &ipamv1.Key{Namespace: "default", Name: "net3"}, NetworkInstance: "vpc-1", Prefix: "10.0.3.0/24", Network: "net3"})
	_, err = c.Sync(ctx, bad)
	st := wantStatus(t, err, codes.AlreadyExists, "IPAllocation default/a4: spec.prefix: 10.0.1.3 is already held by IPAllocation default/a2 of owner \"pkg1\"")
	f := syncFailure(t, st)
	if len(f.GetItems()) != 1 || f.GetItems()[0].GetKey().GetOwner() != "pkg1" || f.GetItems()[0].GetKey().GetName() != "a4" ||
		f.GetItems()[0].GetField() != "spec.prefix" || codes.Code(f.GetItems()[0].GetCode()) != codes.AlreadyExists {
		t.Fatalf("SyncFailure = %v", f)
	}
	if after := listAll(); after != before {
		t.Fatalf("a failed Sync changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// Several bad items, malformed and rejected by the core: each is named.
	bad.Allocations = append(bad.Allocations, &ipamv1.Allocation{Key: &ipamv1.Key{Namespace: "default", Name: "a5"}, NetworkInstance: "vpc-1", Prefix: "10.0.1.999/24"})
	_, err = c.Sync(ctx, bad)
	st = wantStatus(t, err, codes.InvalidArgument, `IPAllocation default/a5: spec.prefix: "10.0.1.999/24" is not a prefix`)
	if items := syncFailure(t, st).GetItems(); len(items) != 1 || items[0].GetKey().GetOwner() != "pkg1" {
		t.Fatalf("malformed items = %v", items)
	}
	bad.Allocations = bad.Allocations[:len(bad.Allocations)-1]
	bad.Allocations = append(bad.Allocations, &ipamv1.Allocation{Key: &ipamv1.Key{Namespace: "default", Name: "a6"},
		Selector: map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "nope"}})
	_, err = c.Sync(ctx, bad)
	st = wantStatus(t, err, codes.NotFound, "")
	var got []string
	for _, it := range syncFailure(t, st).GetItems() {
		got = append(got, fmt.Sprintf("%s %s %s %s", it.GetObject(), it.GetKey().GetName(), it.GetField(), codes.Code(it.GetCode())))
	}
	slices.Sort(got)
	if want := []string{"IPAllocation a4 spec.prefix AlreadyExists", "IPAllocation a6 spec.selector NotFound"}; !slices.Equal(got, want) {
		t.Fatalf("items = %v, want %v", got, want)
	}
	if after := listAll(); after != before {
		t.Fatalf("a failed Sync changed the state")
	}

	// Duplicate keys and the batch limit.
	_, err = c.Sync(ctx, &ipamv1.SyncRequest{Owner: "pkg1", Allocations: []*ipamv1.Allocation{good.Allocations[0], good.Allocations[0]}})
	st = wantStatus(t, err, codes.InvalidArgument, "IPAllocation default/a1: metadata.name: appears twice in one request")
	syncFailure(t, st)
	huge := &ipamv1.SyncRequest{Owner: "pkg1"}
	for i := range ipam.MaxSyncItems + 1 {
		huge.Allocations = append(huge.Allocations, &ipamv1.Allocation{Key: &ipamv1.Key{Name: fmt.Sprint(i)}})
	}
	_, err = c.Sync(ctx, huge)
	wantStatus(t, err, codes.InvalidArgument, fmt.Sprintf("Sync pkg1: %d objects exceed the limit of %d per request", ipam.MaxSyncItems+1, ipam.MaxSyncItems))
	if after := listAll(); after != before {
		t.Fatalf("a failed Sync changed the state")
	}
}

// TestSyncGeneration: a Sync with a generation is checked against the
// owner's and answers the owner's generation afterwards; a stale one that
// would change the owner fails with FailedPrecondition on field
// generation of the Sync; one without a generation is not checked.
func TestSyncGeneration(t *testing.T) {
	c := startServer(t, server.Config{}).Client(t)
	ctx := context.Background()
	seed(t, c)
	sel := map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net1"}
	sync := func(gen *uint64, names ...string) (*ipamv1.SyncResponse, error) {
		req := &ipamv1.SyncRequest{Owner: "pkg1", Prune: true, Generation: gen}
		for _, n := range names {
			req.Allocations = append(req.Allocations, &ipamv1.Allocation{Key: &ipamv1.Key{Namespace: "default", Name: n}, Selector: sel})
		}
		return c.Sync(ctx, req)
	}
	for _, tc := range []struct {
		name  string
		gen   *uint64
		names []string
		want  uint64
		stale bool
	}{
		{"first render", proto.Uint64(0), []string{"a1"}, 1, false},
		{"no-op render", proto.Uint64(1), []string{"a1"}, 1, false},
		{"the copy prunes a1", proto.Uint64(1), nil, 2, false},
		{"the original is stale", proto.Uint64(1), []string{"a1"}, 0, true},
		{"unchecked", nil, []string{"a2"}, 3, false},
	} {
		resp, err := sync(tc.gen, tc.names...)
		if tc.stale {
			st := wantStatus(t, err, codes.FailedPrecondition, `Sync pkg1: generation: owner "pkg1" is at generation 2, and this package at 1: another copy of the package changed the owner's objects since this one was rendered; a request from the current copy, or one that adopts the owner, is accepted`)
			items := syncFailure(t, st).GetItems()
			if len(items) != 1 || items[0].GetObject() != "Sync" || items[0].GetKind() != ipamv1.ObjectKind_OBJECT_KIND_UNSPECIFIED ||
				items[0].GetKey().GetName() != "pkg1" || items[0].GetField() != "generation" {
				t.Fatalf("%s: items %v", tc.name, items)
			}
			continue
		}
		must(t, err)
		if resp.GetGeneration() != tc.want {
			t.Fatalf("%s: generation %d, want %d", tc.name, resp.GetGeneration(), tc.want)
		}
	}
}

// TestHealthAndReflection checks the standard health service and server
// reflection.
func TestHealthAndReflection(t *testing.T) {
	conn := startServer(t, server.Config{}).Dial(t)
	ctx := context.Background()
	for _, svc := range []string{"", "ipam.v1.IPAM"} {
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		must(t, err)
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q = %s", svc, resp.GetStatus())
		}
	}
	stream, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	must(t, err)
	must(t, stream.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}))
	resp, err := stream.Recv()
	must(t, err)
	var services []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		services = append(services, s.GetName())
	}
	slices.Sort(services)
	want := []string{"grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection", "ipam.v1.IPAM", "resource.Resource"}
	if !slices.Equal(services, want) {
		t.Errorf("reflection lists %v, want %v", services, want)
	}
}

// TestDemo seeds the demo network instance on an empty state.
func TestDemo(t *testing.T) {
	c := startServer(t, server.Config{Demo: true}).Client(t)
	ctx := context.Background()
	resp, err := c.List(ctx, &ipamv1.ListRequest{Kind: prefixKind})
	must(t, err)
	if got := names(resp.GetObjects()); !slices.Equal(got, []string{"aggregate0", "net1-prefix1"}) {
		t.Fatalf("demo prefixes = %v", got)
	}
	res, err := c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: alloc1()})
	must(t, err)
	if res.GetResult().GetPrefix() != "10.0.1.2/24" || res.GetResult().GetGateway() != "10.0.1.1" {
		t.Fatalf("alloc1 = %v", res.GetResult())
	}
	ni, err := c.Get(ctx, &ipamv1.GetRequest{Kind: niKind, Key: &ipamv1.Key{Name: "vpc-1"}})
	must(t, err)
	if ni.GetObject().GetNetworkInstance().GetKey().GetOwner() != "demo" {
		t.Fatalf("vpc-1 = %v", ni.GetObject())
	}
}

func names(objs []*ipamv1.Object) []string {
	var out []string
	for _, o := range objs {
		switch x := o.GetObject().(type) {
		case *ipamv1.Object_NetworkInstance:
			out = append(out, x.NetworkInstance.GetKey().GetName())
		case *ipamv1.Object_Prefix:
			out = append(out, x.Prefix.GetPrefix().GetKey().GetName())
		case *ipamv1.Object_Range:
			out = append(out, x.Range.GetKey().GetName())
		case *ipamv1.Object_Allocation:
			out = append(out, x.Allocation.GetAllocation().GetKey().GetName())
		}
	}
	return out
}

// TestStoreFailureIsUnavailable journals to a file store that has been
// closed: the change cannot be made durable and the call reports
// Unavailable, naming the store.
func TestStoreFailureIsUnavailable(t *testing.T) {
	st, err := file.Open(t.TempDir(), file.Options{Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	hub := server.NewHub(st, 0, nil)
	var failures []error
	hub.OnFailure(func(err error) { failures = append(failures, err) })
	a := ipam.New(ipam.WithJournal(hub))
	must(t, st.Restore(a))
	svc := server.NewService(a, hub, nil)
	ctx := context.Background()
	_, err = svc.CreateNetworkInstance(ctx, &ipamv1.CreateNetworkInstanceRequest{NetworkInstance: &ipamv1.NetworkInstance{Key: key("vpc-1")}})
	must(t, err)
	must(t, st.Close())
	_, err = svc.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("agg"), NetworkInstance: "vpc-1", Kind: "aggregate", Prefix: "10.0.0.0/8"}})
	st2 := wantStatus(t, err, codes.Unavailable, "")
	if !strings.HasPrefix(st2.Message(), "store: ") || len(st2.Details()) != 0 {
		t.Errorf("store failure reported as %q %v", st2.Message(), st2.Details())
	}
	// Another mutation, whatever its outcome, must not report the failure again.
	_, _ = svc.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key("a"), NetworkInstance: "vpc-1", Prefix: "10.0.0.9/32"}})
	if len(failures) != 1 || failures[0] == nil {
		t.Errorf("OnFailure saw %v, want the store error once", failures)
	}
}
