package file

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nephio-project/ipam/service/internal/wal"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/store/record"
)

// logBuffer collects log lines of a store for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testLogger sends a store's log to the test log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tlogWriter{t}, nil))
}

type tlogWriter struct{ t testing.TB }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// openAllocator opens the store in dir and restores it into a fresh
// allocator that journals to it, with aopts.
func openAllocator(t testing.TB, dir string, opts Options, aopts ...ipam.Option) (*Store, *ipam.Allocator) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	a := ipam.New(append([]ipam.Option{ipam.WithJournal(s)}, aopts...)...)
	if err := s.Restore(a); err != nil {
		s.Close()
		t.Fatal(err)
	}
	return s, a
}

// state renders the whole state of a: its snapshot records, encoded, and
// a readable listing for failure messages.
func state(a *ipam.Allocator) (enc []byte, text string) {
	recs := a.Snapshot(nil)
	var b bytes.Buffer
	if err := writeSnapshot(&b, recs); err != nil {
		panic(err)
	}
	var sb strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&sb, "%s %s", r.Op, r.Key)
		switch {
		case r.NetworkInstance != nil:
			fmt.Fprintf(&sb, " %v", *r.NetworkInstance)
		case r.Prefix != nil:
			fmt.Fprintf(&sb, " %v", *r.Prefix)
		case r.Range != nil:
			fmt.Fprintf(&sb, " %v", *r.Range)
		case r.Allocation != nil:
			fmt.Fprintf(&sb, " %v", *r.Allocation)
		}
		sb.WriteByte('\n')
	}
	return b.Bytes(), sb.String()
}

func sameState(t *testing.T, got, want *ipam.Allocator) {
	t.Helper()
	ge, gt := state(got)
	we, wt := state(want)
	if !bytes.Equal(ge, we) {
		t.Fatalf("restored state differs:\n--- got\n%s--- want\n%s", gt, wt)
	}
}

var (
	sel1   = ipam.Labels{ipam.LabelNetworkInstance: "vpc-1", ipam.LabelNetworkName: "net1"}
	selV6  = ipam.Labels{ipam.LabelNetworkInstance: "vpc-1", ipam.LabelNetworkName: "net6"}
	selRng = ipam.Labels{ipam.LabelNetworkInstance: "vpc-1", "metal3.io/pool": "pool1"}
)

func infra(name string) ipam.Key { return ipam.Key{Owner: "infra", Namespace: "default", Name: name} }
func app(name string) ipam.Key   { return ipam.Key{Owner: "app", Namespace: "ns", Name: name} }

// step is one mutation of the workload.
type step struct {
	name string
	do   func(a *ipam.Allocator) error
}

