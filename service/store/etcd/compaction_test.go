package etcd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server/servertest"
	"github.com/nephio-project/ipam/service/store/etcd"
)

// replica is an allocator following etcd through a Store with options.
type replica struct {
	a    *ipam.Allocator
	s    *etcd.Store
	logs *servertest.LogBuffer // the store's logs
}

func openReplica(t testing.TB, opts etcd.Options, publish ipam.Journal) *replica {
	t.Helper()
	r := &replica{logs: &servertest.LogBuffer{}}
	opts.Logger = slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s, err := etcd.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if publish != nil {
		s.Publish(publish)
	}
	r.a, r.s = ipam.New(ipam.WithCommitter(s), ipam.WithJournal(s)), s
	if err := s.Restore(r.a); err != nil {
		t.Fatal(err)
	}
	return r
}

// recorder is a Journal keeping every record it is given, as the watch
// hub would publish them.
type recorder struct {
	mu   sync.Mutex
	recs []ipam.Record
}

func (r *recorder) Append(recs []ipam.Record) func() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, recs...)
	return nil
}

// has says whether a record of op for key name was given.
func (r *recorder) has(op ipam.Op, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.recs {
		if rec.Op == op && rec.Key.Name == name {
			return true
		}
	}
	return false
}

// seedNet creates VRF vpc-1, aggregate 10.0.0.0/8, network net (a /20)
// and a range through a.
func seedNet(t testing.TB, a *ipam.Allocator) {
	t.Helper()
	o := func(name string) ipam.Key { return ipam.Key{Owner: "infra", Name: name} }
	if err := a.CreateNetworkInstance(context.Background(), ipam.NetworkInstance{Key: o("vpc-1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreatePrefix(context.Background(), ipam.Prefix{Key: o("agg"), NetworkInstance: "vpc-1", Kind: ipam.KindAggregate,
		Prefix: netip.MustParsePrefix("10.0.0.0/8")}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreatePrefix(context.Background(), ipam.Prefix{Key: o("net"), NetworkInstance: "vpc-1", Prefix: netip.MustParsePrefix("10.0.0.0/20"),
		Network: "net"}); err != nil {
		t.Fatal(err)
	}
	if err := a.CreateRange(context.Background(), ipam.IPRange{Key: o("range"), NetworkInstance: "vpc-1", Start: netip.MustParseAddr("10.0.15.0"),
		End: netip.MustParseAddr("10.0.15.200"), Labels: ipam.Labels{"range": "r"}}); err != nil {
		t.Fatal(err)
	}
}

var netSel = ipam.Labels{ipam.LabelNetworkInstance: "vpc-1", ipam.LabelNetworkName: "net"}

// retry runs op until it succeeds, as a client retries a replica that
// answered Unavailable (stale after its retries, or reloading).
func retry(t testing.TB, what string, op func() error) {
	t.Helper()
	var err error
	for attempt := range 200 {
		if err = op(); err == nil {
			return
		}
		time.Sleep(time.Duration(attempt%10) * 5 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

// churn commits n log entries through the replicas from workers
// goroutines: each allocates new keys and releases its keys older than
// 16, alternately a sub-prefix (pool) and an address, so the state stays
// small while the log grows. Keys are named round-worker-i.
func churn(t testing.TB, rs []*replica, round string, workers, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; i < n/workers; i++ {
				r := rs[(w+i)%len(rs)]
				k := ipam.Key{Owner: "o", Namespace: "ns", Name: fmt.Sprintf("%s-%d-%d", round, w, i/2)}
				if i%2 == 1 {
					k.Name = fmt.Sprintf("%s-%d-%d", round, w, i/2-8)
					if i/2 < 8 {
						k.Name = fmt.Sprintf("%s-%d-r%d", round, w, i) // a range address
						retry(t, "allocate "+k.Name, func() error {
							_, err := r.a.Allocate(context.Background(), ipam.Allocation{Key: k, Selector: ipam.Labels{ipam.LabelNetworkInstance: "vpc-1", "range": "r"}})
							return err
						})
						continue
					}
					retry(t, "release "+k.Name, func() error { return r.a.Release(context.Background(), k) })
					continue
				}
				req := ipam.Allocation{Key: k, Selector: netSel}
				if i%4 == 2 {
					req = ipam.Allocation{Key: k, Kind: ipam.KindPool, PrefixLength: 28, Selector: ipam.Labels{ipam.LabelNetworkInstance: "vpc-1"}}
				}
				retry(t, "allocate "+k.Name, func() error { _, err := r.a.Allocate(context.Background(), req); return err })
			}
		})
	}
	wg.Wait()
}

// etcdClient is a plain client to inspect and disturb the keys.
func etcdClient(t testing.TB, eps []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// layout is what the store's keys under a prefix hold.
type layout struct {
	head      uint64         // the head's entry
	headRev   int64          // the head's mod revision
	logKeys   int64          // keys under log/
	firstLog  uint64         // the first entry under log/ (0: none)
	ptr       map[string]any // the snapshot pointer (nil: none)
	ptrSeq    uint64
	snapshots map[string]int // chunk keys per snapshot id
}

func readLayout(t testing.TB, cli *clientv3.Client, prefix string) layout {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var l layout
	resp, err := cli.Get(ctx, prefix+"head")
	if err != nil {
		t.Fatal(err)
	} else if len(resp.Kvs) > 0 {
		l.head, _ = strconv.ParseUint(string(resp.Kvs[0].Value), 10, 64)
		l.headRev = resp.Kvs[0].ModRevision
	}
	at := clientv3.WithRev(resp.Header.Revision) // every read sees the same keys
	resp, err = cli.Get(ctx, prefix+"log/", clientv3.WithPrefix(), clientv3.WithCountOnly(), at)
	if err != nil {
		t.Fatal(err)
	}
	l.logKeys = resp.Count
	if resp, err = cli.Get(ctx, prefix+"log/", clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1), at); err != nil {
		t.Fatal(err)
	} else if len(resp.Kvs) > 0 {
		l.firstLog, _ = strconv.ParseUint(strings.TrimPrefix(string(resp.Kvs[0].Key), prefix+"log/"), 10, 64)
	}
	if resp, err = cli.Get(ctx, prefix+"snapshot", at); err != nil {
		t.Fatal(err)
	} else if len(resp.Kvs) > 0 {
		if err := json.Unmarshal(resp.Kvs[0].Value, &l.ptr); err != nil {
			t.Fatal(err)
		}
		l.ptrSeq = uint64(l.ptr["seq"].(float64))
	}
	l.snapshots = map[string]int{}
	if resp, err = cli.Get(ctx, prefix+"snapshots/", clientv3.WithPrefix(), clientv3.WithKeysOnly(), at); err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		id, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix+"snapshots/"), "/")
		l.snapshots[id]++
	}
	return l
}

