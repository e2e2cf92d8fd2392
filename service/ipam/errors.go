package ipam

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nephio-project/ipam/api/vocab"
)

// Sentinel errors. Every error returned by the core wraps exactly one of
// them; fronts map them once (gRPC codes, KRM results, CR conditions).
var (
	// ErrInvalid: the request is malformed (bad prefix, wrong nesting, a
	// prefix length that cannot fit, a missing field).
	ErrInvalid = errors.New("invalid")
	// ErrNotFound: a named object, parent prefix or selector match does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the address or prefix is taken or overlaps another.
	ErrConflict = errors.New("conflict")
	// ErrExhausted: no free address or prefix of the requested size is left.
	ErrExhausted = errors.New("exhausted")
	// ErrInUse: the object still has children or allocations and cannot be
	// deleted, or the owner of a Sync holds another package's objects.
	ErrInUse = errors.New("in use")
	// ErrStale: a Committer refused a mutation because the shared store
	// changed since this allocator caught up; the mutation was rolled back
	// and may be retried once the allocator has caught up.
	ErrStale = errors.New("stale")
	// ErrUnavailable: the durable store (or a dependency the allocator
	// cannot do without) failed; the change was not made, or may not be
	// durable, and the call may be retried.
	ErrUnavailable = errors.New("unavailable")
	// ErrDenied: the Authorizer of the call refused a change (see
	// WithAuthorizer); nothing was changed.
	ErrDenied = errors.New("permission denied")
)

// Object kinds named in error messages, as users know them: the shared
// vocabulary of package vocab, which clients import instead of the core.
const (
	ObjNetworkInstance = vocab.ObjNetworkInstance
	ObjPrefix          = vocab.ObjPrefix
	ObjRange           = vocab.ObjRange
	ObjAllocation      = vocab.ObjAllocation
	ObjSync            = vocab.ObjSync // a Sync request itself
)

// Error is the error of one object: it names the object (kind and
// namespace/name), the field at fault and wraps a sentinel error. Its
// message reads "IPAllocation default/n3: spec.prefixLength: 33 exceeds /32".
type Error struct {
	Object string // ObjPrefix, ObjAllocation, ...
	Key    Key
	Field  string // "spec.prefix", "spec.selector", ... or "" for the whole object
	Msg    string
	Err    error // one of the sentinel errors
}

// Error renders the object, the field and the message.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Object)
	if k := e.Key.String(); k != "" {
		b.WriteByte(' ')
		b.WriteString(k)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the sentinel error.
func (e *Error) Unwrap() error { return e.Err }

// SyncError collects the errors of every failed item of a Sync; when it is
// returned, nothing was changed.
type SyncError struct {
	Errs []error
}

// MaxListedErrors is how many item errors the message of a SyncError
// lists; it names how many more there are.
const MaxListedErrors = 10

// Error lists the first MaxListedErrors item errors, one per line, and
// counts the rest: a Sync of many bad items never makes a huge message.
func (e *SyncError) Error() string {
	n := min(len(e.Errs), MaxListedErrors)
	parts := make([]string, n, n+1)
	for i, err := range e.Errs[:n] {
		parts[i] = err.Error()
	}
	if more := len(e.Errs) - n; more > 0 {
		parts = append(parts, fmt.Sprintf("... and %d more errors", more))
	}
	return strings.Join(parts, "\n")
}

// Unwrap returns the item errors so errors.Is and errors.As see each one.
func (e *SyncError) Unwrap() []error { return e.Errs }
