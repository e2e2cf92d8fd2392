package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/grpcopt"
	"github.com/nephio-project/ipam/service/server"
)

// TestWatchFlood runs ipam-server as a subprocess with its default limits
// and tries to open 20,000 Watch streams, 2,500 over each of 8
// connections: each connection gets at most DefaultMaxWatchesPerConn and
// all of them together DefaultMaxWatchesPerIdentity (they share an
// address), the others are refused with ResourceExhausted, the server's
// memory grows by little and Allocate still answers. It logs the numbers.
// Without the limits, a connection holds grpcopt.MaxConcurrentStreams
// Watch streams and its next Watch waits: the test fails at the first
// Watch not answered within 10 s.
func TestWatchFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs ipam-server")
	}
	const conns, attempts = 8, 2500
	p := runServer(t, "--store", "memory")
	if p.client == nil {
		t.Fatalf("ipam-server exited: %s", p.output())
	}
	pid, c := p.cmd.Process.Pid, p.client
	seed(t, c)
	before := allocateLatency(t, c, "before", 200)
	rss0 := peakRSS(t, pid)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	accepted, refused := make([]int, conns), map[string]int{}
	start := time.Now()
	for i := range conns {
		conn, err := grpc.NewClient(p.addr, append(grpcopt.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		must(t, err)
		defer conn.Close()
		fc := ipamv1.NewIPAMClient(conn)
		next := make(chan struct{})
		go func() {
			defer close(next)
			for range attempts {
				next <- struct{}{}
			}
		}()
		// A connection carries at most grpcopt.MaxConcurrentStreams: a
		// Watch past them waits for one to end, which no open Watch does.
		var stalled atomic.Bool
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for range next {
					if stalled.Load() {
						continue
					}
					wctx, wcancel := context.WithCancel(ctx)
					timer := time.AfterFunc(10*time.Second, func() { stalled.Store(true); wcancel() })
					err := watchOpen(fc.Watch(wctx, &ipamv1.WatchRequest{}))
					if timer.Stop() && err != nil {
						wcancel()
					}
					mu.Lock()
					switch {
					case stalled.Load(): // reported once the connection's attempts end
					case err == nil:
						accepted[i]++
					default:
						msg := status.Convert(err).Message()
						if i := strings.Index(msg, "--max-watches"); i >= 0 {
							msg = msg[i:]
						}
						refused[status.Code(err).String()+" "+msg]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if stalled.Load() {
			t.Fatalf("connection %d: a Watch was not answered within 10 s, with %d Watch streams open on it", i, accepted[i])
		}
	}
	opened := time.Since(start)
	rss1 := peakRSS(t, pid)
	t.Logf("%d attempts over %d connections in %s: accepted %v, refused %v", conns*attempts, conns, opened.Round(time.Millisecond), accepted, refused)
	t.Logf("server peak RSS %d MiB before, %d MiB after", rss0>>20, rss1>>20)
	if grown := rss1 - rss0; grown > 64<<20 {
		t.Errorf("the server's peak RSS grew by %d MiB, more than 64 MiB", grown>>20)
	}
	total := 0
	for i, n := range accepted {
		total += n
		if n > server.DefaultMaxWatchesPerConn {
			t.Errorf("connection %d: %d Watch streams accepted, more than %d", i, n, server.DefaultMaxWatchesPerConn)
		}
	}
	if total != server.DefaultMaxWatchesPerIdentity {
		// (With thousands open, each Allocate below would take seconds.)
		t.Fatalf("%d Watch streams accepted in all, want %d", total, server.DefaultMaxWatchesPerIdentity)
	}
	for msg := range refused {
		if !strings.HasPrefix(msg, "ResourceExhausted --max-watches-per-") {
			t.Errorf("refused with %q, want ResourceExhausted naming its flag", msg)
		}
	}
	during := allocateLatency(t, c, "during", 200)
	t.Logf("Allocate latency median/p99/max: before %v, with the streams open %v", before, during)
}

// allocateLatency allocates and releases n addresses one after the other
// and returns the median, 99th percentile and maximum latency of the
// Allocate calls.
func allocateLatency(t *testing.T, c ipamv1.IPAMClient, name string, n int) [3]time.Duration {
	t.Helper()
	ctx := context.Background()
	d := make([]time.Duration, n)
	for i := range n {
		k := key(fmt.Sprintf("lat-%s-%d", name, i))
		start := time.Now()
		_, err := c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: k, NetworkInstance: "vpc-1",
			Selector: map[string]string{"nephio.org/network-name": "net1"}}})
		d[i] = time.Since(start)
		must(t, err)
		must(t, call(c.Release(ctx, &ipamv1.DeleteRequest{Key: k})))
	}
	slices.Sort(d)
	return [3]time.Duration{d[n/2], d[n*99/100], d[n-1]}
}