// checkLayout fails unless the keys hold exactly one complete snapshot,
// named by the pointer, and the log entries after it up to the head.
func checkLayout(t testing.TB, l layout) {
	t.Helper()
	if l.ptr == nil {
		t.Fatal("no snapshot pointer")
	}
	id, chunks := l.ptr["id"].(string), int(l.ptr["chunks"].(float64))
	if len(l.snapshots) != 1 || l.snapshots[id] != chunks {
		t.Fatalf("snapshot chunks %v, want only %s with %d chunks", l.snapshots, id, chunks)
	}
	if want := int64(l.head - l.ptrSeq); l.logKeys != want {
		t.Fatalf("%d log keys, want %d (head %d, snapshot at %d)", l.logKeys, want, l.head, l.ptrSeq)
	}
	if l.logKeys > 0 && l.firstLog != l.ptrSeq+1 {
		t.Fatalf("the log starts at entry %d, the snapshot is at %d", l.firstLog, l.ptrSeq)
	}
}

// waitLayout waits until cond holds for the keys under prefix.
func waitLayout(t testing.TB, cli *clientv3.Client, prefix string, what string, cond func(layout) bool) layout {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		l := readLayout(t, cli, prefix)
		if cond(l) {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: head %d, snapshot at %d, %d log keys, chunks %v", what, l.head, l.ptrSeq, l.logKeys, l.snapshots)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// same fails unless every replica holds the state of want.
func same(t testing.TB, want *ipam.Allocator, rs map[string]*ipam.Allocator) {
	t.Helper()
	w := snapshot(want)
	for name, a := range rs {
		if got := snapshot(a); got != w {
			t.Fatalf("replica %s differs:\n%s\nwant\n%s", name, got, w)
		}
	}
}

// TestLogStaysBounded: two replicas commit thousands of entries with a
// snapshot every 200: the log keys stay bounded by the snapshots, one
// complete snapshot (of several chunks) remains, and a replica started
// afterwards restores the same state from the snapshot and the log tail.
func TestLogStaysBounded(t *testing.T) {
	const every, entries = 200, 3200
	c := startCluster(t, 1)
	cli := etcdClient(t, c.endpoints())
	opts := etcd.Options{Endpoints: c.endpoints(), Prefix: "/bounded/", SnapshotEvery: every, SnapshotChunkBytes: 512}
	a, b := openReplica(t, opts, nil), openReplica(t, opts, nil)
	seedNet(t, a.a)
	waitApplied(t, b.s, a.s.Applied())

	var maxKeys atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			resp, err := cli.Get(context.Background(), "/bounded/log/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err == nil && resp.Count > maxKeys.Load() {
				maxKeys.Store(resp.Count)
			}
		}
	}()
	churn(t, []*replica{a, b}, "c", 8, entries)
	close(stop)
	<-sampled

	// A round that lost the race to the last snapshot may still be
	// deleting its chunks: wait for it too.
	l := waitLayout(t, cli, "/bounded/", "the last snapshot round", func(l layout) bool { return l.head-l.ptrSeq < every && len(l.snapshots) == 1 })
	checkLayout(t, l)
	if l.head < entries {
		t.Fatalf("head at entry %d, want at least %d", l.head, entries)
	}
	if chunks := int(l.ptr["chunks"].(float64)); chunks < 2 {
		t.Fatalf("the snapshot has %d chunk, want several (512 bytes each)", chunks)
	}
	t.Logf("%d entries committed; at most %d log keys seen during the run; now %d log keys after the snapshot at entry %d (%v bytes, %d chunks); %d snapshot rounds won",
		l.head, maxKeys.Load(), l.logKeys, l.ptrSeq, l.ptr["size"], l.snapshots[l.ptr["id"].(string)],
		a.logs.Count("snapshot written")+b.logs.Count("snapshot written"))

	// A tail after the snapshot, then a replica starting now.
	churn(t, []*replica{a}, "tail", 1, 6)
	waitApplied(t, b.s, a.s.Applied())
	l = readLayout(t, cli, "/bounded/")
	if l.logKeys == 0 || l.ptr == nil {
		t.Fatalf("want a snapshot and a log tail: %d log keys, pointer %v", l.logKeys, l.ptr)
	}
	fresh := openReplica(t, opts, nil)
	same(t, a.a, map[string]*ipam.Allocator{"b": b.a, "fresh": fresh.a})
	if fresh.logs.Count(fmt.Sprintf("snapshot_entry=%d entries=%d", l.ptrSeq, l.logKeys)) != 1 {
		t.Fatalf("the fresh replica did not restore from the snapshot at %d and %d entries:\n%s", l.ptrSeq, l.logKeys, fresh.logs.String())
	}
}

