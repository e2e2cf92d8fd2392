package etcd_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// compareRates has 64 clients make 8 allocations each through x, then
// through y, in alternating rounds for as long as b.Loop asks, after one
// round on each that waits for every replica to answer, and returns the
// acknowledged allocations per second of each.
func compareRates(b *testing.B, x, y []ipamv1.IPAMClient) (xRate, yRate float64) {
	const clients, perClient = 64, 8
	allocateRound(b, x, clients, perClient, -1)
	allocateRound(b, y, clients, perClient, -1)
	var xTime, yTime time.Duration
	n, round := 0, 0
	for b.Loop() {
		xTime += allocateRound(b, x, clients, perClient, round)
		yTime += allocateRound(b, y, clients, perClient, round)
		n += clients * perClient
		round++
	}
	return float64(n) / xTime.Seconds(), float64(n) / yTime.Seconds()
}

// allocateRound has clients goroutines make perClient allocations each,
// named after round, through conns (spread as client spreads them) and
// returns how long they took.
func allocateRound(b *testing.B, conns []ipamv1.IPAMClient, clients, perClient, round int) time.Duration {
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
	etcdRate, fileRate := compareRates(b, etcdConns, fileConns)
	b.ReportMetric(etcdRate, "etcd-allocs/s")
	b.ReportMetric(fileRate, "file-allocs/s")
	b.ReportMetric(etcdRate/fileRate, "ratio")
}

// BenchmarkEtcdSnapshots measures what snapshots cost: 64 clients
// allocate through three replicas with a snapshot every 1,000 log entries
// ("on") and, in the same run on the same etcd, through three replicas
// with snapshots off ("off"). Each side first holds 20,000 allocations
// (ten Sync entries of 2,000), so each snapshot carries them. It reports
// allocations per second of each, their ratio (on over off), the log
// keys each side has at the end and the size of the last snapshot.
func BenchmarkEtcdSnapshots(b *testing.B) {
	c := startCluster(b, 3)
	cli := etcdClient(b, c.endpoints())
	sides := map[string][]ipamv1.IPAMClient{}
	for side, every := range map[string]int{"on": 1000, "off": -1} {
		for range 3 {
			s := servertest.Start(b, server.Config{Store: "etcd", EtcdEndpoints: c.endpoints(), EtcdPrefix: "/snap-" + side + "/", SnapshotEvery: every}, false)
			sides[side] = append(sides[side], s.Client(b))
		}
		seed20(b, sides[side][0], "10.16.0.0/12")
		for o := range 10 {
			req := &ipamv1.SyncRequest{Owner: fmt.Sprint("preload", o)}
			for i := range 2000 {
				req.Allocations = append(req.Allocations, &ipamv1.Allocation{Key: &ipamv1.Key{Namespace: "default", Name: fmt.Sprint("p", i)}, Selector: net20})
			}
			if _, err := sides[side][0].Sync(context.Background(), req); err != nil {
				b.Fatal(err)
			}
		}
	}
	onRate, offRate := compareRates(b, sides["on"], sides["off"])
	b.ReportMetric(onRate, "on-allocs/s")
	b.ReportMetric(offRate, "off-allocs/s")
	b.ReportMetric(onRate/offRate, "ratio")
	l := readLayout(b, cli, "/snap-on/")
	b.ReportMetric(float64(l.logKeys), "on-log-keys")
	if l.ptr != nil {
		b.ReportMetric(l.ptr["size"].(float64), "snapshot-bytes")
	}
	b.ReportMetric(float64(readLayout(b, cli, "/snap-off/").logKeys), "off-log-keys")
}

// BenchmarkE1EtcdGroupCommit has 64 clients allocate addresses through three
// replicas on a three-member etcd, in (a) one network instance and (b)
// eight (client g in vrf-(g mod 8)), and, in the same run, through one
// server on the file store with the same network instances (fsync on
// everywhere); each over plaintext gRPC (mtls=false) and under mTLS with
// an authorization policy that names the replicas (mtls=true: clients
// and relays present certificates, every call is authorized). It
// reports durable allocations per second of each, their ratio (etcd over
// file), and the replicas' etcd transactions: changes per transaction
// and milliseconds per transaction. The mtls=true rows also run three
// plaintext replicas on the same etcd, in alternating rounds, and report
// mtls-ratio: the mTLS replicas' rate over the plaintext ones' in the
// same run, which the load of a shared machine moves less than two
// rows' rates.
func BenchmarkE1EtcdGroupCommit(b *testing.B) {
	for _, mtls := range []bool{false, true} {
		for _, vrfs := range []int{1, 8} {
			b.Run(fmt.Sprintf("vrfs=%d/mtls=%v", vrfs, mtls), func(b *testing.B) { benchE1(b, vrfs, mtls) })
		}
	}
}

