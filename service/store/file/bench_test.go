package file

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/store/record"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var benchSel = ipam.Labels{ipam.LabelNetworkInstance: "vpc-1", ipam.LabelNetworkName: "big"}

// benchNetwork creates vpc-1 (aggregate 10.0.0.0/8) holding the network
// 10.0.0.0/bits named big.
func benchNetwork(b testing.TB, a *ipam.Allocator, bits int) {
	b.Helper()
	_, err := a.Sync(context.Background(), ipam.SyncRequest{Owner: "infra",
		NetworkInstances: []ipam.NetworkInstance{{Key: ipam.Key{Name: "vpc-1"}, Prefixes: []ipam.VRFPrefix{{Prefix: pfx("10.0.0.0/8")}}}},
		Prefixes: []ipam.Prefix{{Key: ipam.Key{Name: "big"}, NetworkInstance: "vpc-1", Prefix: pfx(fmt.Sprintf("10.0.0.1/%d", bits)),
			Network: "big", Labels: ipam.Labels{ipam.LabelGateway: "true"}}}})
	if err != nil {
		b.Fatal(err)
	}
}

func benchKey(i int) ipam.Key {
	return ipam.Key{Owner: "bench", Namespace: "default", Name: fmt.Sprintf("a-%07d", i)}
}

// BenchmarkW5DurableAllocsPerSec: 64 clients allocate distinct addresses
// from one large network through a Store with fsync on; the log's group
// commit lets them share fsyncs. Reports acknowledged allocations per
// second. One iteration is 64 clients × 16 allocations.
func BenchmarkW5DurableAllocsPerSec(b *testing.B) {
	const clients, perClient = 64, 16
	s, err := Open(b.TempDir(), Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	a := ipam.New(ipam.WithJournal(s))
	if err := s.Restore(a); err != nil {
		b.Fatal(err)
	}
	benchNetwork(b, a, 10)
	var next atomic.Int64
	total := 0
	for b.Loop() {
		var wg sync.WaitGroup
		for range clients {
			wg.Go(func() {
				for range perClient {
					if _, err := a.Allocate(context.Background(), ipam.Allocation{Key: benchKey(int(next.Add(1))), Selector: benchSel}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		total += clients * perClient
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "allocs/s")
}

// BenchmarkW6HeapBytesPerAlloc: the live heap of n address allocations in
// one /12 network, after GC, per allocation (the core's in-memory state;
// the store keeps nothing per allocation).
func BenchmarkW6HeapBytesPerAlloc(b *testing.B) {
	const n = 200_000
	var perAlloc float64
	for b.Loop() {
		perAlloc = heapPerAlloc(b, n)
	}
	b.ReportMetric(perAlloc, "B/alloc")
}

func heapPerAlloc(b *testing.B, n int) float64 {
	a := ipam.New()
	benchNetwork(b, a, 12)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		if _, err := a.Allocate(context.Background(), ipam.Allocation{Key: benchKey(i), Selector: benchSel}); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(a)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

const restartAllocs = 1_000_000

// buildRestartStore writes restartAllocs allocations through a store in a
// new directory, with the default automatic snapshots, and closes it.
func buildRestartStore(b *testing.B) string {
	dir := b.TempDir()
	start := time.Now()
	s, err := Open(dir, Options{NoSync: true, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	a := ipam.New(ipam.WithJournal(s))
	if err := s.Restore(a); err != nil {
		b.Fatal(err)
	}
	benchNetwork(b, a, 11)
	// Packages of 10,000 addresses, one Sync (one batch) each.
	const perSync = 10_000
	for i := 0; i < restartAllocs; i += perSync {
		req := ipam.SyncRequest{Owner: "bench"}
		for j := i; j < min(i+perSync, restartAllocs); j++ {
			req.Allocations = append(req.Allocations, ipam.Allocation{Key: benchKey(j), Selector: benchSel})
		}
		if _, err := a.Sync(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.Logf("built a store of %d allocations in %s", restartAllocs, time.Since(start).Round(time.Millisecond))
	return dir
}

// BenchmarkW6RestartSeconds: Open and Restore of a store holding 1,000,000
// allocations (a snapshot and the log after it, as automatic snapshots
// leave it) into a fresh allocator. Reports seconds per restart (s) and the
// CPU time it took (cpu-s).
func BenchmarkW6RestartSeconds(b *testing.B) {
	dir := buildRestartStore(b)
	var a *ipam.Allocator
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		a = nil
		runtime.GC() // the previous iteration's allocator is garbage: a fresh process has none
		cpu0 := cpuTime()
		b.StartTimer()
		s, err := Open(dir, Options{Logger: quiet, SnapshotEvery: -1})
		if err != nil {
			b.Fatal(err)
		}
		a = ipam.New(ipam.WithJournal(s))
		if err := s.Restore(a); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += cpuTime() - cpu0
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	if restored := len(a.ListAllocations(ipam.Filter{Owner: "bench"})); restored != restartAllocs {
		b.Fatalf("restored %d allocations, want %d", restored, restartAllocs)
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s")
	// CPU seconds of the process per restart (both cores, GC included):
	// unlike s, it does not grow when other work shares the machine.
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s")
}

func typicalAllocation(i int) ipam.Record {
	k := benchKey(i)
	return ipam.Record{Op: ipam.OpPutAllocation, Key: k, Allocation: &ipam.AllocationRecord{
		Allocation: ipam.Allocation{Key: k, NetworkInstance: "vpc-1", Kind: ipam.KindNetwork, Selector: benchSel},
		Result:     ipam.Result{NetworkInstance: "vpc-1", Prefix: pfx("10.0.1.2/11"), Gateway: ip("10.0.0.1")},
	}}
}

// BenchmarkEncodeAllocation: Append's encoding of one address allocation.
func BenchmarkEncodeAllocation(b *testing.B) {
	rec := typicalAllocation(4711)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = record.Append(buf[:0], &rec)
	}
	b.ReportMetric(float64(len(buf)), "bytes/record")
}

// BenchmarkDecodeAllocation: Restore's decoding of one address allocation
// (one decoder for the whole stream and recycled records, as Restore does).
func BenchmarkDecodeAllocation(b *testing.B) {
	encs := make([][]byte, 1024)
	for i := range encs {
		rec := typicalAllocation(i)
		encs[i] = record.Append(nil, &rec)
	}
	var d record.Decoder
	slab := make([]ipam.AllocationRecord, restoreChunk) // recycled as Restore does
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%len(slab) == 0 {
			clear(slab)
			d.UseSlab(slab)
		}
		if _, err := d.Decode(encs[i%len(encs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkSettleIdle: what a settled read adds with durable reads when
// no change waits for an fsync (Allocator.Settle on a Store with every
// batch durable).
func BenchmarkSettleIdle(b *testing.B) {
	s, err := Open(b.TempDir(), Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	a := ipam.New(ipam.WithJournal(s), ipam.WithDurableReads())
	if err := s.Restore(a); err != nil {
		b.Fatal(err)
	}
	benchNetwork(b, a, 16)
	b.ReportAllocs()
	for b.Loop() {
		if err := a.Settle(); err != nil {
			b.Fatal(err)
		}
	}
}
