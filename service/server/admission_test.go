package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/grpcopt"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// Bounds of TestMemoryBudgetUnderLoad: the server's peak RSS while it is
// sent the mix (the default budget keeps it under 1 GB), the latency of
// the small calls meanwhile (99 % within maxSmallLatency, none past
// maxSmallStall), and the RSS at which the test kills a
// server that has no bound (so that a failing run does not take the
// machine with it).
const (
	maxLoadRSS       = 1536 << 20
	maxSmallLatency  = time.Second
	maxSmallStall    = 5 * time.Second
	killAtRSS        = 3 << 30
	bigRequests      = 64
	bigRequestWindow = 90 * time.Second
)

// largeSync is a valid Sync of n address allocations of owner in network
// "big" of vpc-big, each with a name of 200 bytes and labels labels of the
// largest size (317-byte keys, 63-byte values), or, without labels, 4
// labels of 63-byte values; 100,000 such items are close to the 64 MiB
// message limit.
func largeSync(owner string, n, labels int) *ipamv1.SyncRequest {
	lm := map[string]string{}
	if labels > 0 {
		for l := range labels {
			lm[fmt.Sprintf("%0253d/%063d", l, l)] = strings.Repeat("v", ipam.MaxLabelValueLength)
		}
	} else {
		for l := range 4 {
			lm["example.com/label-"+strconv.Itoa(l)] = strings.Repeat("v", ipam.MaxLabelValueLength)
		}
	}
	req := &ipamv1.SyncRequest{Owner: owner, Allocations: make([]*ipamv1.Allocation, n)}
	for i := range req.Allocations {
		req.Allocations[i] = &ipamv1.Allocation{
			Key:             &ipamv1.Key{Namespace: "default", Name: fmt.Sprintf("%0200d", i)},
			NetworkInstance: "vpc-big",
			Selector:        map[string]string{ipam.LabelNetworkName: "big"},
			Labels:          lm,
		}
	}
	return req
}