// workload exercises every record kind: network instances with aggregates,
// prefixes of every kind, ranges with exclusions and pre-allocations,
// addresses, blocks, sub-prefixes, re-allocations, releases, Sync batches
// with pruning, package identities and owner generations, and deletions.
func workload() []step {
	alloc := func(r ipam.Allocation) func(a *ipam.Allocator) error {
		return func(a *ipam.Allocator) error { _, err := a.Allocate(context.Background(), r); return err }
	}
	prefix := func(p ipam.Prefix) func(a *ipam.Allocator) error {
		return func(a *ipam.Allocator) error { _, err := a.CreatePrefix(context.Background(), p); return err }
	}
	steps := []step{
		{"vpc-1", func(a *ipam.Allocator) error {
			return a.CreateNetworkInstance(context.Background(), ipam.NetworkInstance{Key: infra("vpc-1"), Labels: ipam.Labels{"tier": "core"},
				Prefixes: []ipam.VRFPrefix{{Prefix: pfx("10.0.0.0/8")}, {Prefix: pfx("2001:db8::/32"), Labels: ipam.Labels{"v6": "yes"}}}})
		}},
		{"vpc-2", func(a *ipam.Allocator) error {
			return a.CreateNetworkInstance(context.Background(), ipam.NetworkInstance{Key: infra("vpc-2")})
		}},
		{"agg 172.16/12", prefix(ipam.Prefix{Key: infra("agg172"), NetworkInstance: "vpc-1", Kind: ipam.KindAggregate, Prefix: pfx("172.16.0.0/12")})},
		{"net1", prefix(ipam.Prefix{Key: infra("net1"), NetworkInstance: "vpc-1", Prefix: pfx("10.0.1.1/24"), Network: "net1",
			Labels: ipam.Labels{ipam.LabelGateway: "true"}, Exclusions: []ipam.AddrRange{{Start: ip("10.0.1.250"), End: ip("10.0.1.254")}}})},
		{"net6", prefix(ipam.Prefix{Key: infra("net6"), NetworkInstance: "vpc-1", Prefix: pfx("2001:db8:0:1::1/64"), Network: "net6",
			Labels: ipam.Labels{ipam.LabelGateway: "true"}})},
		{"static", prefix(ipam.Prefix{Key: infra("static10"), NetworkInstance: "vpc-1", Prefix: pfx("10.0.1.10/24"), Network: "net1",
			Labels: ipam.Labels{"nephio.org/interface": "n3"}})},
		{"pool", prefix(ipam.Prefix{Key: infra("pool"), NetworkInstance: "vpc-1", Kind: ipam.KindPool, Prefix: pfx("10.2.0.0/16"), Labels: ipam.Labels{"purpose": "nat"}})},
		{"loopback", prefix(ipam.Prefix{Key: infra("lo"), NetworkInstance: "vpc-1", Kind: ipam.KindLoopback, Prefix: pfx("10.255.0.0/24")})},
		{"range", func(a *ipam.Allocator) error {
			return a.CreateRange(context.Background(), ipam.IPRange{Key: infra("pool1"), NetworkInstance: "vpc-1", Start: ip("10.0.1.100"), End: ip("10.0.1.120"),
				Labels:         ipam.Labels{"metal3.io/pool": "pool1"},
				Exclusions:     []ipam.AddrRange{{Start: ip("10.0.1.100"), End: ip("10.0.1.101")}},
				PreAllocations: map[string]netip.Addr{"claim1": ip("10.0.1.105")}})
		}},
		{"alloc a1", alloc(ipam.Allocation{Key: app("a1"), Selector: sel1, AddressFamily: ipam.IPv4, Labels: ipam.Labels{"app": "upf"}})},
		{"alloc n3 static", alloc(ipam.Allocation{Key: app("n3"), Selector: ipam.Labels{ipam.LabelNetworkInstance: "vpc-1", ipam.LabelNetworkName: "net1", "nephio.org/interface": "n3"}})},
		{"alloc v6", alloc(ipam.Allocation{Key: app("v6"), Selector: selV6})},
		{"alloc block", alloc(ipam.Allocation{Key: app("blk"), Selector: sel1, AddressFamily: ipam.IPv4, Count: 4})},
		{"alloc in range", alloc(ipam.Allocation{Key: app("m1"), Selector: selRng})},
		{"alloc pre-allocated", alloc(ipam.Allocation{Key: app("claim1"), Selector: selRng})},
		{"alloc pool /24", alloc(ipam.Allocation{Key: app("sub"), Kind: ipam.KindPool, PrefixLength: 24,
			Selector: ipam.Labels{ipam.LabelNetworkInstance: "vpc-1", "purpose": "nat"}, Labels: ipam.Labels{"carved": "yes"}})},
		{"alloc network /24", alloc(ipam.Allocation{Key: app("net9"), Kind: ipam.KindNetwork, PrefixLength: 24,
			Labels: ipam.Labels{ipam.LabelNetworkName: "net9"}, Selector: ipam.Labels{ipam.LabelNetworkInstance: "vpc-1", ipam.LabelPrefixKind: "aggregate"}, AddressFamily: ipam.IPv4})},
		{"alloc loopback", alloc(ipam.Allocation{Key: app("lo1"), Kind: ipam.KindLoopback, Selector: ipam.Labels{ipam.LabelNetworkInstance: "vpc-1"}, AddressFamily: ipam.IPv4})},
		{"alloc explicit", alloc(ipam.Allocation{Key: app("exact"), Prefix: pfx("10.0.1.77/24"), NetworkInstance: "vpc-1"})},
		{"relabel a1", alloc(ipam.Allocation{Key: app("a1"), Selector: sel1, AddressFamily: ipam.IPv4, Labels: ipam.Labels{"app": "smf"}})},
		{"re-allocate blk", alloc(ipam.Allocation{Key: app("blk"), Selector: sel1, AddressFamily: ipam.IPv4, Count: 2})},
		{"release m1", func(a *ipam.Allocator) error { return a.Release(context.Background(), app("m1")) }},
		{"sync pkg", func(a *ipam.Allocator) error {
			_, err := a.Sync(context.Background(), ipam.SyncRequest{Owner: "pkg", Identity: "pkg-id-1", Prune: true,
				Prefixes: []ipam.Prefix{{Key: ipam.Key{Name: "pkg-net"}, NetworkInstance: "vpc-1", Prefix: pfx("10.0.7.1/24"), Network: "pkgnet",
					Labels: ipam.Labels{ipam.LabelGateway: "true"}}},
				Allocations: []ipam.Allocation{
					{Key: ipam.Key{Namespace: "p", Name: "x"}, Selector: ipam.Labels{ipam.LabelNetworkInstance: "vpc-1", ipam.LabelNetworkName: "pkgnet"}},
					{Key: ipam.Key{Namespace: "p", Name: "y"}, Selector: ipam.Labels{ipam.LabelNetworkInstance: "vpc-1", ipam.LabelNetworkName: "pkgnet"}},
					{Key: ipam.Key{Namespace: "p", Name: "z"}, Selector: sel1, AddressFamily: ipam.IPv4},
				}})
			return err
		}},
		{"sync pkg prune, adopted", func(a *ipam.Allocator) error {
			_, err := a.Sync(context.Background(), ipam.SyncRequest{Owner: "pkg", Identity: "pkg-id-2", Adopt: true, Prune: true,
				Prefixes: []ipam.Prefix{{Key: ipam.Key{Name: "pkg-net"}, NetworkInstance: "vpc-1", Prefix: pfx("10.0.7.1/24"), Network: "pkgnet",
					Labels: ipam.Labels{ipam.LabelGateway: "true"}}},
				Allocations: []ipam.Allocation{
					{Key: ipam.Key{Namespace: "p", Name: "y"}, Selector: ipam.Labels{ipam.LabelNetworkInstance: "vpc-1", ipam.LabelNetworkName: "pkgnet"}},
					{Key: ipam.Key{Namespace: "p", Name: "w"}, Selector: ipam.Labels{ipam.LabelNetworkInstance: "vpc-1", ipam.LabelNetworkName: "pkgnet"}},
				}})
			return err
		}},
		{"sync gen, counted", func(a *ipam.Allocator) error {
			_, err := a.Sync(context.Background(), ipam.SyncRequest{Owner: "gen", Identity: "gen-id", CheckGeneration: true, Prune: true,
				Allocations: []ipam.Allocation{{Key: ipam.Key{Namespace: "g", Name: "x"}, Selector: sel1, AddressFamily: ipam.IPv4}}})
			return err
		}},
		{"sync gen2, counted", func(a *ipam.Allocator) error {
			_, err := a.Sync(context.Background(), ipam.SyncRequest{Owner: "gen2", Identity: "gen2-id", CheckGeneration: true, Generation: 6, Prune: true,
				Allocations: []ipam.Allocation{{Key: ipam.Key{Namespace: "g", Name: "y"}, Selector: sel1, AddressFamily: ipam.IPv4}}})
			return err
		}},
		{"sync gen2 emptied", func(a *ipam.Allocator) error {
			_, err := a.Sync(context.Background(), ipam.SyncRequest{Owner: "gen2", Identity: "gen2-id", CheckGeneration: true, Generation: 6, Prune: true})
			return err
		}},
		{"vpc-2 aggregate", prefix(ipam.Prefix{Key: infra("agg-v2"), NetworkInstance: "vpc-2", Kind: ipam.KindAggregate, Prefix: pfx("10.0.0.0/8")})},
		{"vpc-2 net", prefix(ipam.Prefix{Key: infra("net-v2"), NetworkInstance: "vpc-2", Prefix: pfx("10.0.1.0/24"), Network: "net1"})},
		{"vpc-2 alloc", alloc(ipam.Allocation{Key: app("v2"), Selector: ipam.Labels{ipam.LabelNetworkInstance: "vpc-2", ipam.LabelNetworkName: "net1"}})},
		{"vpc-2 release", func(a *ipam.Allocator) error { return a.Release(context.Background(), app("v2")) }},
		{"vpc-2 delete net", func(a *ipam.Allocator) error { return a.DeletePrefix(context.Background(), infra("net-v2")) }},
		{"vpc-2 delete agg", func(a *ipam.Allocator) error { return a.DeletePrefix(context.Background(), infra("agg-v2")) }},
		{"vpc-2 delete", func(a *ipam.Allocator) error { return a.DeleteNetworkInstance(context.Background(), infra("vpc-2")) }},
		{"range 2", func(a *ipam.Allocator) error {
			return a.CreateRange(context.Background(), ipam.IPRange{Key: infra("pool2"), NetworkInstance: "vpc-1", Start: ip("10.0.1.200"), End: ip("10.0.1.210"),
				Labels: ipam.Labels{"metal3.io/pool": "pool2"}})
		}},
		{"range 2 delete", func(a *ipam.Allocator) error { return a.DeleteRange(context.Background(), infra("pool2")) }},
	}
	for i := range 40 {
		steps = append(steps, step{fmt.Sprintf("fill %d", i), alloc(ipam.Allocation{Key: app(fmt.Sprintf("f%02d", i)), Selector: sel1, AddressFamily: ipam.IPv4})})
		if i%3 == 0 {
			steps = append(steps, step{fmt.Sprintf("release fill %d", i), func(a *ipam.Allocator) error { return a.Release(context.Background(), app(fmt.Sprintf("f%02d", i))) }})
		}
	}
	return steps
}

