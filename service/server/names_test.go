package server_test

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/store/file"
)

// TestPaddedNames: the API refuses a name, namespace, owner, network or
// pre-allocation name that is blank or starts or ends with a space, and
// labels outside Kubernetes label syntax, with InvalidArgument naming the
// field, while a data directory that holds such names and labels (written
// before the rule) still opens and its objects are read, listed by those
// labels and deleted.
func TestPaddedNames(t *testing.T) {
	dir := t.TempDir()
	padded := ipam.Key{Owner: "old ", Namespace: "default", Name: " net9"}
	st, err := file.Open(dir, file.Options{Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	a := ipam.New(ipam.WithJournal(st))
	must(t, st.Restore(a))
	must(t, a.CreateNetworkInstance(context.Background(), ipam.NetworkInstance{Key: ipam.Key{Name: "vpc-1"}}))
	p := ipam.Prefix{Key: padded, NetworkInstance: "vpc-1", Kind: ipam.KindAggregate, Prefix: netip.MustParsePrefix("10.9.0.0/16")}
	// A network with a padded name and labels outside Kubernetes syntax,
	// as older versions stored them.
	oldLabels := map[string]string{strings.Repeat("k", 300): "a b", " x": "y"}
	n := ipam.Prefix{Key: ipam.Key{Owner: "old", Namespace: "default", Name: "net9"}, NetworkInstance: "vpc-1", Kind: ipam.KindNetwork,
		Prefix: netip.MustParsePrefix("10.9.1.0/24"), Network: " a", Labels: oldLabels}
	must(t, st.Append([]ipam.Record{{Op: ipam.OpPutPrefix, Key: padded, Prefix: &p}, {Op: ipam.OpPutPrefix, Key: n.Key, Prefix: &n}})())
	must(t, st.Close())

	c := startServer(t, server.Config{Store: "file", DataDir: dir}).Client(t)
	ctx := context.Background()
	pk := &ipamv1.Key{Owner: padded.Owner, Namespace: padded.Namespace, Name: padded.Name}
	_, err = c.Get(ctx, &ipamv1.GetRequest{Kind: prefixKind, Key: pk})
	must(t, err)
	list, err := c.List(ctx, &ipamv1.ListRequest{Kind: prefixKind, Owner: padded.Owner})
	must(t, err)
	if len(list.GetObjects()) != 1 {
		t.Errorf("listing owner %q: %d prefixes, want 1", padded.Owner, len(list.GetObjects()))
	}
	list, err = c.List(ctx, &ipamv1.ListRequest{Kind: prefixKind, Labels: oldLabels})
	must(t, err)
	if len(list.GetObjects()) != 1 {
		t.Errorf("listing by the old labels: %d prefixes, want 1", len(list.GetObjects()))
	}
	nk := &ipamv1.Key{Owner: "old", Namespace: "default", Name: "net9"}

	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"prefix name", func() error {
			return call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: pk, NetworkInstance: "vpc-1", Prefix: "10.9.0.0/16", Kind: "aggregate"}}))
		}, `IPPrefix default/ net9: metadata.name: " net9" starts or ends with a space`},
		{"allocation namespace", func() error {
			return call(c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: &ipamv1.Key{Owner: "o", Namespace: " ", Name: "a"}, NetworkInstance: "vpc-1"}}))
		}, `IPAllocation  /a: metadata.namespace: " " is blank`},
		{"network instance name", func() error {
			return call(c.CreateNetworkInstance(ctx, &ipamv1.CreateNetworkInstanceRequest{NetworkInstance: &ipamv1.NetworkInstance{Key: &ipamv1.Key{Name: "vpc-2 "}}}))
		}, `NetworkInstance vpc-2 : metadata.name: "vpc-2 " starts or ends with a space`},
		{"network name", func() error {
			return call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("p2"), NetworkInstance: "vpc-1", Prefix: "10.9.2.0/24", Network: " a"}}))
		}, `IPPrefix default/p2: spec.network: " a" starts or ends with a space`},
		{"pre-allocation name", func() error {
			return call(c.CreateRange(ctx, &ipamv1.CreateRangeRequest{Range: &ipamv1.IPRange{Key: key("r"), NetworkInstance: "vpc-1", Start: "10.9.1.10", End: "10.9.1.20",
				PreAllocations: map[string]string{" ": "10.9.1.11"}}}))
		}, `IPRange default/r: spec.preAllocations: " " is blank`},
		{"label key of 300 bytes without a prefix", func() error {
			return call(c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key("a"), NetworkInstance: "vpc-1", Labels: map[string]string{strings.Repeat("k", 300): "v"}}}))
		}, `IPAllocation default/a: spec.labels: label key "` + strings.Repeat("k", 64) + `"... (300 bytes) is not a Kubernetes label key: the name is longer than 63 bytes`},
		{"label value with a space", func() error {
			return call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("p3"), NetworkInstance: "vpc-1", Prefix: "10.9.3.0/24", Labels: map[string]string{"nephio.org/site": "a b"}}}))
		}, `IPPrefix default/p3: metadata.labels["nephio.org/site"]: "a b" is not a Kubernetes label value: must be letters, digits, '-', '_' or '.', beginning and ending with a letter or digit`},
		{"sync owner", func() error {
			return call(c.Sync(ctx, &ipamv1.SyncRequest{Owner: "  "}))
		}, `Sync: owner: "  " is blank`},
	} {
		t.Run(tc.name, func(t *testing.T) { wantStatus(t, tc.call(), codes.InvalidArgument, tc.want) })
	}

	must(t, call(c.DeletePrefix(ctx, &ipamv1.DeleteRequest{Key: nk})))
	must(t, call(c.DeletePrefix(ctx, &ipamv1.DeleteRequest{Key: pk})))
}