// TestReplicaStoppedWhileTruncatedRestores: a replica stops; the others
// commit, snapshot and truncate the log (and compact etcd's history) far
// past it; it starts again, restores and serves, and all agree.
func TestReplicaStoppedWhileTruncatedRestores(t *testing.T) {
	const every = 50
	c := startCluster(t, 1)
	cli := etcdClient(t, c.endpoints())
	opts := etcd.Options{Endpoints: c.endpoints(), Prefix: "/stopped/", SnapshotEvery: every}
	a, b := openReplica(t, opts, nil), openReplica(t, opts, nil)
	seedNet(t, a.a)
	churn(t, []*replica{a, b}, "before", 2, 40)
	waitApplied(t, b.s, a.s.Applied())
	stoppedAt := readLayout(t, cli, "/stopped/").head
	b.s.Close()

	churn(t, []*replica{a}, "while", 4, 6*every)
	l := waitLayout(t, cli, "/stopped/", "the last snapshot round", func(l layout) bool { return l.head-l.ptrSeq < every })
	checkLayout(t, l)
	if l.ptrSeq <= stoppedAt+every {
		t.Fatalf("snapshot at %d, want well past entry %d where the replica stopped", l.ptrSeq, stoppedAt)
	}

	b = openReplica(t, opts, nil)
	same(t, a.a, map[string]*ipam.Allocator{"restarted": b.a})
	churn(t, []*replica{b, a}, "after", 2, 20)
	waitApplied(t, a.s, b.s.Applied())
	waitApplied(t, b.s, a.s.Applied())
	same(t, a.a, map[string]*ipam.Allocator{"restarted": b.a, "fresh": openReplica(t, opts, nil).a})
}