// TestMemoryBudgetUnderLoad runs ipam-server as a process with its
// default memory budget and sends it 64 concurrent requests close to the
// message limit, half 100,000-item Syncs, half Syncs of 2,500 items with
// 64 labels of the largest size each, while another client keeps making
// small calls (Get and Allocate). The server's peak RSS stays under
// maxLoadRSS, 99 % of the small calls are answered within
// maxSmallLatency and none takes more than maxSmallStall (a small write
// commits after a large Sync admitted before it, whose records it waits
// behind: on a machine busy with other tests that has taken 1.9 s), each
// large request either succeeds or is refused ResourceExhausted with a
// RetryInfo detail (some are), and the server serves afterwards.
func TestMemoryBudgetUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ipam-server and sends it 4 GB of requests")
	}
	p := runServer(t, "--data-dir", t.TempDir())
	if p.client == nil {
		t.Fatalf("ipam-server exited: %s", p.output())
	}
	pid := p.cmd.Process.Pid
	c := p.client
	ctx := context.Background()
	seed(t, c)
	// The large requests allocate in a network instance of their own,
	// which each holds while it is applied.
	must(t, call(c.CreateNetworkInstance(ctx, &ipamv1.CreateNetworkInstanceRequest{NetworkInstance: &ipamv1.NetworkInstance{Key: key("vpc-big")}})))
	must(t, call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("aggregate-big"), NetworkInstance: "vpc-big",
		Kind: "aggregate", Prefix: "10.0.0.0/8"}})))
	must(t, call(c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: key("big"), NetworkInstance: "vpc-big",
		Prefix: "10.16.0.0/12", Network: "big"}})))
	var requests [][]byte
	for _, r := range []*ipamv1.SyncRequest{largeSync("bulk", ipam.MaxSyncItems, 0), largeSync("labels", 2_500, ipam.MaxLabels)} {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		requests = append(requests, b)
	}
	for _, r := range requests {
		t.Logf("request of %.1f MiB", float64(len(r))/(1<<20))
	}
	base := peakRSS(t, pid)

	// Watch the RSS; kill a server past killAtRSS.
	watchDone := make(chan struct{})
	watchEnded := make(chan struct{})
	var killed atomic.Bool
	go func() {
		defer close(watchEnded)
		for {
			select {
			case <-watchDone:
				return
			case <-time.After(20 * time.Millisecond):
			}
			cur, _, err := readRSS(pid)
			if err != nil {
				return
			}
			if cur > killAtRSS {
				killed.Store(true)
				_ = p.cmd.Process.Kill()
				return
			}
		}
	}()

	// The large requests, over connections of their own.
	conns := make([]*grpc.ClientConn, 4)
	for i := range conns {
		conn, err := grpc.NewClient(p.addr, append(grpcopt.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conns[i] = conn
	}
	bigCtx, bigCancel := context.WithTimeout(ctx, bigRequestWindow)
	defer bigCancel()
	results := make([]error, bigRequests)
	var big sync.WaitGroup
	start := time.Now()
	for i := range bigRequests {
		big.Add(1)
		go func() {
			defer big.Done()
			var resp droppedAnswer
			results[i] = conns[i%len(conns)].Invoke(bigCtx, ipamv1.IPAM_Sync_FullMethodName, requests[i%2], &resp,
				grpc.ForceCodecV2(rawCodec{}))
		}()
	}
	bigDone := make(chan struct{})
	go func() { big.Wait(); close(bigDone) }()

	// The small calls, on the server's own client, until the large ones
	// are answered.
	var latencies []time.Duration
	var slowest [2]time.Duration // of Get, of Allocate
	var smallErrs []error
small:
	for i := 0; ; i++ {
		select {
		case <-bigDone:
			break small
		default:
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		t0 := time.Now()
		var err error
		if i%2 == 0 {
			_, err = c.Get(sctx, &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_PREFIX, Key: key("net1-prefix1")})
		} else {
			_, err = c.Allocate(sctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key(fmt.Sprint("small-", i%100)),
				NetworkInstance: "vpc-1", Selector: map[string]string{ipam.LabelNetworkName: "net1"}}})
		}
		latencies = append(latencies, time.Since(t0))
		if d := time.Since(t0); d > slowest[i%2] {
			slowest[i%2] = d
		}
		cancel()
		if err != nil {
			smallErrs = append(smallErrs, err)
			if killed.Load() || len(smallErrs) > 10 {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	<-bigDone
	close(watchDone)
	<-watchEnded
	elapsed := time.Since(start)
	if killed.Load() {
		t.Fatalf("ipam-server passed %d MiB of RSS (from %d MiB); killed", killAtRSS>>20, base>>20)
	}
	peak := peakRSS(t, pid)

	byCode := map[codes.Code]int{}
	for i, err := range results {
		st := status.Convert(err)
		byCode[st.Code()]++
		switch st.Code() {
		case codes.OK:
		case codes.ResourceExhausted:
			var hint bool
			for _, d := range st.Details() {
				if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().AsDuration() > 0 {
					hint = true
				}
			}
			if !hint {
				t.Errorf("request %d: ResourceExhausted %q without a RetryInfo detail", i, st.Message())
			}
		default:
			t.Errorf("request %d: %s %q, want OK or ResourceExhausted", i, st.Code(), st.Message())
		}
	}
	slices.Sort(latencies)
	pct := func(q float64) time.Duration {
		if len(latencies) == 0 {
			return 0
		}
		return latencies[min(len(latencies)-1, int(q*float64(len(latencies))))]
	}
	t.Logf("%d large requests in %v: %v; peak RSS %d MiB (%d MiB before); %d small calls: p50 %v, p99 %v, max %v (Get %v, Allocate %v)",
		bigRequests, elapsed.Round(time.Millisecond), byCode, peak>>20, base>>20, len(latencies), pct(.5), pct(.99), pct(1), slowest[0], slowest[1])
	if peak > maxLoadRSS {
		t.Errorf("peak RSS %d MiB, more than %d MiB", peak>>20, maxLoadRSS>>20)
	}
	if byCode[codes.ResourceExhausted] == 0 {
		t.Errorf("no large request was refused ResourceExhausted: %v", byCode)
	}
	if byCode[codes.OK] == 0 {
		t.Errorf("no large request succeeded: %v", byCode)
	}
	for _, err := range smallErrs {
		t.Errorf("small call: %v", err)
	}
	if p := pct(.99); p > maxSmallLatency {
		t.Errorf("99 %% of the small calls took up to %v, more than %v", p, maxSmallLatency)
	}
	if m := pct(1); m > maxSmallStall {
		t.Errorf("slowest small call took %v, more than %v", m, maxSmallStall)
	}
	res, err := c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key("after"), NetworkInstance: "vpc-1",
		Selector: map[string]string{ipam.LabelNetworkName: "net1"}}})
	if err != nil {
		t.Fatalf("after the load: %v, %v", res, err)
	}
}

