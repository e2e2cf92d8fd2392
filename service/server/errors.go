package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
)

// ErrUnavailable marks a failure of the durable store (or of a dependency
// the server cannot do without): the change may not be durable and the
// client should retry. It maps to codes.Unavailable.
var ErrUnavailable = errors.New("unavailable")

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

// toStatus is the one place where errors of the core, the store and the
// request checks become gRPC statuses. Errors that name objects
// (*ipam.Error, *ipam.SyncError) get a SyncFailure detail with one
// ItemError per failed item.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err // already a status (e.g. from grpc itself)
	}
	st := status.New(codeOf(err), err.Error())
	if items := itemErrors(err); len(items) > 0 {
		if withDetail, derr := st.WithDetails(&ipamv1.SyncFailure{Items: items}); derr == nil {
			st = withDetail
		}
	}
	return st.Err()
}

// itemErrors lists the object errors inside err.
func itemErrors(err error) []*ipamv1.ItemError {
	var se *ipam.SyncError
	if errors.As(err, &se) {
		out := make([]*ipamv1.ItemError, 0, len(se.Errs))
		for _, e := range se.Errs {
			out = append(out, itemError(e))
		}
		return out
	}
	var oe *ipam.Error
	if errors.As(err, &oe) {
		return []*ipamv1.ItemError{itemError(oe)}
	}
	return nil
}

func itemError(err error) *ipamv1.ItemError {
	item := &ipamv1.ItemError{Message: err.Error(), Code: int32(codeOf(err))}
	var oe *ipam.Error
	if errors.As(err, &oe) {
		item.Object, item.Key, item.Field = oe.Object, keyToProto(oe.Key), oe.Field
	}
	return item
}
