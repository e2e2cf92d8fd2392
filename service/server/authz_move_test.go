package server_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// moveRules add to startAuthz's policy: team-b may change owners b.* in
// network instance vb only, team-c owners c.* in va and vb.
const moveRules = `- identities: [cn:team-b]
  owners: [b.*]
  networkInstances: [vb]
  write: true
  read: true
- identities: [cn:team-c]
  owners: [c.*]
  networkInstances: [va, vb]
  write: true
  read: true
`

// moveKey is the key of an object of owner in namespace default.
func moveKey(owner, name string) *ipamv1.Key {
	return &ipamv1.Key{Owner: owner, Namespace: "default", Name: name}
}

// moveAddr asks for an address of network net1 in vrf.
func moveAddr(owner, name, vrf string) *ipamv1.Allocation {
	return &ipamv1.Allocation{Key: moveKey(owner, name),
		Selector: map[string]string{"nephio.org/network-instance": vrf, "nephio.org/network-name": "net1"}}
}

func movePrefix(owner, name, vrf string) *ipamv1.Prefix {
	return &ipamv1.Prefix{Key: moveKey(owner, name), NetworkInstance: vrf, Prefix: "10.0.2.0/24", Network: "net2"}
}

func moveRange(owner, name, vrf string) *ipamv1.IPRange {
	return &ipamv1.IPRange{Key: moveKey(owner, name), NetworkInstance: vrf, Start: "10.0.1.100", End: "10.0.1.110"}
}

// moveState renders every prefix, range and allocation of owner (all
// owners when empty), one line each with where it lives and what it
// holds.
func moveState(t *testing.T, c ipamv1.IPAMClient, owner string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, kind := range []ipamv1.ObjectKind{ipamv1.ObjectKind_OBJECT_KIND_PREFIX, ipamv1.ObjectKind_OBJECT_KIND_RANGE, ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION} {
		resp, err := c.List(ctx, &ipamv1.ListRequest{Kind: kind, Owner: owner})
		must(t, err)
		for _, o := range resp.GetObjects() {
			switch {
			case o.GetPrefix() != nil:
				p := o.GetPrefix()
				out = append(out, fmt.Sprintf("prefix %s %s %s", keyString(p.GetPrefix().GetKey()), p.GetResult().GetNetworkInstance(), p.GetResult().GetPrefix()))
			case o.GetRange() != nil:
				r := o.GetRange()
				out = append(out, fmt.Sprintf("range %s %s %s-%s", keyString(r.GetKey()), r.GetNetworkInstance(), r.GetStart(), r.GetEnd()))
			case o.GetAllocation() != nil:
				a := o.GetAllocation()
				out = append(out, fmt.Sprintf("allocation %s %s %s", keyString(a.GetAllocation().GetKey()), a.GetResult().GetNetworkInstance(), a.GetResult().GetPrefix()))
			}
		}
	}
	slices.Sort(out)
	return out
}

func keyString(k *ipamv1.Key) string {
	return k.GetOwner() + "/" + k.GetNamespace() + "/" + k.GetName()
}

