package server

import (
	"context"
	"errors"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server/authz"
)

// ErrUnavailable marks a failure of the durable store (or of a dependency
// the server cannot do without): the change may not be durable and the
// client should retry. It maps to codes.Unavailable.
var ErrUnavailable = ipam.ErrUnavailable

// codedError is an error with its own message that wraps a sentinel (which
// decides its gRPC code) and, optionally, the error that caused it.
type codedError struct {
	msg      string
	sentinel error
	cause    error
}

// Error returns the message.
func (e *codedError) Error() string { return e.msg }

// Unwrap returns the sentinel and the cause, if any.
func (e *codedError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.sentinel}
	}
	return []error{e.sentinel, e.cause}
}

// invalidRequest reports a malformed request field that belongs to no
// object (page_token, kind, the owner of a Sync).
func invalidRequest(field, msg string) error {
	return &codedError{msg: field + ": " + msg, sentinel: ipam.ErrInvalid}
}

// codeOf maps one error to its gRPC code.
func codeOf(err error) codes.Code {
	// A Sync error holds errors of several items: report the most
	// fundamental problem first (fix the input before retrying).
	for _, c := range []struct {
		sentinel error
		code     codes.Code
	}{
		{ErrUnavailable, codes.Unavailable},
		{authz.ErrDenied, codes.PermissionDenied},
		{ipam.ErrStale, codes.Unavailable},
		{ipam.ErrInvalid, codes.InvalidArgument},
		{ipam.ErrNotFound, codes.NotFound},
		{ipam.ErrConflict, codes.AlreadyExists},
		{ipam.ErrInUse, codes.FailedPrecondition},
		{ipam.ErrExhausted, codes.ResourceExhausted},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{context.Canceled, codes.Canceled},
	} {
		if errors.Is(err, c.sentinel) {
			return c.code
		}
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return codes.Internal
}

// Bounds of what an error answer carries, so that its trailer stays far
// below the header-list limits of gRPC clients and proxies whatever the
// request was: a Sync of 100,000 failing items answers with the first
// items and a count of the others.
const (
	// MaxStatusMessage bounds the status message in bytes.
	MaxStatusMessage = 4 << 10
	// MaxItemMessage bounds the message of one ItemError in bytes.
	MaxItemMessage = 1 << 10
	// MaxDetailItems bounds the ItemErrors of a SyncFailure detail.
	MaxDetailItems = 100
	// MaxDetailBytes bounds the encoded size of a SyncFailure detail.
	MaxDetailBytes = 16 << 10
)

// toStatus is the one place where errors of the core, the store and the
// request checks become gRPC statuses. Errors that name objects
// (*ipam.Error, *ipam.SyncError) get a SyncFailure detail with an
// ItemError per failed item, up to MaxDetailItems and MaxDetailBytes, and
// the count of the items left out.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err // already a status (e.g. from grpc itself)
	}
	st := status.New(codeOf(err), clip(err.Error(), MaxStatusMessage))
	if detail := syncFailure(err); detail != nil {
		if withDetail, derr := st.WithDetails(detail); derr == nil {
			st = withDetail
		}
	}
	return st.Err()
}

// clip cuts s to at most max bytes (at a rune boundary) and says so.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const more = "... (truncated)"
	cut := max - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

// syncFailure is the detail of the object errors inside err, or nil.
func syncFailure(err error) *ipamv1.SyncFailure {
	var errs []error
	var se *ipam.SyncError
	var oe *ipam.Error
	switch {
	case errors.As(err, &se):
		errs = se.Errs
	case errors.As(err, &oe):
		errs = []error{oe}
	default:
		return nil
	}
	d := &ipamv1.SyncFailure{}
	size := 0
	for i, e := range errs {
		item := itemError(e)
		if n := proto.Size(item) + 4; i >= MaxDetailItems || size+n > MaxDetailBytes {
			d.Omitted = int32(len(errs) - i)
			break
		} else {
			size += n
		}
		d.Items = append(d.Items, item)
	}
	return d
}

func itemError(err error) *ipamv1.ItemError {
	item := &ipamv1.ItemError{Message: clip(err.Error(), MaxItemMessage), Code: int32(codeOf(err))}
	var oe *ipam.Error
	if errors.As(err, &oe) {
		item.Object, item.Kind, item.Key, item.Field = oe.Object, ipamv1.KindOf(oe.Object), keyToProto(oe.Key), oe.Field
	}
	return item
}
