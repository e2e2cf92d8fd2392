package server_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/grpcopt"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// emptyService is a unary gRPC method that does nothing: the baseline of
// what a call over loopback costs.
var emptyService = grpc.ServiceDesc{
	ServiceName: "bench.Empty",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Call",
		Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			return in, nil
		},
	}},
}

// startBaseline serves what register registers on a loopback port, with
// the transport options of server.Run, and dials it with those of the
// IPAM clients.
func startBaseline(b *testing.B, register func(*grpc.Server)) *grpc.ClientConn {
	b.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer(grpcopt.ServerOptions()...)
	register(gs)
	go gs.Serve(lis)
	b.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), append(grpcopt.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return conn
}

// cpuTime returns the CPU time the process (client and server) has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// parallel runs calls calls spread over inflight goroutines and returns
// how long they took.
func parallel(inflight, calls int, call func(g, i int) error) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make([]error, inflight)
	start := time.Now()
	for g := range inflight {
		wg.Go(func() {
			for i := g; i < calls; i += inflight {
				if err := call(g, i/inflight); err != nil {
					errs[g] = err
					return
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return d, err
		}
	}
	return d, nil
}

// emptyIPAM is the IPAM service with empty Allocate and Release handlers:
// the same calls, messages and transport as the real server, minus
// everything the server does for them.
type emptyIPAM struct{ ipamv1.UnimplementedIPAMServer }

func (emptyIPAM) Allocate(context.Context, *ipamv1.AllocateRequest) (*ipamv1.AllocateResponse, error) {
	return &ipamv1.AllocateResponse{}, nil
}

func (emptyIPAM) Release(context.Context, *ipamv1.DeleteRequest) (*ipamv1.DeleteResponse, error) {
	return &ipamv1.DeleteResponse{}, nil
}

// BenchmarkW4Ratio measures gRPC Allocate and Release calls over loopback
// with 8 in flight against the same calls (same requests, same transport
// options) to a server whose handlers are empty, measured in the same run
// in alternating short rounds (in reverse order every other round).
// "ratio" is the rate of the real calls as a fraction of the empty-handler
// calls' (the median of the rounds' ratios, so that bursts of other load
// on the machine do not decide it; W4 target ≥ 0.90): what the
// IPAM server adds to a call. "ratio-emptypb" compares with a call of an
// empty message (google.protobuf.Empty) to an empty handler, so it also
// counts encoding and decoding the IPAM messages. "cpu-ratio" compares the
// CPU time the process (client and servers) spent per call with the
// empty-handler calls'.
func BenchmarkW4Ratio(b *testing.B) {
	const inflight, calls = 8, 512
	ts := servertest.Start(b, server.Config{}, false)
	c := ts.Client(b)
	ctx := context.Background()
	seed(b, c)
	must(b, call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("net16"), NetworkInstance: "vpc-1",
		Prefix: "10.2.0.0/16", Network: "net16"}})))
	sel := map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net16"}
	reqs := make([]*ipamv1.AllocateRequest, inflight)
	rels := make([]*ipamv1.DeleteRequest, inflight)
	for g := range inflight {
		reqs[g] = &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key(fmt.Sprint("w4-", g)), Selector: sel}}
		rels[g] = &ipamv1.DeleteRequest{Key: key(fmt.Sprint("w4-", g))}
	}
	allocRelease := func(c ipamv1.IPAMClient) func(g, i int) error {
		return func(g, i int) error {
			if i%2 == 0 {
				_, err := c.Allocate(ctx, reqs[g])
				return err
			}
			_, err := c.Release(ctx, rels[g])
			return err
		}
	}
	emptyIPAMConn := startBaseline(b, func(gs *grpc.Server) { ipamv1.RegisterIPAMServer(gs, emptyIPAM{}) })
	ipam, emptyHandler := allocRelease(c), allocRelease(ipamv1.NewIPAMClient(emptyIPAMConn))
	emptyConn := startBaseline(b, func(gs *grpc.Server) { gs.RegisterService(&emptyService, struct{}{}) })
	emptyMessage := func(_, _ int) error {
		return emptyConn.Invoke(ctx, "/bench.Empty/Call", &emptypb.Empty{}, new(emptypb.Empty))
	}
	phases := []func(int, int) error{emptyHandler, emptyMessage, ipam}
	// Warm every connection up.
	for _, f := range phases {
		if _, err := parallel(inflight, 256, f); err != nil {
			b.Fatal(err)
		}
	}
	var took, cpu [3]time.Duration
	var ratios, ratiosPB []float64
	n := 0
	order := []int{0, 1, 2}
	for b.Loop() {
		// Every other round runs the phases in reverse order, so that
		// neither side keeps inheriting the other's garbage or drift.
		slices.Reverse(order)
		var d [3]time.Duration
		for _, p := range order {
			f := phases[p]
			c0 := cpuTime()
			var err error
			if d[p], err = parallel(inflight, calls, f); err != nil {
				b.Fatal(err)
			}
			took[p] += d[p]
			cpu[p] += cpuTime() - c0
		}
		ratios = append(ratios, d[0].Seconds()/d[2].Seconds())
		ratiosPB = append(ratiosPB, d[1].Seconds()/d[2].Seconds())
		n += calls
	}
	median := func(xs []float64) float64 { slices.Sort(xs); return xs[len(xs)/2] }
	b.ReportMetric(median(ratios), "ratio")
	b.ReportMetric(median(ratiosPB), "ratio-emptypb")
	b.ReportMetric(cpu[0].Seconds()/cpu[2].Seconds(), "cpu-ratio")
	b.ReportMetric(float64(n)/took[2].Seconds(), "calls/s")
	b.ReportMetric(float64(n)/took[0].Seconds(), "empty-calls/s")
}

// BenchmarkW5DurableAllocsPerSec has 64 clients allocate addresses
// through the server on the file store with fsync on, and reports
// acknowledged (durable) allocations per second (metric "allocs/s";
// W5 target ≥ 10,000). The clients share one connection
// (conns=1, the goroutines of one controller or injector) or have one
// each (conns=64, separate processes such as KRM function runs); they dial
// with grpcopt.DialOptions, as ipam-fn, the injector and the controllers do.
func BenchmarkW5DurableAllocsPerSec(b *testing.B) {
	for _, conns := range []int{1, 64} {
		b.Run(fmt.Sprint("conns=", conns), func(b *testing.B) { benchDurableAllocs(b, 64, conns) })
	}
}

func benchDurableAllocs(b *testing.B, clients, conns int) {
	const perClient = 32
	ts := servertest.Start(b, server.Config{Store: "file", DataDir: b.TempDir()}, false)
	c := ts.Client(b)
	ctx := context.Background()
	seed(b, c)
	must(b, call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("net12"), NetworkInstance: "vpc-1",
		Prefix: "10.16.0.0/12", Network: "net12"}})))
	sel := map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net12"}
	pool := make([]ipamv1.IPAMClient, conns)
	for i := range pool {
		pool[i] = ipamv1.NewIPAMClient(ts.Dial(b))
	}
	round := 0
	allocate := func() time.Duration {
		round++
		d, err := parallel(clients, clients*perClient, func(g, i int) error {
			_, err := pool[g%conns].Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{
				Key: key(fmt.Sprintf("w5-%d-%d-%d", round, g, i)), Selector: sel}})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	allocate() // warm-up: the first calls of every connection and server worker
	var elapsed time.Duration
	n := 0
	for b.Loop() {
		elapsed += allocate()
		n += clients * perClient
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "allocs/s")
}