// benchE1 is one row of BenchmarkE1EtcdGroupCommit.
func benchE1(b *testing.B, vrfs int, mtls bool) {
	c := startCluster(b, 3)
	etcdCfg := server.Config{Store: "etcd", EtcdEndpoints: c.endpoints(), EtcdPrefix: "/bench/"}
	fileCfg := server.Config{Store: "file", DataDir: b.TempDir()}
	connect := func(s *servertest.Server) ipamv1.IPAMClient { return s.Client(b) }
	var plainConns []ipamv1.IPAMClient // mtls: plaintext replicas to compare with
	if mtls {
		for range 3 {
			s := servertest.Start(b, server.Config{Store: "etcd", EtcdEndpoints: c.endpoints(), EtcdPrefix: "/bench-plain/"}, false)
			plainConns = append(plainConns, s.Client(b))
		}
		seedVRFs(b, plainConns[0], vrfs)
		m := newMTLSSetup(b)
		etcdCfg = m.config(c.endpoints(), "/bench/")
		fileCfg.TLSCert, fileCfg.TLSKey, fileCfg.ClientCA, fileCfg.AuthzPolicy = m.certs.ServerCert, m.certs.ServerKey, m.certs.CA, m.policy
		connect = func(s *servertest.Server) ipamv1.IPAMClient { return ipamv1.NewIPAMClient(dial(b, s, m.certs)) }
	}
	var etcdConns []ipamv1.IPAMClient
	var metricsAddrs []string
	for range 3 {
		s := servertest.Start(b, etcdCfg, true)
		etcdConns = append(etcdConns, connect(s))
		metricsAddrs = append(metricsAddrs, s.MetricsAddr)
	}
	seedVRFs(b, etcdConns[0], vrfs)
	fs := servertest.Start(b, fileCfg, false)
	fileConns := []ipamv1.IPAMClient{connect(fs)}
	seedVRFs(b, fileConns[0], vrfs)
	const clients, perClient = 64, 8
	loadVRFs(b, etcdConns, vrfs, clients, perClient, "warm")
	loadVRFs(b, fileConns, vrfs, clients, perClient, "warm")
	if plainConns != nil {
		loadVRFs(b, plainConns, vrfs, clients, perClient, "warm")
	}
	txns0, changes0, secs0 := commitTotals(b, metricsAddrs)
	// A replica whose lease ends (expired under load, revoked as dead)
	// deletes its election key: the write lead flaps if that happens.
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	var leaseLosses atomic.Int64
	wch := etcdClient(b, c.endpoints()).Watch(wctx, "/bench/lead/", clientv3.WithPrefix(), clientv3.WithFilterPut())
	go func() {
		for resp := range wch {
			leaseLosses.Add(int64(len(resp.Events)))
		}
	}()
	var etcdTime, fileTime, plainTime time.Duration
	n, round := 0, 0
	for b.Loop() {
		name := fmt.Sprint("r", round)
		if plainConns != nil && round%2 == 1 { // plaintext first every other round
			d, _ := loadVRFs(b, plainConns, vrfs, clients, perClient, name)
			plainTime += d
		}
		d, _ := loadVRFs(b, etcdConns, vrfs, clients, perClient, name)
		etcdTime += d
		d, _ = loadVRFs(b, fileConns, vrfs, clients, perClient, name)
		fileTime += d
		if plainConns != nil && round%2 == 0 {
			d, _ := loadVRFs(b, plainConns, vrfs, clients, perClient, name)
			plainTime += d
		}
		n += clients * perClient
		round++
	}
	etcdRate, fileRate := float64(n)/etcdTime.Seconds(), float64(n)/fileTime.Seconds()
	b.ReportMetric(etcdRate, "etcd-allocs/s")
	b.ReportMetric(fileRate, "file-allocs/s")
	b.ReportMetric(etcdRate/fileRate, "ratio")
	if plainConns != nil {
		b.ReportMetric(plainTime.Seconds()/etcdTime.Seconds(), "mtls-ratio")
	}
	b.ReportMetric(float64(leaseLosses.Load()), "lease-losses")
	txns, changes, secs := commitTotals(b, metricsAddrs)
	if txns > txns0 {
		b.ReportMetric((changes-changes0)/(txns-txns0), "changes/txn")
		b.ReportMetric(1000*(secs-secs0)/(txns-txns0), "txn-ms")
	}
}

// commitTotals sums the group-commit counters of the replicas.
func commitTotals(b *testing.B, metricsAddrs []string) (txns, changes, secs float64) {
	for _, addr := range metricsAddrs {
		txns += metric(b, addr, "ipam_etcd_transactions_total")
		changes += metric(b, addr, "ipam_etcd_transaction_changes_total")
		secs += metric(b, addr, "ipam_etcd_transaction_seconds_total")
	}
	return txns, changes, secs
}
