package server_test

import (
	"context"
	"log/slog"
	"net/netip"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/store/file"
)

// bigAllocator returns an allocator over a file store in dir (without
// fsync), as ipam-server runs it, holding vpc-big with aggregate
// 10.0.0.0/8 and network "big" 10.16.0.0/12, and the store to close.
func bigAllocator(tb testing.TB, dir string) (*ipam.Allocator, *server.Hub, *file.Store) {
	tb.Helper()
	store, err := file.Open(dir, file.Options{Logger: slog.New(slog.DiscardHandler), NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	hub := server.NewHub(store, 0, nil)
	a := ipam.New(ipam.WithJournal(hub))
	if err := store.Restore(a); err != nil {
		tb.Fatal(err)
	}
	hub.Attach(a)
	k := func(name string) ipam.Key { return ipam.Key{Owner: "seed", Namespace: "default", Name: name} }
	if _, err := a.Sync(context.Background(), ipam.SyncRequest{Owner: "seed",
		NetworkInstances: []ipam.NetworkInstance{{Key: k("vpc-big")}},
		Prefixes: []ipam.Prefix{
			{Key: k("aggregate0"), NetworkInstance: "vpc-big", Kind: ipam.KindAggregate, Prefix: netip.MustParsePrefix("10.0.0.0/8")},
			{Key: k("big"), NetworkInstance: "vpc-big", Kind: ipam.KindNetwork, Prefix: netip.MustParsePrefix("10.16.0.0/12"), Network: "big"},
		}}); err != nil {
		tb.Fatal(err)
	}
	return a, hub, store
}

// heapObjects is the bytes of heap objects, live and not yet swept.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// heapPeak samples heapObjects every 100µs until the returned function
// is called, which returns the largest sample.
func heapPeak() (stop func() uint64) {
	var peak atomic.Uint64
	read := func() {
		if v := heapObjects(); v > peak.Load() {
			peak.Store(v)
		}
	}
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(100 * time.Microsecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				read()
			}
		}
	}()
	return func() uint64 {
		read()
		close(done)
		<-ended
		return peak.Load()
	}
}

// BenchmarkSyncMemory measures what decoding and applying one large Sync
// costs, as the server does it (the gRPC codec's decode, the handler's
// conversion, the core's Sync on a fresh allocator over the file store,
// the answer's encoding) for the requests of TestMemoryBudgetUnderLoad:
// B/op is what it allocates, peak/wire the largest heap it holds at once
// (above the heap before it) per byte of the encoded request, what
// server.RequestMemoryFactor stands for.
func BenchmarkSyncMemory(b *testing.B) {
	for _, bc := range []struct {
		name      string
		n, labels int
	}{
		{"100k-items", ipam.MaxSyncItems, 0},
		{"2500-items-64-labels", 2_500, ipam.MaxLabels},
	} {
		b.Run(bc.name, func(b *testing.B) {
			wire, err := proto.Marshal(largeSync("bench", bc.n, bc.labels))
			if err != nil {
				b.Fatal(err)
			}
			codec := encoding.GetCodecV2("proto")
			var worst float64
			b.ReportAllocs()
			b.SetBytes(int64(len(wire)))
			for b.Loop() {
				b.StopTimer()
				a, hub, store := bigAllocator(b, b.TempDir())
				svc := server.NewService(a, hub, nil)
				runtime.GC()
				before := heapObjects()
				stop := heapPeak()
				b.StartTimer()
				// The received copy is referenced by nothing once decoded, as
				// in the server.
				req := &ipamv1.SyncRequest{}
				if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(append([]byte(nil), wire...))}, req); err != nil {
					b.Fatal(err)
				}
				resp, err := svc.Sync(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				out, err := codec.Marshal(resp)
				if err != nil {
					b.Fatal(err)
				}
				out.Free()
				b.StopTimer()
				if m := float64(stop()-before) / float64(len(wire)); m > worst {
					worst = m
				}
				runtime.KeepAlive(svc)
				if err := store.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(worst, "peak/wire")
			b.ReportMetric(float64(len(wire))/(1<<20), "wire-MiB")
		})
	}
}
