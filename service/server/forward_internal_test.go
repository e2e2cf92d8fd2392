package server

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// deposingStore is a leaderStore whose leader is at leader; it counts
// the depositions asked of it.
type deposingStore struct {
	leader  string
	deposed atomic.Int64
}

func (s *deposingStore) Lead(string)                              {}
func (s *deposingStore) Leader() (string, bool)                   { return s.leader, false }
func (s *deposingStore) Depose(string) (bool, error)              { s.deposed.Add(1); return true, nil }
func (s *deposingStore) Applied() int64                           { return 0 }
func (s *deposingStore) WaitApplied(context.Context, int64) error { return nil }

// TestSuspectProbesOnceAtATime: a burst of calls that fail to reach the
// leader probes it once (one probe at a time, at most one per
// probeInterval), and the store is asked to depose the leader only when
// the probe's connection is refused.
func TestSuspectProbesOnceAtATime(t *testing.T) {
	for _, refused := range []bool{true, false} {
		store := &deposingStore{leader: "leader:1"}
		var probes atomic.Int64
		release := make(chan struct{})
		f := &forwarder{store: store, log: slog.New(slog.DiscardHandler), refused: func(string) bool {
			probes.Add(1)
			<-release
			return refused
		}}
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() { f.suspect("leader:1") })
		}
		wg.Wait()
		close(release)
		for f.probing.Load() {
			time.Sleep(time.Millisecond)
		}
		f.suspect("leader:1") // within probeInterval of the first
		for f.probing.Load() {
			time.Sleep(time.Millisecond)
		}
		want := int64(0)
		if refused {
			want = 1
		}
		if probes.Load() != 1 || store.deposed.Load() != want {
			t.Errorf("refused %v: %d probes and %d depositions, want 1 and %d", refused, probes.Load(), store.deposed.Load(), want)
		}
	}
}

// TestConnRefused: a fresh connection to an address nothing listens on
// is refused; one to a listener (even one that never accepts) is not.
func TestConnRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	goneAddr := gone.Addr().String()
	gone.Close()
	if connRefused(l.Addr().String()) {
		t.Error("a connection to a listener is refused")
	}
	if !connRefused(goneAddr) {
		t.Error("a connection to a closed port is not refused")
	}
}
