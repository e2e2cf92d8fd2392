package etcd_test

import (
	"testing"

	"github.com/nephio-project/ipam/service/store/etcd"
)

// TestDeposeOnlyTheLeader: Depose revokes the lease of the replica it
// names only if that replica holds the write lead and is not the caller;
// the next candidate then leads, and the deposed one campaigns again.
func TestDeposeOnlyTheLeader(t *testing.T) {
	c := startCluster(t, 1)
	cli := etcdClient(t, c.endpoints())
	opts := etcd.Options{Endpoints: c.endpoints(), Prefix: "/depose-store/"}
	a, b := openReplica(t, opts, nil).s, openReplica(t, opts, nil).s
	a.Lead("a:1")
	waitLeads(t, cli, "/depose-store/", "a:1")
	b.Lead("b:1")
	for _, tc := range []struct {
		store *etcd.Store
		addr  string
		want  bool
	}{
		{b, "x:1", false}, // not the leader
		{a, "a:1", false}, // itself
		{b, "b:1", false}, // itself, not the leader
		{b, "a:1", true},
	} {
		deposed, err := tc.store.Depose(tc.addr)
		if err != nil || deposed != tc.want {
			t.Fatalf("Depose(%s) = %v, %v; want %v", tc.addr, deposed, err, tc.want)
		}
	}
	waitLeads(t, cli, "/depose-store/", "b:1")
	// The deposed replica campaigns again: it leads once b resigns.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	waitLeads(t, cli, "/depose-store/", "a:1")
}