func runWorkload(t *testing.T, a *ipam.Allocator, steps []step) {
	t.Helper()
	for _, s := range steps {
		if err := s.do(a); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
}

func TestRestoreEmpty(t *testing.T) {
	dir := t.TempDir()
	s, a := openAllocator(t, dir, Options{})
	if got := a.ListNetworkInstances(ipam.Filter{}); len(got) != 0 {
		t.Fatalf("empty store restored %v", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Restore(ipam.New()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Restore after Close: %v", err)
	}
}

// TestReopenRestoresState runs the workload through a store, then restores
// it into a fresh allocator, with log only, with automatic snapshots every
// few records, and with an explicit snapshot in the middle.
func TestReopenRestoresState(t *testing.T) {
	for _, tc := range []struct {
		name      string
		every     int
		snapAfter int // take an explicit snapshot after this many steps; 0: none
	}{
		{"log only", -1, 0},
		{"automatic snapshots every 5 records", 5, 0},
		{"automatic snapshots every record", 1, 0},
		{"explicit snapshot midway", -1, 20},
		{"explicit snapshot at the end", -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			steps := workload()
			s, a := openAllocator(t, dir, Options{SnapshotEvery: tc.every})
			for i, st := range steps {
				if err := st.do(a); err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				if i+1 == tc.snapAfter {
					if err := s.Snapshot(a); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tc.snapAfter < 0 {
				if err := s.Snapshot(a); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			s2, b := openAllocator(t, dir, Options{SnapshotEvery: tc.every})
			sameState(t, b, a)
			// Owner generations survive, also of an emptied owner.
			for owner, want := range map[string]uint64{"gen": 1, "gen2": 7, "pkg": 0} {
				if got := b.OwnerOf(owner).Generation; got != want {
					t.Errorf("owner %s: generation %d after the restart, want %d", owner, got, want)
				}
			}
			// The restored allocator keeps journaling: one more change
			// survives another restart.
			if _, err := b.Allocate(context.Background(), ipam.Allocation{Key: app("after-restart"), Selector: sel1, AddressFamily: ipam.IPv4}); err != nil {
				t.Fatal(err)
			}
			if err := s2.Close(); err != nil {
				t.Fatal(err)
			}
			s3, c := openAllocator(t, dir, Options{SnapshotEvery: tc.every})
			defer s3.Close()
			sameState(t, c, b)
			if _, err := c.GetAllocation(app("after-restart")); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestConcurrentWithAutomaticSnapshots: many writers on two VRFs while
// snapshots run in the background; the restored state equals the final one.
func TestConcurrentWithAutomaticSnapshots(t *testing.T) {
	dir := t.TempDir()
	s, a := openAllocator(t, dir, Options{SnapshotEvery: 50})
	runWorkload(t, a, workload()[:5])
	if err := a.CreateNetworkInstance(context.Background(), ipam.NetworkInstance{Key: infra("vpc-3"), Prefixes: []ipam.VRFPrefix{{Prefix: pfx("10.0.0.0/8")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreatePrefix(context.Background(), ipam.Prefix{Key: infra("net-v3"), NetworkInstance: "vpc-3", Prefix: pfx("10.1.0.0/16"), Network: "n"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			sel := sel1
			if g%2 == 1 {
				sel = ipam.Labels{ipam.LabelNetworkInstance: "vpc-3", ipam.LabelNetworkName: "n"}
			}
			for i := range 60 {
				k := ipam.Key{Owner: fmt.Sprintf("o%d", g), Name: fmt.Sprintf("k%d", i)}
				if _, err := a.Allocate(context.Background(), ipam.Allocation{Key: k, Selector: sel, AddressFamily: ipam.IPv4}); err != nil {
					errs <- err
					return
				}
				if i%4 == 0 {
					if err := a.Release(context.Background(), k); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, b := openAllocator(t, dir, Options{SnapshotEvery: 50})
	defer s2.Close()
	sameState(t, b, a)
}

func TestAppendAfterClose(t *testing.T) {
	s, a := openAllocator(t, t.TempDir(), Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	err := a.CreateNetworkInstance(context.Background(), ipam.NetworkInstance{Key: infra("vpc-1")})
	if err == nil {
		t.Fatal("a change journaled to a closed store succeeded")
	}
	if err := s.Snapshot(a); !errors.Is(err, ErrClosed) {
		t.Fatalf("Snapshot after Close: %v", err)
	}
}

// TestTornTail cuts the newest log segment a few bytes short, as a crash
// in the middle of a write leaves it: the restore drops the whole last
// batch (a Sync of several records), keeps everything before it, and says
// so in the log.
func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func ip(s string) netip.Addr    { return netip.MustParseAddr(s) }

// unacknowledgeLast rewrites the ACKED file of dir (its format is in
// package wal's documentation) to the batch before the last acknowledged
// one, as it is after a crash during the last batch's write.
func unacknowledgeLast(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, "ACKED")
	b, err := os.ReadFile(path)
	if err != nil || len(b) != 48 {
		t.Fatalf("ACKED: %d bytes, %v", len(b), err)
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	var seq uint64
	for i := 0; i < 48; i += 24 {
		slot := b[i : i+24]
		if string(slot[:8]) == "WALACK\x00\x01" && crc32.Checksum(slot[:16], castagnoli) == binary.LittleEndian.Uint32(slot[16:20]) {
			seq = max(seq, binary.LittleEndian.Uint64(slot[8:16]))
		}
	}
	if seq == 0 {
		t.Fatal("ACKED holds no acknowledged batch")
	}
	for i := 0; i < 48; i += 24 {
		binary.LittleEndian.PutUint64(b[i+8:], seq-1)
		binary.LittleEndian.PutUint32(b[i+16:], crc32.Checksum(b[i:i+16], castagnoli))
	}
	if err := os.WriteFile(path, b, 0o640); err != nil {
		t.Fatal(err)
	}
}

func TestTornTail(t *testing.T) {
	for _, cut := range []int64{1, 3, 7} {
		t.Run(fmt.Sprintf("cut %d bytes", cut), func(t *testing.T) {
			dir := t.TempDir()
			s, a := openAllocator(t, dir, Options{SnapshotEvery: -1})
			runWorkload(t, a, workload())
			before := ipam.New()
			if err := before.Apply(a.Snapshot(nil)); err != nil {
				t.Fatal(err)
			}
			// The last batch: three new allocations in one Sync.
			if _, err := a.Sync(context.Background(), ipam.SyncRequest{Owner: "last", Allocations: []ipam.Allocation{
				{Key: ipam.Key{Name: "l1"}, Selector: sel1, AddressFamily: ipam.IPv4},
				{Key: ipam.Key{Name: "l2"}, Selector: sel1, AddressFamily: ipam.IPv4},
				{Key: ipam.Key{Name: "l3"}, Selector: sel1, AddressFamily: ipam.IPv4},
			}}); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			seg := newestSegment(t, dir)
			fi, err := os.Stat(seg)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(seg, fi.Size()-cut); err != nil {
				t.Fatal(err)
			}
			unacknowledgeLast(t, dir) // a torn batch was never acknowledged

			var logs logBuffer
			s2, b := openAllocator(t, dir, Options{SnapshotEvery: -1, Logger: logs.logger()})
			defer s2.Close()
			sameState(t, b, before)
			if !strings.Contains(logs.String(), "level=WARN") {
				t.Fatalf("no warning about the torn tail in the log:\n%s", logs.String())
			}
			t.Logf("log:\n%s", logs.String())
		})
	}
}

// newestSegment returns the path of the newest WAL segment in dir.
func newestSegment(t *testing.T, dir string) string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segment in %s: %v", dir, err)
	}
	return segs[len(segs)-1]
}

// writeRawLog appends payloads, one batch each, to the log in dir as a
// buggy or foreign writer would.
func writeRawLog(t *testing.T, dir string, payloads ...[]byte) {
	t.Helper()
	l, err := wal.Open(dir, wal.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Replay(func(io.Reader) error { return nil }, func([]byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, p := range payloads {
		if err := l.Enqueue(p).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreRejectsBadRecords: a record that passed the log's checksum but
// does not decode, or decodes but does not apply, fails Restore: serving a
// partial state could hand out taken addresses.
func TestRestoreRejectsBadRecords(t *testing.T) {
	vpc := ipam.Record{Op: ipam.OpPutNetworkInstance, Key: infra("vpc-1"), NetworkInstance: &ipam.NetworkInstance{Key: infra("vpc-1")}}
	orphan := ipam.Record{Op: ipam.OpPutPrefix, Key: infra("p"), Prefix: &ipam.Prefix{Key: infra("p"), NetworkInstance: "nowhere",
		Kind: ipam.KindAggregate, Prefix: pfx("10.0.0.0/8")}}
	for _, tc := range []struct {
		name     string
		payloads [][]byte
		want     error
	}{
		{"unknown version", [][]byte{record.Append(nil, &vpc), {9, 1, 0, 0, 0, 0}}, record.ErrMalformed},
		{"truncated record", [][]byte{record.Append(nil, &vpc)[:5]}, record.ErrMalformed},
		{"record that does not apply", [][]byte{record.Append(nil, &vpc), record.Append(nil, &orphan)}, ipam.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeRawLog(t, dir, tc.payloads...)
			s, err := Open(dir, Options{Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			err = s.Restore(ipam.New(ipam.WithJournal(s)))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Restore: %v, want %v", err, tc.want)
			}
			t.Log(err)
		})
	}
}

// TestRestoreManyChunks restores more records than one Apply chunk holds,
// from the log and from a snapshot.
func TestRestoreManyChunks(t *testing.T) {
	dir := t.TempDir()
	s, a := openAllocator(t, dir, Options{NoSync: true, SnapshotEvery: -1})
	if _, err := a.Sync(context.Background(), ipam.SyncRequest{Owner: "infra",
		NetworkInstances: []ipam.NetworkInstance{{Key: ipam.Key{Name: "vpc-1"}, Prefixes: []ipam.VRFPrefix{{Prefix: pfx("10.0.0.0/8")}}}},
		Prefixes:         []ipam.Prefix{{Key: ipam.Key{Name: "big"}, NetworkInstance: "vpc-1", Prefix: pfx("10.0.0.1/16"), Network: "big"}}}); err != nil {
		t.Fatal(err)
	}
	alloc := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := a.Allocate(context.Background(), ipam.Allocation{Key: benchKey(i), Selector: benchSel}); err != nil {
				t.Fatal(err)
			}
		}
	}
	alloc(0, 2*restoreChunk+17)
	if err := s.Snapshot(a); err != nil {
		t.Fatal(err)
	}
	alloc(2*restoreChunk+17, 3*restoreChunk+100)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, b := openAllocator(t, dir, Options{SnapshotEvery: -1})
	defer s2.Close()
	sameState(t, b, a)
}

func TestOpenLocked(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s2, err := Open(dir, Options{Logger: testLogger(t)}); !errors.Is(err, wal.ErrLocked) {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("second Open of one directory: %v, want wal.ErrLocked", err)
	}
}
