package etcd

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nephio-project/ipam/service/ipam"
)

// TestErrorsReachClientsAsUnavailable: a commit refused after every
// retry, and a replica that cannot catch up, answer Unavailable (retry
// later or elsewhere), not Internal; a refusal still wraps ipam.ErrStale.
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
	for _, err := range []error{stale, undecided, reloading, s.Commit(nil), s.CatchUp(stale)} {
		if got := status.Code(err); got != codes.Unavailable {
			t.Errorf("%v: code %v, want Unavailable", err, got)
		}
	}
	if wait := s.Append(nil); wait == nil || wait() == nil {
		t.Error("Append after a failure reports nothing")
	}
}
