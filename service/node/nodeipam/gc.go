package nodeipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/nephio-project/ipam/service/ipam"
)

// ErrOutsideBlock says that an allocation a container holds is no longer
// an address of the node's block of its pool (the block moved or is gone).
var ErrOutsideBlock = errors.New("outside the node's block")

// MaxAttachments bounds the valid attachments of one GarbageCollect.
const MaxAttachments = 1 << 13

// Attachment is a container's interface, as the runtime names it.
type Attachment struct {
	// ContainerID is CNI_CONTAINERID; IfName is CNI_IFNAME.
	ContainerID, IfName string
}

// GarbageCollect releases every allocation the node holds in the pools
// named (of type t) whose container interface is not in valid: CNI GC
// with cni.dev/valid-attachments. Each release is durable and releases
// that very allocation only (the same address, created at the same time),
// so it never takes a newer allocation of the same interface. It returns
// what it released, and stops at the first release that fails.
func (e *Engine) GarbageCollect(ctx context.Context, t PoolType, pools []string, valid []Attachment) ([]Held, error) {
	if err := checkPools("", t, pools); err != nil {
		return nil, err
	}
	if len(valid) > MaxAttachments {
		return nil, invalid("valid_attachments", "%d attachments; at most %d", len(valid), MaxAttachments)
	}
	keep := make(map[string]bool, len(valid))
	for i, a := range valid {
		f := "valid_attachments[" + strconv.Itoa(i) + "]"
		if err := checkContainerID(f+".container_id", a.ContainerID); err != nil {
			return nil, err
		}
		if err := checkIfName(f+".ifname", a.IfName); err != nil {
			return nil, err
		}
		keep[ownerOf(a.ContainerID, a.IfName)] = true
	}
	var released []Held
	for _, name := range pools {
		k := PoolKey{Type: t, Name: name}
		p := e.pool(k)
		if p == nil {
			continue
		}
		for _, r := range e.a.ListAllocations(ipam.Filter{NetworkInstance: p.vrf}) {
			h, ok := heldOf(k, r)
			if !ok || keep[ownerOf(h.ContainerID, h.IfName)] {
				continue
			}
			if err := e.Release(ctx, h); err != nil {
				return released, err
			}
			released = append(released, h)
		}
	}
	return released, nil
}

// PoolState says whether the node can hand out addresses of a pool.
type PoolState struct {
	// Ready is true when the node holds a usable block of the pool.
	Ready bool
	// Reason says why not.
	Reason string
}

// PoolStatus says, for each pool named (of type t), whether the node
// holds a block of it that it can hand addresses out of: CNI STATUS.
func (e *Engine) PoolStatus(t PoolType, pools []string) ([]PoolState, error) {
	if err := checkPools("", t, pools); err != nil {
		return nil, err
	}
	out := make([]PoolState, len(pools))
	for i, name := range pools {
		k := PoolKey{Type: t, Name: name}
		p := e.pool(k)
		if p == nil {
			out[i].Reason = k.String() + ": this node holds no block of the pool (yet)"
			continue
		}
		p.mu.RLock()
		switch {
		case p.block == nil:
			out[i].Reason = k.String() + ": this node holds no block of the pool (yet)"
		case p.invalid != nil:
			out[i].Reason = k.String() + ": the pool is not usable: " + capMsg(p.invalid.Error())
		case p.blocked != nil:
			out[i].Reason = capMsg(p.blocked.Error())
		default:
			out[i].Ready = true
		}
		p.mu.RUnlock()
	}
	return out, nil
}

// checkHeld verifies that the address a container holds in pool k (IP,
// written with its network's length) is one of want (when want is not
// empty) and still an address of the node's block: wrapping
// ipam.ErrNotFound or ErrOutsideBlock when it is not.
func (e *Engine) checkHeld(k PoolKey, r *Request, ip netip.Prefix, want []netip.Addr) error {
	a := ip.Addr()
	if len(want) > 0 && !containsAddr(want, a) {
		return fmt.Errorf("%s: container %s interface %s holds %s, not %s: %w", k, ipam.Quote(r.ContainerID), ipam.Quote(r.IfName), a, addrList(want), ipam.ErrNotFound)
	}
	p := e.pool(k)
	if p == nil {
		return fmt.Errorf("%s: %s of container %s interface %s: this node holds no block of the pool any more: %w", k, ip, ipam.Quote(r.ContainerID), ipam.Quote(r.IfName), ErrOutsideBlock)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	b := p.block
	switch {
	case b == nil:
		return fmt.Errorf("%s: %s of container %s interface %s: this node holds no block of the pool any more: %w", k, ip, ipam.Quote(r.ContainerID), ipam.Quote(r.IfName), ErrOutsideBlock)
	case b.Network != ip.Masked() || !b.Contains(a) && a != b.Gateway:
		return fmt.Errorf("%s: %s of container %s interface %s is outside the node's block %s-%s of %s: %w", k, ip, ipam.Quote(r.ContainerID), ipam.Quote(r.IfName), b.Start, b.End, b.Network, ErrOutsideBlock)
	}
	return nil
}

func containsAddr(as []netip.Addr, a netip.Addr) bool {
	for _, x := range as {
		if x.Unmap() == a.Unmap() {
			return true
		}
	}
	return false
}

func addrList(as []netip.Addr) string {
	s := ""
	for i, a := range as {
		if i > 0 {
			s += ", "
		}
		s += a.String()
	}
	return s
}