// TestMemoryBudget holds a large Sync in flight in a server with a small
// budget: a second large Sync waits the admission wait and is refused
// ResourceExhausted with a RetryInfo detail, a small Sync, a Get and an
// Allocate are answered meanwhile, the metrics show the bytes in flight
// and the refusal, and once the first Sync is answered the second one
// succeeds.
func TestMemoryBudget(t *testing.T) {
	const wait = 200 * time.Millisecond
	held, release := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	unhold := func() { released.Do(func() { close(release) }) }
	hold := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if r, ok := req.(*ipamv1.SyncRequest); ok && r.GetOwner() == "held" {
			once.Do(func() { close(held) })
			<-release
		}
		return handler(ctx, req)
	}
	ts := servertest.Start(t, server.Config{MaxInflightBytes: 4 << 20, InflightWait: wait,
		UnaryInterceptors: []grpc.UnaryServerInterceptor{hold}}, true)
	t.Cleanup(unhold) // before the server stops
	c := ts.Client(t)
	ctx := context.Background()
	seed(t, c)
	large := func(owner string) *ipamv1.SyncRequest { // about 500 KB: charged the budget's share of large requests
		labels := map[string]string{}
		for l := range 20 {
			labels[fmt.Sprintf("example.com/label-%02d", l)] = strings.Repeat("v", ipam.MaxLabelValueLength)
		}
		req := &ipamv1.SyncRequest{Owner: owner}
		for i := range 250 {
			req.NetworkInstances = append(req.NetworkInstances, &ipamv1.NetworkInstance{Key: &ipamv1.Key{Name: fmt.Sprintf("%s-%d", owner, i)}, Labels: labels})
		}
		return req
	}
	heldDone := make(chan error, 1)
	go func() { heldDone <- call(c.Sync(ctx, large("held"))) }()
	<-held

	t0 := time.Now()
	_, err := c.Sync(ctx, large("refused"))
	st := wantStatus(t, err, codes.ResourceExhausted, "")
	if d := time.Since(t0); d < wait {
		t.Errorf("refused after %v, before the admission wait of %v", d, wait)
	}
	if !strings.Contains(st.Message(), "memory budget") {
		t.Errorf("message %q does not say why", st.Message())
	}
	var hint *errdetails.RetryInfo
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			hint = ri
		}
	}
	if hint.GetRetryDelay().AsDuration() <= 0 {
		t.Errorf("no RetryInfo detail in %v", st.Details())
	}

	must(t, call(c.Get(ctx, &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_PREFIX, Key: key("net1-prefix1")})))
	must(t, call(c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key("small"), NetworkInstance: "vpc-1",
		Selector: map[string]string{ipam.LabelNetworkName: "net1"}}})))
	must(t, call(c.Sync(ctx, &ipamv1.SyncRequest{Owner: "package", Allocations: []*ipamv1.Allocation{{Key: &ipamv1.Key{Name: "a"}, NetworkInstance: "vpc-1",
		Selector: map[string]string{ipam.LabelNetworkName: "net1"}}}})))

	metrics := scrape(t, ts.MetricsAddr)
	for _, want := range []string{"ipam_requests_refused_busy_total 1\n", "ipam_inflight_request_bytes_limit 4.194304e+06\n"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if !strings.Contains(metrics, "ipam_inflight_request_bytes ") || strings.Contains(metrics, "ipam_inflight_request_bytes 0\n") {
		t.Errorf("metrics do not show the held Sync's bytes in flight")
	}

	unhold()
	must(t, <-heldDone)
	must(t, call(c.Sync(ctx, large("refused"))))
	if m := scrape(t, ts.MetricsAddr); !strings.Contains(m, "ipam_inflight_request_bytes 0\n") {
		t.Errorf("bytes still in flight after every call was answered")
	}
}

// scrape returns the text of a server's /metrics.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return string(b)
}
