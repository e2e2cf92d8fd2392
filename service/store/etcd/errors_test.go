package etcd

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/nephio-project/ipam/service/ipam"
)

// TestErrorsReachClientsAsUnavailable: a commit refused after every
// retry, and a replica that cannot catch up, wrap ipam.ErrStale or
// ipam.ErrUnavailable, which the server answers as Unavailable (retry
// later or elsewhere), not Internal.
func TestErrorsReachClientsAsUnavailable(t *testing.T) {
	stale := &staleError{target: 7}
	if !errors.Is(stale, ipam.ErrStale) {
		t.Fatalf("%v does not wrap ipam.ErrStale", stale)
	}
	undecided := &staleError{cause: context.DeadlineExceeded}
	if !errors.Is(undecided, ipam.ErrStale) || !errors.Is(undecided, context.DeadlineExceeded) {
		t.Fatalf("%v does not wrap ipam.ErrStale and its cause", undecided)
	}
	reloading := &staleError{reloading: true}
	if !errors.Is(reloading, ipam.ErrStale) {
		t.Fatalf("%v does not wrap ipam.ErrStale", reloading)
	}
	// A store whose watch failed refuses commits and catch-ups.
	s := &Store{advanced: make(chan struct{}), ctx: context.Background(), log: slog.New(slog.DiscardHandler)}
	s.fail(errors.New("log compacted"))
	_, commitErr := s.Commit([]ipam.Record{{Op: ipam.OpDeleteNetworkInstance, Key: ipam.Key{Name: "vpc-1"}}})
	for _, err := range []error{stale, undecided, reloading, commitErr, s.CatchUp(stale)} {
		if !errors.Is(err, ipam.ErrStale) && !errors.Is(err, ipam.ErrUnavailable) {
			t.Errorf("%v wraps neither ipam.ErrStale nor ipam.ErrUnavailable", err)
		}
	}
	if wait := s.Append(nil); wait == nil || wait() == nil {
		t.Error("Append after a failure reports nothing")
	}
}