// proxy forwards TCP connections to target until partitioned: then it
// cuts every connection and closes new ones, as a network partition
// between one replica and etcd would. Stalled, it keeps every connection
// and accepts new ones but forwards no byte, as a process that does not
// answer would; stopped, it refuses new connections, as the address of a
// process that is gone does.
type proxy struct {
	l      net.Listener
	mu     sync.Mutex
	target string
	cut    bool
	stuck  bool
	conns  map[net.Conn]bool
}

func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: strings.TrimPrefix(target, "http://"), conns: map[net.Conn]bool{}}
	t.Cleanup(func() { l.Close(); p.partition() })
	go p.serve()
	return p
}

func (p *proxy) endpoint() string { return "http://" + p.l.Addr().String() }

// addr is the proxy's host:port.
func (p *proxy) addr() string { return p.l.Addr().String() }

// retarget forwards the next connections to target.
func (p *proxy) retarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}

func (p *proxy) serve() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut, target := p.cut, p.target
		p.mu.Unlock()
		if cut {
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = true, true
		p.mu.Unlock()
		go func() { p.copy(out, in); out.Close() }()
		go func() { p.copy(in, out); in.Close() }()
	}
}

// copy forwards what src sends to dst, holding it while stalled.
func (p *proxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for {
			p.mu.Lock()
			stuck := p.stuck
			p.mu.Unlock()
			if !stuck {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut, p.stuck = true, false
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// stall stops forwarding bytes, on every connection and the next ones.
func (p *proxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stuck = true
}

// stop closes the listener and every connection: new connections are
// refused.
func (p *proxy) stop() {
	p.l.Close()
	p.partition()
}

func (p *proxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut, p.stuck = false, false
}

// TestCompactedWatchRecovers: a replica is cut off from etcd while the
// other commits, snapshots, truncates the log, and etcd's history is
// compacted above the replica's watch. When the network heals, its watch
// gets ErrCompacted from etcd: it reloads from the snapshot and the log
// by itself, its watchers get the changes it missed (puts and deletes),
// it serves again, and every replica agrees.
func TestCompactedWatchRecovers(t *testing.T) {
	const every = 100
	c := startCluster(t, 1)
	cli := etcdClient(t, c.endpoints())
	p := startProxy(t, c.endpoints()[0])
	a := openReplica(t, etcd.Options{Endpoints: c.endpoints(), Prefix: "/compacted/", SnapshotEvery: every}, nil)
	seedNet(t, a.a)
	churn(t, []*replica{a}, "before", 2, 60)
	released := ipam.Key{Owner: "o", Namespace: "ns", Name: "released-meanwhile"}
	if _, err := a.a.Allocate(context.Background(), ipam.Allocation{Key: released, Selector: netSel}); err != nil {
		t.Fatal(err)
	}
	watched := &recorder{}
	b := openReplica(t, etcd.Options{Endpoints: []string{p.endpoint()}, Prefix: "/compacted/", SnapshotEvery: every,
		RequestTimeout: 2 * time.Second}, watched)
	waitApplied(t, b.s, a.s.Applied())
	watchedAt := b.s.Applied()

	p.partition()
	churn(t, []*replica{a}, "while", 4, 3*every)
	if err := a.a.Release(context.Background(), released); err != nil {
		t.Fatal(err)
	}
	rev := readLayout(t, cli, "/compacted/").headRev
	if _, err := cli.Compact(context.Background(), rev); err != nil {
		t.Fatal(err)
	}
	t.Logf("compacted etcd's history to revision %d; the cut-off replica is at %d", rev, watchedAt)
	if b.s.Applied() != watchedAt {
		t.Fatalf("the cut-off replica moved from %d to %d", watchedAt, b.s.Applied())
	}
	p.heal()

	waitApplied(t, b.s, a.s.Applied())
	if b.logs.Count("etcd: reloaded") == 0 || b.logs.Count("etcd compacted its history") == 0 {
		t.Fatalf("the replica caught up without reloading:\n%s", b.logs.String())
	}
	same(t, a.a, map[string]*ipam.Allocator{"recovered": b.a})
	// Watchers saw what it missed: an allocation released meanwhile, and
	// one made meanwhile.
	if !watched.has(ipam.OpDeleteAllocation, released.Name) || !watched.has(ipam.OpPutAllocation, "while-0-30") {
		t.Fatal("the recovered replica's watchers did not get the changes of the reload")
	}
	churn(t, []*replica{b, a}, "after", 2, 40)
	waitApplied(t, a.s, b.s.Applied())
	waitApplied(t, b.s, a.s.Applied())
	same(t, a.a, map[string]*ipam.Allocator{"recovered": b.a, "fresh": openReplica(t, etcd.Options{Endpoints: c.endpoints(), Prefix: "/compacted/"}, nil).a})
}

// TestRacingSnapshotsLeaveOneValid: two replicas at the same entry write
// a snapshot at the same time, round after round: one complete snapshot
// remains each time, the loser's chunks are gone, and a fresh replica
// restores the same state from it.
func TestRacingSnapshotsLeaveOneValid(t *testing.T) {
	c := startCluster(t, 1)
	cli := etcdClient(t, c.endpoints())
	opts := etcd.Options{Endpoints: c.endpoints(), Prefix: "/race/", SnapshotEvery: -1, SnapshotChunkBytes: 512}
	a, b := openReplica(t, opts, nil), openReplica(t, opts, nil)
	seedNet(t, a.a)
	for round := range 6 {
		churn(t, []*replica{a, b}, fmt.Sprint("r", round), 2, 30)
		waitApplied(t, a.s, b.s.Applied())
		waitApplied(t, b.s, a.s.Applied())
		var wg sync.WaitGroup
		for _, r := range []*replica{a, b} {
			wg.Go(func() {
				if err := r.s.Snapshot(r.a); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		l := readLayout(t, cli, "/race/")
		checkLayout(t, l)
		if l.logKeys != 0 {
			t.Fatalf("round %d: %d log keys left after a snapshot at the head", round, l.logKeys)
		}
		same(t, a.a, map[string]*ipam.Allocator{"fresh": openReplica(t, opts, nil).a})
	}
	lost := a.logs.Count("won the round") + b.logs.Count("won the round")
	t.Logf("6 rounds: %d lost a race after writing their chunks", lost)
}

// TestTornSnapshotIgnored: chunks written without the pointer flip (a
// replica died mid-snapshot) are ignored by restores and deleted by the
// next snapshot; a pointer whose chunks do not match its checksum makes
// a restore fail instead of loading a wrong state.
func TestTornSnapshotIgnored(t *testing.T) {
	c := startCluster(t, 1)
	cli := etcdClient(t, c.endpoints())
	opts := etcd.Options{Endpoints: c.endpoints(), Prefix: "/torn/", SnapshotEvery: -1, SnapshotChunkBytes: 1024}
	a := openReplica(t, opts, nil)
	seedNet(t, a.a)
	churn(t, []*replica{a}, "x", 1, 30)
	if err := a.s.Snapshot(a.a); err != nil {
		t.Fatal(err)
	}
	churn(t, []*replica{a}, "y", 1, 10)
	head := readLayout(t, cli, "/torn/").head
	torn := fmt.Sprintf("/torn/snapshots/%020d-TORNTORNTORNTORN/", head)
	for i := range 3 {
		if _, err := cli.Put(context.Background(), fmt.Sprintf("%s%06d", torn, i), "garbage"); err != nil {
			t.Fatal(err)
		}
	}
	same(t, a.a, map[string]*ipam.Allocator{"fresh": openReplica(t, opts, nil).a})

	churn(t, []*replica{a}, "z", 1, 4)
	if err := a.s.Snapshot(a.a); err != nil {
		t.Fatal(err)
	}
	checkLayout(t, readLayout(t, cli, "/torn/")) // the torn chunks are gone

	// Corrupt a chunk the pointer names: restoring refuses it.
	l := readLayout(t, cli, "/torn/")
	if _, err := cli.Put(context.Background(), fmt.Sprintf("/torn/snapshots/%s/%06d", l.ptr["id"], 0), "garbage"); err != nil {
		t.Fatal(err)
	}
	s, err := etcd.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Restore(ipam.New(ipam.WithCommitter(s))); err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("restore from a corrupt snapshot: %v, want a checksum error", err)
	}
}
