package server

import (
	"sync"
	"testing"
	"time"
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
