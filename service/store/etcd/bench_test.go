package etcd_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// BenchmarkEtcdVsFileDurableAllocs has 64 clients allocate addresses
// through three replicas (and, for comparison, one) on a three-member etcd
// (in-process servers, etcd members as processes, fsync on) and, in the
// same run, through one server on the embedded file store (fsync on). It
// reports acknowledged (durable) allocations per second of each
// ("etcd-allocs/s", "file-allocs/s") and their ratio ("ratio", etcd over
// file).
func BenchmarkEtcdVsFileDurableAllocs(b *testing.B) {
	for _, replicas := range []int{3, 1} {
		b.Run(fmt.Sprint("replicas=", replicas), func(b *testing.B) { benchEtcdVsFile(b, replicas) })
	}
}

func benchEtcdVsFile(b *testing.B, replicas int) {
	const clients, perClient = 64, 8
	c := startCluster(b, 3)
	var etcdConns []ipamv1.IPAMClient
	for range replicas {
		s := servertest.Start(b, server.Config{Store: "etcd", EtcdEndpoints: c.endpoints(), EtcdPrefix: "/bench/"}, false)
		etcdConns = append(etcdConns, s.Client(b))
	}
	seed20(b, etcdConns[0], "10.16.0.0/12")
	fs := servertest.Start(b, server.Config{Store: "file", DataDir: b.TempDir()}, false)
	fileConns := []ipamv1.IPAMClient{fs.Client(b)}
	seed20(b, fileConns[0], "10.16.0.0/12")

	run := func(conns []ipamv1.IPAMClient, round int) time.Duration {
		cl := &client{conns: conns}
		var wg sync.WaitGroup
		start := time.Now()
		for g := range clients {
			wg.Go(func() {
				for i := range perClient {
					if _, ok, err := cl.allocate(context.Background(), fmt.Sprintf("b%d-%d-%d", round, g, i), g+i); err != nil || !ok {
						b.Errorf("allocate: %v (exhausted: %v)", err, !ok)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	// Every replica has caught up with the seed once it answers.
	run(etcdConns, -1)
	run(fileConns, -1)
	var etcdTime, fileTime time.Duration
	n, round := 0, 0
	for b.Loop() {
		etcdTime += run(etcdConns, round)
		fileTime += run(fileConns, round)
		n += clients * perClient
		round++
	}
	etcdRate, fileRate := float64(n)/etcdTime.Seconds(), float64(n)/fileTime.Seconds()
	b.ReportMetric(etcdRate, "etcd-allocs/s")
	b.ReportMetric(fileRate, "file-allocs/s")
	b.ReportMetric(etcdRate/fileRate, "ratio")
}
