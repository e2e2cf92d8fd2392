package cni

import (
	"context"
	"errors"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Plugin-specific CNI error codes (the spec leaves 100 and up to plugins).
const (
	// ErrNoAllocation: CHECK found no address held by the container.
	ErrNoAllocation uint = 100
	// ErrAddressTaken: a requested address is held by another container.
	ErrAddressTaken uint = 101
	// ErrPoolExhausted: the node's block of a pool has no free address.
	ErrPoolExhausted uint = 102
	// ErrBadDaemonAnswer: the daemon answered something the plugin cannot
	// use.
	ErrBadDaemonAnswer uint = 103
	// ErrAddressOutsideBlock: CHECK found an address of the container
	// outside the node's block of its pool (the block moved or is gone).
	ErrAddressOutsideBlock uint = 104
	// ErrContainerHoldsAddress: ADD was refused because this container's
	// interface already holds an address (NVIDIA's daemon answers a
	// repeated ADD so).
	ErrContainerHoldsAddress uint = 105
	// ErrDaemonLacksCall: GC needs a call the daemon does not serve
	// (NVIDIA's daemon has no ipam.node.v1.NodeAllocations).
	ErrDaemonLacksCall uint = 106
)

// daemonError maps an error of a call to the daemon (method: Allocate,
// IsAllocated, Deallocate, Check, GarbageCollect) to a CNI error. This is the one place gRPC
// codes become CNI codes.
func daemonError(method, addr string, err error) *types.Error {
	st, ok := status.FromError(err)
	if !ok {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return types.NewError(types.ErrTryAgainLater, "nv-ipam: the daemon at "+addr+" did not answer "+method+" in time", capDetail(err.Error()))
		}
		return types.NewError(types.ErrInternal, "nv-ipam: "+method+" at "+addr+" failed", capDetail(err.Error()))
	}
	detail := capDetail(st.Message())
	switch st.Code() {
	case codes.Unavailable:
		return types.NewError(types.ErrTryAgainLater, "nv-ipam: the daemon at "+addr+" is unavailable ("+method+")", detail)
	case codes.DeadlineExceeded, codes.Canceled:
		return types.NewError(types.ErrTryAgainLater, "nv-ipam: the daemon at "+addr+" did not answer "+method+" in time", detail)
	case codes.InvalidArgument:
		return types.NewError(types.ErrInvalidNetworkConfig, "nv-ipam: the daemon refused the "+method+" request", detail)
	case codes.NotFound:
		if method == "IsAllocated" || method == "Check" {
			return types.NewError(ErrNoAllocation, "nv-ipam: the container does not hold its addresses in the pools", detail)
		}
		// Allocate: the node holds no block of the pool (yet): the
		// controller may not have assigned it.
		return types.NewError(types.ErrTryAgainLater, "nv-ipam: this node holds no block of the pool (yet)", detail)
	case codes.AlreadyExists:
		return types.NewError(ErrAddressTaken, "nv-ipam: a requested address is held by another container", detail)
	case codes.FailedPrecondition:
		if method == "Check" {
			return types.NewError(ErrAddressOutsideBlock, "nv-ipam: an address of the container is outside the node's block of its pool", detail)
		}
		return types.NewError(types.ErrInternal, "nv-ipam: "+method+" failed: "+st.Code().String(), detail)
	case codes.ResourceExhausted:
		if strings.Contains(st.Message(), "larger than max") {
			// The client's own limit on an answer's size.
			return types.NewError(ErrBadDaemonAnswer, "nv-ipam: the daemon's answer to "+method+" is too large", detail)
		}
		return types.NewError(ErrPoolExhausted, "nv-ipam: the node's block of the pool is full", detail)
	default:
		return types.NewError(types.ErrInternal, "nv-ipam: "+method+" failed: "+st.Code().String(), detail)
	}
}
