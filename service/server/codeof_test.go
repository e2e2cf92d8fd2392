package server

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nephio-project/ipam/service/ipam"
	"google.golang.org/grpc/codes"
)

// TestCodeOf: every sentinel of the core maps to its gRPC code, also when
// wrapped, and a Sync error reports its most fundamental item first.
func TestCodeOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want codes.Code
	}{
		{ipam.ErrInvalid, codes.InvalidArgument},
		{ipam.ErrNotFound, codes.NotFound},
		{ipam.ErrConflict, codes.AlreadyExists},
		{ipam.ErrExhausted, codes.ResourceExhausted},
		{ipam.ErrInUse, codes.FailedPrecondition},
		{fmt.Errorf("commit: %w", ipam.ErrStale), codes.Unavailable},
		{fmt.Errorf("store: %w", ErrUnavailable), codes.Unavailable},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{&ipam.SyncError{Errs: []error{ipam.ErrExhausted, ipam.ErrInvalid}}, codes.InvalidArgument},
		{errors.New("boom"), codes.Internal},
	} {
		if got := codeOf(c.err); got != c.want {
			t.Errorf("codeOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