// TestAuthorizationMove: a change is authorized at both of its ends, the
// network instance it takes from and the one it releases in, whichever
// call makes it (Sync, Allocate, CreatePrefix, CreateRange, an adoption).
// A refused change changes nothing: the object stays where it was with
// what it held, nothing appears in the other network instance, and the
// other items of a refused Sync are not made either. A caller granted
// both ends moves objects.
func TestAuthorizationMove(t *testing.T) {
	ctx := context.Background()
	type clients struct{ admin, b, c ipamv1.IPAMClient }
	for _, tc := range []struct {
		name   string
		setup  func(admin ipamv1.IPAMClient) error // made by the admin first
		change func(cl clients) error
		// code is the refusal's code (PermissionDenied naming identity,
		// owner and want when want is set); OK: the change is made and
		// the owner's objects read want.
		code  codes.Code
		want  []string
		owner string
		after func(t *testing.T, cl clients) // more checks
	}{{
		name: "Sync moves an allocation out of a network instance it may not change",
		setup: func(admin ipamv1.IPAMClient) error {
			return call(admin.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: moveAddr("b.1", "x1", "va")}))
		},
		change: func(cl clients) error {
			// y1 alone would be allowed: a refused Sync makes none of its items.
			return call(cl.b.Sync(ctx, &ipamv1.SyncRequest{Owner: "b.1", Allocations: []*ipamv1.Allocation{moveAddr("", "x1", "vb"), moveAddr("", "y1", "vb")}}))
		},
		code: codes.PermissionDenied, want: []string{`"cn:team-b"`, `"b.1"`, `"va"`},
	}, {
		name: "Sync moves a prefix out of a network instance it may not change",
		setup: func(admin ipamv1.IPAMClient) error {
			return call(admin.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: movePrefix("b.1", "p1", "va")}))
		},
		change: func(cl clients) error {
			return call(cl.b.Sync(ctx, &ipamv1.SyncRequest{Owner: "b.1", Prefixes: []*ipamv1.Prefix{movePrefix("", "p1", "vb")}}))
		},
		code: codes.PermissionDenied, want: []string{`"cn:team-b"`, `"b.1"`, `"va"`},
	}, {
		name: "Sync moves a range out of a network instance it may not change",
		setup: func(admin ipamv1.IPAMClient) error {
			return call(admin.CreateRange(ctx, &ipamv1.CreateRangeRequest{Range: moveRange("b.1", "r1", "va")}))
		},
		change: func(cl clients) error {
			return call(cl.b.Sync(ctx, &ipamv1.SyncRequest{Owner: "b.1", Ranges: []*ipamv1.IPRange{moveRange("", "r1", "vb")}}))
		},
		code: codes.PermissionDenied, want: []string{`"cn:team-b"`, `"b.1"`, `"va"`},
	}, {
		name: "Sync adopts an address for an allocation held in a network instance it may not change",
		setup: func(admin ipamv1.IPAMClient) error {
			return call(admin.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: moveAddr("b.1", "x1", "va")}))
		},
		change: func(cl clients) error {
			a := &ipamv1.Allocation{Key: moveKey("", "x1"), NetworkInstance: "vb", Prefix: "10.0.1.7/24"}
			return call(cl.b.Sync(ctx, &ipamv1.SyncRequest{Owner: "b.1", Allocations: []*ipamv1.Allocation{a}}))
		},
		code: codes.PermissionDenied, want: []string{`"cn:team-b"`, `"b.1"`, `"va"`},
	}, {
		name: "Sync adopts an owner whose objects live in a network instance it may not change",
		setup: func(admin ipamv1.IPAMClient) error {
			return call(admin.Sync(ctx, &ipamv1.SyncRequest{Owner: "b.1", Identity: "pkg-a", Allocations: []*ipamv1.Allocation{moveAddr("", "x1", "va")}}))
		},
		change: func(cl clients) error {
			return call(cl.b.Sync(ctx, &ipamv1.SyncRequest{Owner: "b.1", Identity: "pkg-b", Adopt: true}))
		},
		code: codes.PermissionDenied, want: []string{`"cn:team-b"`, `"b.1"`, `"va"`},
		after: func(t *testing.T, cl clients) {
			// The owner is still bound to pkg-a: its own Sync needs no adopt.
			must(t, call(cl.admin.Sync(ctx, &ipamv1.SyncRequest{Owner: "b.1", Identity: "pkg-a", Allocations: []*ipamv1.Allocation{moveAddr("", "x1", "va")}})))
		},
	}, {
		name: "Allocate moves an allocation out of a network instance it may not change",
		setup: func(admin ipamv1.IPAMClient) error {
			return call(admin.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: moveAddr("b.1", "x1", "va")}))
		},
		change: func(cl clients) error {
			return call(cl.b.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: moveAddr("b.1", "x1", "vb")}))
		},
		code: codes.PermissionDenied, want: []string{`"cn:team-b"`, `"b.1"`, `"va"`},
	}, {
		name: "Allocate adopts an address for an allocation held in a network instance it may not change",
		setup: func(admin ipamv1.IPAMClient) error {
			return call(admin.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: moveAddr("b.1", "x1", "va")}))
		},
		change: func(cl clients) error {
			a := &ipamv1.Allocation{Key: moveKey("b.1", "x1"), NetworkInstance: "vb", Prefix: "10.0.1.7/24"}
			return call(cl.b.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: a}))
		},
		code: codes.PermissionDenied, want: []string{`"cn:team-b"`, `"b.1"`, `"va"`},
	}, {
		name: "CreatePrefix moves a prefix out of a network instance it may not change",
		setup: func(admin ipamv1.IPAMClient) error {
			return call(admin.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: movePrefix("b.1", "p1", "va")}))
		},
		change: func(cl clients) error {
			return call(cl.b.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: movePrefix("b.1", "p1", "vb")}))
		},
		code: codes.PermissionDenied, want: []string{`"cn:team-b"`, `"b.1"`, `"va"`},
	}, {
		name: "CreateRange moves a range out of a network instance it may not change",
		setup: func(admin ipamv1.IPAMClient) error {
			return call(admin.CreateRange(ctx, &ipamv1.CreateRangeRequest{Range: moveRange("b.1", "r1", "va")}))
		},
		change: func(cl clients) error {
			return call(cl.b.CreateRange(ctx, &ipamv1.CreateRangeRequest{Range: moveRange("b.1", "r1", "vb")}))
		},
		code: codes.PermissionDenied, want: []string{`"cn:team-b"`, `"b.1"`, `"va"`},
	}, {
		name: "an allocation whose selector names no network instance takes nothing",
		change: func(cl clients) error {
			a := &ipamv1.Allocation{Key: moveKey("b.1", "x2"), Selector: map[string]string{"nephio.org/network-name": "net1"}}
			if err := call(cl.b.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: a})); status.Code(err) != codes.InvalidArgument {
				return fmt.Errorf("Allocate: %w, want InvalidArgument", err)
			}
			return call(cl.b.Sync(ctx, &ipamv1.SyncRequest{Owner: "b.1", Allocations: []*ipamv1.Allocation{a}}))
		},
		code: codes.InvalidArgument,
	}, {
		name: "Sync moves objects between network instances it may change",
		setup: func(admin ipamv1.IPAMClient) error {
			return errors.Join(
				call(admin.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: moveAddr("c.1", "x1", "va")})),
				call(admin.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: movePrefix("c.1", "p1", "va")})),
				call(admin.CreateRange(ctx, &ipamv1.CreateRangeRequest{Range: moveRange("c.1", "r1", "va")})))
		},
		change: func(cl clients) error {
			return call(cl.c.Sync(ctx, &ipamv1.SyncRequest{Owner: "c.1", Allocations: []*ipamv1.Allocation{moveAddr("", "x1", "vb")},
				Prefixes: []*ipamv1.Prefix{movePrefix("", "p1", "vb")}, Ranges: []*ipamv1.IPRange{moveRange("", "r1", "vb")}}))
		},
		owner: "c.1",
		want: []string{
			"allocation c.1/default/x1 vb 10.0.1.1/24",
			"prefix c.1/default/p1 vb 10.0.2.0/24",
			"range c.1/default/r1 vb 10.0.1.100-10.0.1.110",
		},
		after: func(t *testing.T, cl clients) {
			// x1's address in va is free again.
			resp, err := cl.admin.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: moveAddr("test", "probe", "va")})
			must(t, err)
			if got := resp.GetResult().GetPrefix(); got != "10.0.1.1/24" {
				t.Errorf("va hands out %s, want the address x1 left, 10.0.1.1/24", got)
			}
		},
	}, {
		name: "Allocate moves an allocation between network instances it may change",
		setup: func(admin ipamv1.IPAMClient) error {
			return call(admin.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: moveAddr("c.1", "x1", "va")}))
		},
		change: func(cl clients) error {
			a := &ipamv1.Allocation{Key: moveKey("c.1", "x1"), NetworkInstance: "vb", Prefix: "10.0.1.7/24"}
			return call(cl.c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: a}))
		},
		owner: "c.1",
		want:  []string{"allocation c.1/default/x1 vb 10.0.1.7/24"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := startAuthz(t, moveRules)
			var cl clients
			cl.admin = s.client(t, "", "", "")
			for _, id := range []struct {
				c    *ipamv1.IPAMClient
				name string
			}{{&cl.b, "team-b"}, {&cl.c, "team-c"}} {
				cert, keyFile := s.certs.WriteClient(t, id.name, servertest.ClientCert{CommonName: id.name})
				*id.c = s.client(t, cert, keyFile, "")
			}
			for _, vrf := range []string{"va", "vb"} {
				must(t, call(cl.admin.CreateNetworkInstance(ctx, &ipamv1.CreateNetworkInstanceRequest{NetworkInstance: &ipamv1.NetworkInstance{
					Key: &ipamv1.Key{Owner: "test", Name: vrf}, Prefixes: []*ipamv1.VRFPrefix{{Prefix: "10.0.0.0/8"}}}})))
				must(t, call(cl.admin.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("net1-" + vrf), NetworkInstance: vrf,
					Prefix: "10.0.1.0/24", Network: "net1"}})))
			}
			if tc.setup != nil {
				must(t, tc.setup(cl.admin))
			}
			before := moveState(t, cl.admin, "")
			err := tc.change(cl)
			switch tc.code {
			case codes.OK:
				must(t, err)
				if got := moveState(t, cl.admin, tc.owner); !slices.Equal(got, tc.want) {
					t.Errorf("after the move:\n%q\nwant\n%q", got, tc.want)
				}
			case codes.PermissionDenied:
				denied(t, err, tc.want...)
			default:
				if status.Code(err) != tc.code {
					t.Fatalf("got %v, want %s", err, tc.code)
				}
			}
			if tc.code != codes.OK {
				if after := moveState(t, cl.admin, ""); !slices.Equal(after, before) {
					t.Errorf("a refused change changed the state:\n%q\nwas\n%q", after, before)
				}
			}
			if tc.after != nil {
				tc.after(t, cl)
			}
		})
	}
}
