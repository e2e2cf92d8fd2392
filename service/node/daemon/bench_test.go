package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	nodev1 "github.com/nephio-project/ipam/api/proto/nvidia/ipam/node/v1"
	"github.com/nephio-project/ipam/service/node/nodeipam"
)

// BenchmarkN1NodeAllocate measures what a node's pods see, through the
// real gRPC server on a unix socket and the real file store with fsync.
// With one caller it reports the p99 latency of Allocate (each followed by
// its Deallocate, as a pod's ADD and DEL). With 64 concurrent callers it
// reports the durable allocations per second: b.N Allocate calls, each
// answered after its fsync; then it releases them all with the same 64
// callers and reports those durable releases per second too (pod churn
// costs one of each).
func BenchmarkN1NodeAllocate(b *testing.B) {
	b.Run("callers=1", benchNodeLatency)
	b.Run("callers=64", func(b *testing.B) { benchNodeRate(b, 64) })
}

// servePool serves the node API with one IPPool, pool1, whose block holds
// 10.0.0.0/8: room for any b.N.
func servePool(b *testing.B) nodev1.IPAMServiceClient {
	e, conn := serve(b)
	blk := &nodeipam.Block{Network: netip.MustParsePrefix("10.0.0.0/8"), Start: netip.MustParseAddr("10.0.0.1"),
		End: netip.MustParseAddr("10.255.255.254"), Gateway: netip.MustParseAddr("10.0.0.1")}
	if _, err := e.SetPool(context.Background(), nodeipam.PoolKey{Type: nodeipam.IPPool, Name: "pool1"}, blk); err != nil {
		b.Fatal(err)
	}
	return nodev1.NewIPAMServiceClient(conn)
}

func benchNodeLatency(b *testing.B) {
	c := servePool(b)
	lat := make([]time.Duration, 0, b.N)
	i := 0
	for b.Loop() {
		i++
		p := params("c"+strconv.Itoa(i), "pool1")
		t0 := time.Now()
		if _, err := c.Allocate(context.Background(), &nodev1.AllocateRequest{Parameters: p}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		if _, err := c.Deallocate(context.Background(), &nodev1.DeallocateRequest{Parameters: p}); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
}

func benchNodeRate(b *testing.B, callers int) {
	c := servePool(b)
	// run makes calls 0..n-1 with the given number of concurrent callers.
	run := func(n int, call func(p *nodev1.IPAMParameters) error) time.Duration {
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range callers {
			wg.Go(func() {
				for i := next.Add(1); i <= int64(n); i = next.Add(1) {
					if err := call(params("c"+strconv.FormatInt(i, 10), "pool1")); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	b.ResetTimer()
	took := run(b.N, func(p *nodev1.IPAMParameters) error {
		_, err := c.Allocate(context.Background(), &nodev1.AllocateRequest{Parameters: p})
		return err
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/took.Seconds(), "allocs/s")
	took = run(b.N, func(p *nodev1.IPAMParameters) error {
		_, err := c.Deallocate(context.Background(), &nodev1.DeallocateRequest{Parameters: p})
		return err
	})
	b.ReportMetric(float64(b.N)/took.Seconds(), "releases/s")
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
