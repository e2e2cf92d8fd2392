package peerbench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"runtime"
	"runtime/metrics"
	"testing"

	goipam "github.com/metal-stack/go-ipam"

	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/store/file"
)

// The restart workload: a /16 network holding restartAllocs addresses,
// saved, then restored into a fresh instance; one operation is the
// restore. Ours is a restart on its file store: the store's snapshot is
// opened and restored from disk (file.Open and Store.Restore, which
// decodes and applies in two goroutines), as ipam-server does when it
// starts; go-ipam saves with Dump and restores with Load (the JSON of its
// memory backend, from memory); Kubernetes' service-IP bitmap saves with Snapshot
// and restores with Restore (a bitmap: it keeps no names, so its heap is
// a bit per address of the network). netipx keeps no state of its own to
// restore. Each
// also reports heap-B/alloc: the live heap of the restored instance per
// allocation.
func restartAllocs() int {
	if testing.Short() {
		return 100
	}
	return 10_000
}

func BenchmarkRestart(b *testing.B) {
	name := fmt.Sprintf("allocs=%dk", restartAllocs()/1000)
	if restartAllocs() < 1000 {
		name = fmt.Sprintf("allocs=%d", restartAllocs())
	}
	b.Run(name+"/ours", restartOurs)
	b.Run(name+"/go-ipam", restartGoIPAM)
	b.Run(name+"/k8s-bitmap", restartK8s)
}

// timeRestores times b.N restores, each after a collection (outside the
// timing) of the garbage the previous ones left once it passes 1 MiB, and
// reports the live heap per allocation of the first restored instance as
// heap-B/alloc.
func timeRestores(b *testing.B, restore func() any) {
	var kept any
	var heap float64
	var atGC uint64 // heapAllocs at the last collection
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		// A restart begins in a fresh process: the previous iteration's
		// instance is garbage that a new process does not have to
		// collect (as in BenchmarkW6RestartSeconds of the file store).
		// Every restore of ours and of go-ipam leaves over 1 MiB; the
		// bitmap's leaves 15 KB, and collecting after each of them would
		// make its row take minutes.
		if kept != nil {
			if heapAllocs()-atGC > 1<<20 {
				b.StopTimer()
				runtime.GC()
				atGC = heapAllocs()
				b.StartTimer()
			}
			restore()
			continue
		}
		b.StopTimer()
		before := liveHeap()
		b.StartTimer()
		kept = restore()
		b.StopTimer()
		heap = float64(liveHeap()-before) / float64(restartAllocs())
		atGC = heapAllocs()
		b.StartTimer()
	}
	b.ReportMetric(heap, "heap-B/alloc")
	runtime.KeepAlive(kept)
}

// heapAllocs returns the bytes allocated on the heap since the program
// started.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// liveHeap returns the live heap after two collections (the second one
// frees what sync.Pools let go of in the first).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func restartOurs(b *testing.B) {
	ctx := context.Background()
	src := ipam.New()
	key := func(name string) ipam.Key { return ipam.Key{Owner: "bench", Name: name} }
	if _, err := src.Sync(ctx, ipam.SyncRequest{Owner: "bench",
		NetworkInstances: []ipam.NetworkInstance{{Key: key("v"), Prefixes: []ipam.VRFPrefix{{Prefix: netip.MustParsePrefix("10.0.0.0/8")}}}},
		Prefixes:         []ipam.Prefix{{Key: key("net"), NetworkInstance: "v", Prefix: netip.MustParsePrefix("10.0.0.0/16"), Network: "net"}},
	}); err != nil {
		b.Fatal(err)
	}
	sel := ipam.Labels{ipam.LabelNetworkInstance: "v", ipam.LabelNetworkName: "net"}
	req := ipam.SyncRequest{Owner: "pkg"}
	for i := range restartAllocs() {
		req.Allocations = append(req.Allocations, ipam.Allocation{Key: ipam.Key{Namespace: "default", Name: fmt.Sprint("a", i)}, Selector: sel})
	}
	if _, err := src.Sync(ctx, req); err != nil {
		b.Fatal(err)
	}
	// The saved state: a snapshot of the file store on disk (the page
	// cache, after the first run).
	dir := b.TempDir()
	quiet := file.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SnapshotEvery: -1}
	st, err := file.Open(dir, quiet)
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Restore(ipam.New()); err != nil { // an empty store: nothing to restore
		b.Fatal(err)
	}
	if err := st.Snapshot(src); err != nil {
		b.Fatal(err)
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	src = nil
	timeRestores(b, func() any {
		// What ipam-server does when it starts on the file store.
		st, err := file.Open(dir, quiet)
		if err != nil {
			b.Fatal(err)
		}
		a := ipam.New()
		if err := st.Restore(a); err != nil {
			b.Fatal(err)
		}
		b.StopTimer() // closing (an fsync of the log's acknowledgement) is no part of a restart
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		return a
	})
}

func restartGoIPAM(b *testing.B) {
	ctx := context.Background()
	// The state 10k AcquireIPs reach (the lowest addresses), loaded: go-ipam
	// copies its address map on each acquire, which would make the setup
	// take a minute.
	pfx := netip.MustParsePrefix("10.0.0.0/16")
	p := newGoIPAMPrefix(pfx, netip.Prefix{})
	for a := range restartAllocs() {
		p.IPs[addrIn(pfx, uint64(a+1)).String()] = true
	}
	src := loadGoIPAM(b, p)
	saved, err := src.Dump(ctx)
	if err != nil {
		b.Fatal(err)
	}
	src = nil
	timeRestores(b, func() any {
		g := goipam.New(ctx)
		if err := g.Load(ctx, saved); err != nil {
			b.Fatal(err)
		}
		return g
	})
}

func restartK8s(b *testing.B) {
	src := k8sBitmap()
	for range restartAllocs() {
		if _, ok, err := src.AllocateNext(); !ok || err != nil {
			b.Fatal("full", err)
		}
	}
	spec, saved := src.Snapshot()
	src = nil
	timeRestores(b, func() any {
		m := k8sBitmap()
		if err := m.Restore(spec, saved); err != nil {
			b.Fatal(err)
		}
		return m
	})
}
