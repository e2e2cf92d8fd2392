package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	nodev1 "github.com/nephio-project/ipam/api/proto/nvidia/ipam/node/v1"
	"github.com/nephio-project/ipam/service/node/nodeipam"
)

// BenchmarkN1NodeAllocate measures what a node's pods see: Allocate then
// Deallocate through the real gRPC server on a unix socket and the real
// file store with fsync. With one caller it reports the p99 latency of
// Allocate; with 64 concurrent callers, the durable allocations per
// second (each one fsynced before its answer, and released again).
func BenchmarkN1NodeAllocate(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) { benchNodeAllocate(b, callers) })
	}
}

func benchNodeAllocate(b *testing.B, callers int) {
	e, conn := serve(b)
	blk := &nodeipam.Block{Network: netip.MustParsePrefix("10.0.0.0/16"), Start: netip.MustParseAddr("10.0.0.1"),
		End: netip.MustParseAddr("10.0.255.254"), Gateway: netip.MustParseAddr("10.0.0.1")}
	if _, err := e.SetPool(context.Background(), nodeipam.PoolKey{Type: nodeipam.IPPool, Name: "pool1"}, blk); err != nil {
		b.Fatal(err)
	}
	c := nodev1.NewIPAMServiceClient(conn)
	var mu sync.Mutex
	var lat []time.Duration
	var next atomic.Int64
	b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
	if callers == 1 {
		b.SetParallelism(1)
	}
	b.ResetTimer()
	start := time.Now()
	work := func(pb interface{ Next() bool }) {
		var mine []time.Duration
		for pb.Next() {
			p := params("c"+strconv.FormatInt(next.Add(1), 10), "pool1")
			t0 := time.Now()
			if _, err := c.Allocate(context.Background(), &nodev1.AllocateRequest{Parameters: p}); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(t0))
			if _, err := c.Deallocate(context.Background(), &nodev1.DeallocateRequest{Parameters: p}); err != nil {
				b.Error(err)
				return
			}
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	}
	if callers == 1 {
		for range b.N {
			work(&once{})
		}
	} else {
		b.RunParallel(func(pb *testing.PB) { work(pb) })
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	if callers == 1 {
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	} else {
		b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "allocs/s")
	}
}

// once is a PB of one iteration.
type once struct{ done bool }

func (o *once) Next() bool {
	if o.done {
		return false
	}
	o.done = true
	return true
}

// BenchmarkN1NVIDIAJSONAnchor is the anchor to compare with: NVIDIA's
// node daemon writes its whole store, a JSON file of every reservation,
// and fsyncs it on each change, one change at a time. This writes a JSON
// file of n reservations of the same shape and fsyncs it, as that store
// does per allocation.
func BenchmarkN1NVIDIAJSONAnchor(b *testing.B) {
	type reservation struct {
		ContainerID   string            `json:"container_id"`
		InterfaceName string            `json:"interface_name"`
		IPAddress     string            `json:"ip_address"`
		Metadata      map[string]string `json:"metadata"`
	}
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("reservations=%d", n), func(b *testing.B) {
			entries := map[string]reservation{}
			for i := range n {
				id := fmt.Sprintf("%064x", i)
				entries[id+"_net1"] = reservation{ContainerID: id, InterfaceName: "net1", IPAddress: fmt.Sprintf("10.0.%d.%d", i/256, i%256),
					Metadata: map[string]string{"pod_name": "pod-" + strconv.Itoa(i), "pod_namespace": "default", "pod_uuid": id[:36],
						"create_time": time.Now().Format(time.RFC3339Nano)}}
			}
			path := filepath.Join(b.TempDir(), "store")
			start := time.Now()
			for b.Loop() {
				data, err := json.Marshal(map[string]any{"version": 1, "pools": map[string]any{"pool1": map[string]any{"entries": entries}}})
				if err != nil {
					b.Fatal(err)
				}
				f, err := os.Create(path)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.Write(data); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				_ = f.Close()
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "allocs/s")
		})
	}
}
