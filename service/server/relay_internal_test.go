package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

// TestRelayWorkersAreKeptAndBounded: the goroutines that run relayed
// calls stay for the next calls, at most relayKeptWorkers of them, and
// end when the server stops.
func TestRelayWorkersAreKeptAndBounded(t *testing.T) {
	r := newRelayServer(nil, nil, nil, nil)
	burst := func(n int) {
		var started, done sync.WaitGroup
		release := make(chan struct{})
		for range n {
			started.Add(1)
			done.Add(1)
			r.spawn(func() { started.Done(); <-release; done.Done() })
		}
		started.Wait()
		close(release)
		done.Wait()
	}
	for range 2 {
		burst(relayKeptWorkers + 44) // more at once than are kept
		if n := r.workers.Load(); n != relayKeptWorkers {
			t.Fatalf("%d workers kept; want %d", n, relayKeptWorkers)
		}
	}
	r.close()
	waitFor(t, func() bool { return r.workers.Load() == 0 })
	ran := make(chan struct{})
	r.spawn(func() { close(ran) }) // a call after the stop still runs
	<-ran
	waitFor(t, func() bool { return r.workers.Load() == 0 })
}

// waitFor polls cond for up to 10 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
	}
}

// TestRelayMalformedRequest: a relayed request that does not decode is
// answered InvalidArgument naming the field, as the call made directly.
func TestRelayMalformedRequest(t *testing.T) {
	r := newRelayServer(nil, nil, nil, nil)
	defer r.close()
	a := r.run(context.Background(), &ipamv1.ForwardedCall{Id: 7, Method: ipamv1.IPAM_Allocate_FullMethodName, Request: []byte{0x0a, 0x40}})
	want := "relay: decoding the " + ipamv1.IPAM_Allocate_FullMethodName + " request: allocation: malformed value: unexpected EOF"
	if a.GetId() != 7 || codes.Code(a.GetCode()) != codes.InvalidArgument || a.GetMessage() != want {
		t.Fatalf("answer %v, want InvalidArgument %q", a, want)
	}
}
