package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
)

// bigSync is a valid Sync of n address allocations in network "big"
// (10.16.0.0/12), each with a 200-byte name and labels labels of the
// largest size (317-byte keys, 63-byte values), or without labels 4
// labels of 63-byte values: 100,000 such items are close to the message
// limit.
func bigSync(owner string, n, labels int) *ipamv1.SyncRequest {
	req := &ipamv1.SyncRequest{Owner: owner, Allocations: make([]*ipamv1.Allocation, n)}
	shared := map[string]string{}
	if labels > 0 {
		for l := range labels {
			shared[fmt.Sprintf("%0253d/%063d", l, l)] = strings.Repeat("v", ipam.MaxLabelValueLength)
		}
	} else {
		for l := range 4 {
			shared[fmt.Sprintf("example.com/label-%d", l)] = strings.Repeat("v", ipam.MaxLabelValueLength)
		}
	}
	for i := range req.Allocations {
		req.Allocations[i] = &ipamv1.Allocation{
			Key:             &ipamv1.Key{Namespace: "default", Name: fmt.Sprintf("%0200d", i)},
			NetworkInstance: "vpc-1",
			Selector:        map[string]string{ipam.LabelNetworkName: "big"},
			Labels:          shared,
		}
	}
	return req
}

// seededBig returns an allocator over a file store in dir (without
// fsync), as ipam-server runs it, holding vpc-1 with aggregate 10.0.0.0/8
// and network "big" 10.16.0.0/12, and the store to close.
func seededBig(tb testing.TB, dir string) (*ipam.Allocator, Store) {
	tb.Helper()
	store, err := openFileStore(Config{DataDir: dir, NoSync: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	hub := NewHub(store, 0, nil)
	a := ipam.New(ipam.WithJournal(hub))
	if err := store.Restore(a); err != nil {
		tb.Fatal(err)
	}
	hub.Attach(a)
	k := func(name string) ipam.Key { return ipam.Key{Owner: "seed", Namespace: "default", Name: name} }
	if _, err := a.Sync(context.Background(), ipam.SyncRequest{Owner: "seed",
		NetworkInstances: []ipam.NetworkInstance{{Key: k("vpc-1")}},
		Prefixes: []ipam.Prefix{
			{Key: k("aggregate0"), NetworkInstance: "vpc-1", Kind: ipam.KindAggregate, Prefix: netip.MustParsePrefix("10.0.0.0/8")},
			{Key: k("big"), NetworkInstance: "vpc-1", Kind: ipam.KindNetwork, Prefix: netip.MustParsePrefix("10.16.0.0/12"), Network: "big"},
		}}); err != nil {
		tb.Fatal(err)
	}
	return a, store
}

// heapPeak samples the bytes of heap objects (live and not yet swept)
// every 100µs until stop is called, which returns the largest sample.
func heapPeak() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	ended := make(chan struct{})
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() {
		metrics.Read(sample)
		if v := sample[0].Value.Uint64(); v > peak.Load() {
			peak.Store(v)
		}
	}
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
// the answer's encoding): B/op is what it allocates, peak/wire the largest heap it
// holds at once (above the heap before it) per byte of the encoded
// request, the multiplier the admission budget charges requests by.
func BenchmarkSyncMemory(b *testing.B) {
	for _, bc := range []struct {
		name      string
		n, labels int
	}{
		{"100k-items", 100_000, 0},
		{"2500-items-64-labels", 2_500, 64},
	} {
		b.Run(bc.name, func(b *testing.B) {
			wire, err := proto.Marshal(bigSync("bench", bc.n, bc.labels))
			if err != nil {
				b.Fatal(err)
			}
			codec := encoding.GetCodecV2("proto")
			var worst float64
			b.ReportAllocs()
			b.SetBytes(int64(len(wire)))
			for b.Loop() {
				b.StopTimer()
				a, store := seededBig(b, b.TempDir())
				svc := &Service{a: a}
				runtime.GC()
				before := heapObjects()
				stop := heapPeak()
				data := mem.BufferSlice{mem.SliceBuffer(append([]byte(nil), wire...))}
				b.StartTimer()
				req := &ipamv1.SyncRequest{}
				if err := codec.Unmarshal(data, req); err != nil {
					b.Fatal(err)
				}
				data = nil
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

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
