package server_test

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"

	"google.golang.org/grpc/codes"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/store/file"
)

// TestPaddedNames: the API refuses a name, namespace or owner that is
// blank or starts or ends with a space with InvalidArgument naming the
// field, while a data directory that holds such a name (written before
// the rule) still opens and its object is read, listed and deleted.
func TestPaddedNames(t *testing.T) {
	dir := t.TempDir()
	padded := ipam.Key{Owner: "old ", Namespace: "default", Name: " net9"}
	st, err := file.Open(dir, file.Options{Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	a := ipam.New(ipam.WithJournal(st))
	must(t, st.Restore(a))
	must(t, a.CreateNetworkInstance(context.Background(), ipam.NetworkInstance{Key: ipam.Key{Name: "vpc-1"}}))
	p := ipam.Prefix{Key: padded, NetworkInstance: "vpc-1", Kind: ipam.KindAggregate, Prefix: netip.MustParsePrefix("10.9.0.0/16")}
	must(t, st.Append([]ipam.Record{{Op: ipam.OpPutPrefix, Key: padded, Prefix: &p}})())
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
		{"sync owner", func() error {
			return call(c.Sync(ctx, &ipamv1.SyncRequest{Owner: "  "}))
		}, `Sync: owner: "  " is blank`},
	} {
		t.Run(tc.name, func(t *testing.T) { wantStatus(t, tc.call(), codes.InvalidArgument, tc.want) })
	}

	must(t, call(c.DeletePrefix(ctx, &ipamv1.DeleteRequest{Key: pk})))
}
