package server_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// The W8 mix: per 100 calls of a client.
const (
	w8Allocate = 40
	w8Release  = 30
	w8Sync     = 10 // of 50 addresses
	w8List     = 15 // by owner
	w8Get      = 5
)

// BenchmarkW8MixedLoad has 64 clients (on 8 connections) mix Allocate,
// Release, Sync of 50, List by owner and Get against the server on the
// file store with fsync on, while 4 watchers consume Watch streams, in a
// VRF that already holds 12,800 allocations of other owners. It reports
// all calls per second ("calls/s"; W8 target ≥ 5,000), the median and
// 99th percentile latency of every call ("p50-ms", "p99-ms"; target
// p99 ≤ 50 ms) and the 99th percentile of the reads ("read-p99-ms", List
// and Get, which do not wait for the fsync of the changes they show; with
// --durable-reads they would).
func BenchmarkW8MixedLoad(b *testing.B) {
	const (
		clients    = 64
		conns      = 8
		perClient  = 100
		background = 12_800
	)
	ts := servertest.Start(b, server.Config{Store: "file", DataDir: b.TempDir()}, false)
	ctx := context.Background()
	c := ts.Client(b)
	seed(b, c)
	must(b, call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("net12"), NetworkInstance: "vpc-1",
		Prefix: "10.16.0.0/12", Network: "net12"}})))
	sel := map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net12"}
	for o := range background / 3200 {
		req := &ipamv1.SyncRequest{Owner: fmt.Sprint("background-", o)}
		for i := range 3200 {
			req.Allocations = append(req.Allocations, &ipamv1.Allocation{Key: &ipamv1.Key{Namespace: "default", Name: fmt.Sprint("bg-", i)}, Selector: sel})
		}
		must(b, call(c.Sync(ctx, req)))
	}
	pool := make([]ipamv1.IPAMClient, conns)
	for i := range pool {
		pool[i] = ipamv1.NewIPAMClient(ts.Dial(b))
	}

	// Four watchers drain the change stream for the whole run.
	wctx, stopWatch := context.WithCancel(ctx)
	var watchers sync.WaitGroup
	for w := range 4 {
		stream, err := pool[w].Watch(wctx, &ipamv1.WatchRequest{NetworkInstance: "vpc-1"})
		must(b, err)
		watchers.Go(func() {
			for {
				if _, err := stream.Recv(); err != nil {
					if err != io.EOF && wctx.Err() == nil {
						b.Errorf("watch: %v", err)
					}
					return
				}
			}
		})
	}
	defer func() { stopWatch(); watchers.Wait() }()

	type client struct {
		rng   *rand.Rand
		live  []string // its allocations, to release
		n     int      // names used
		syncs int
		lat   []time.Duration
		reads []time.Duration
	}
	cs := make([]*client, clients)
	for g := range cs {
		cs[g] = &client{rng: rand.New(rand.NewPCG(uint64(g), 8))}
	}
	owner := func(g int) string { return fmt.Sprint("w8-", g) }
	syncOwner := func(g int) string { return fmt.Sprint("w8-sync-", g) }
	op := func(g int, cl *client) error {
		cc := pool[g%conns]
		r := cl.rng.IntN(100)
		start := time.Now()
		var err error
		read := false
		switch {
		case r < w8Allocate || r < w8Allocate+w8Release && len(cl.live) == 0:
			name := fmt.Sprint("a", cl.n)
			cl.n++
			_, err = cc.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{
				Key: &ipamv1.Key{Owner: owner(g), Namespace: "default", Name: name}, Selector: sel}})
			cl.live = append(cl.live, name)
		case r < w8Allocate+w8Release:
			name := cl.live[len(cl.live)-1]
			cl.live = cl.live[:len(cl.live)-1]
			_, err = cc.Release(ctx, &ipamv1.DeleteRequest{Key: &ipamv1.Key{Owner: owner(g), Namespace: "default", Name: name}})
		case r < w8Allocate+w8Release+w8Sync:
			// Alternate between two sets of 50 that share 25 names: each
			// Sync keeps 25, allocates 25 and prunes 25.
			cl.syncs++
			req := &ipamv1.SyncRequest{Owner: syncOwner(g), Prune: true}
			for i := range 50 {
				req.Allocations = append(req.Allocations, &ipamv1.Allocation{
					Key: &ipamv1.Key{Namespace: "default", Name: fmt.Sprint("s", i+25*(cl.syncs%2))}, Selector: sel})
			}
			_, err = cc.Sync(ctx, req)
		case r < w8Allocate+w8Release+w8Sync+w8List:
			read = true
			// A page of 100 of an owner holding 3,200 allocations.
			_, err = cc.List(ctx, &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, Owner: fmt.Sprint("background-", g%4), PageSize: 100})
		default:
			read = true
			_, err = cc.Get(ctx, &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION,
				Key: &ipamv1.Key{Owner: "background-0", Namespace: "default", Name: fmt.Sprint("bg-", cl.rng.IntN(3200))}})
		}
		d := time.Since(start)
		cl.lat = append(cl.lat, d)
		if read {
			cl.reads = append(cl.reads, d)
		}
		return err
	}
	round := func() time.Duration {
		d, err := parallel(clients, clients*perClient, func(g, _ int) error { return op(g, cs[g]) })
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	round() // warm-up
	for _, cl := range cs {
		cl.lat, cl.reads = cl.lat[:0], cl.reads[:0]
	}
	var elapsed time.Duration
	n := 0
	for b.Loop() {
		elapsed += round()
		n += clients * perClient
	}
	var lat, reads []time.Duration
	for _, cl := range cs {
		lat = append(lat, cl.lat...)
		reads = append(reads, cl.reads...)
	}
	pct := func(xs []time.Duration, p float64) float64 {
		slices.Sort(xs)
		return float64(xs[int(p*float64(len(xs)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "calls/s")
	b.ReportMetric(pct(lat, 0.50), "p50-ms")
	b.ReportMetric(pct(lat, 0.99), "p99-ms")
	b.ReportMetric(pct(reads, 0.99), "read-p99-ms")
}
