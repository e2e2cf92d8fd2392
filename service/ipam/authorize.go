package ipam

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Authorizer decides whether the caller of a mutation may change the
// objects of owner in the network instance networkInstance: it returns
// nil, or an error wrapping ErrDenied that says who may not do what (any
// other error refuses too).
type Authorizer func(owner, networkInstance string) error

type authorizerKey struct{}

// WithAuthorizer returns a copy of ctx that makes every mutation called
// with it ask az, for each object it puts, moves or deletes, about every
// network instance the change touches: the one the object lives in after
// it and the one it lived in before (a move releases what it held there),
// and for a Sync that adopts an owner bound to another identity, every
// network instance the owner holds objects in. The core asks while the
// mutation holds its locks, before anything is committed: a refused
// object fails with an *Error wrapping az's error (and ErrDenied), and
// the mutation changes nothing, as for any other failed item.
func WithAuthorizer(ctx context.Context, az Authorizer) context.Context {
	return context.WithValue(ctx, authorizerKey{}, az)
}

// authorizerOf returns the Authorizer of ctx, or nil.
func authorizerOf(ctx context.Context) Authorizer {
	az, _ := ctx.Value(authorizerKey{}).(Authorizer)
	return az
}

// authorize asks the mutation's Authorizer whether the owner os may
// change objects in the network instance vrf, for the object obj key
// (field names the field that places it there). The network instances
// it allows are remembered for the mutation: a Sync asks once per network
// instance, not once per item.
func (t *tx) authorize(os *ownerState, vrf, obj string, key Key, field string) error {
	if t.authz == nil || t.replay || slices.Contains(t.allowed, vrf) {
		return nil
	}
	err := t.authz(os.name, vrf)
	if err == nil {
		t.allowed = append(t.allowed, vrf)
		return nil
	}
	if !errors.Is(err, ErrDenied) {
		err = fmt.Errorf("%w: %w", ErrDenied, err)
	}
	return &Error{Object: obj, Key: key, Field: field, Msg: err.Error(), Err: err}
}

// authorizeMove authorizes a put of obj key into the network instance to
// whose previous version, if any (from is not ""), lived in from.
func (t *tx) authorizeMove(os *ownerState, from, to, obj string, key Key) error {
	if err := t.authorize(os, to, obj, key, "spec.networkInstance"); err != nil {
		return err
	}
	if from != "" && from != to {
		return t.authorize(os, from, obj, key, "spec.networkInstance")
	}
	return nil
}

// authorizeOwner authorizes a change of the owner os as a whole (an
// adoption): every network instance it holds objects in.
func (t *tx) authorizeOwner(os *ownerState) error {
	if t.authz == nil || t.replay {
		return nil
	}
	names := appendHeldVRFs(slices.Collect(maps.Keys(os.nis)), os)
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		if err := t.authorize(os, name, ObjSync, Key{Name: os.name}, "adopt"); err != nil {
			return err
		}
	}
	return nil
}
