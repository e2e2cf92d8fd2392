package translate

import (
	"fmt"
	"math/big"
	"net/netip"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	nvv1alpha1 "github.com/nephio-project/ipam/api/nvidia/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

// The NVIDIA front: an IPPool is a network instance of its own in
// ipam-server, <owner>.nvidia.ippool.<namespace>.<name>, holding its
// subnet as a network (with the gateway, which blocks may contain as
// NVIDIA's do, and the exclusions); each matching node's block is an
// allocation of perNodeBlockSize consecutive addresses (rule 18) of the
// front's owner <owner>.nvidia, keyed ippool.<pool>.<node> and labelled
// with the node and the pool, so that a node-local plugin lists its
// blocks with one call.

// NVIDIAOwner is the owner the NVIDIA front keys the nodes' blocks by.
func NVIDIAOwner(owner string) string { return owner + ".nvidia" }

// NVIDIAPoolID names an IPPool in ipam-server: its network instance and
// the owner of its objects.
func NVIDIAPoolID(owner, namespace, name string) string {
	return NVIDIAOwner(owner) + ".ippool." + namespace + "." + name
}

// NVIDIAPool is an IPPool's spec, read and checked.
type NVIDIAPool struct {
	// Namespace and Name identify the pool.
	Namespace, Name string
	subnet          netip.Prefix
	gateway         netip.Addr
	block           int
	exclusions      []span
}

func (p *NVIDIAPool) fieldErr(field, format string, args ...any) error {
	return &FieldError{Kind: nvv1alpha1.KindIPPool, Namespace: p.Namespace, Name: p.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ParseNVIDIAPool reads the spec of the IPPool namespace/name and checks
// what NVIDIA's webhook checks: a subnet, a block of at least 2 addresses
// that fits in the subnet's usable addresses, a gateway and exclusions
// inside the subnet.
func ParseNVIDIAPool(namespace, name string, spec *nvv1alpha1.IPPoolSpec) (*NVIDIAPool, error) {
	p := &NVIDIAPool{Namespace: namespace, Name: name, block: spec.PerNodeBlockSize}
	subnet, err := netip.ParsePrefix(spec.Subnet)
	if err != nil {
		return nil, p.fieldErr("spec.subnet", "%s is not a subnet in CIDR notation", quote(spec.Subnet))
	}
	p.subnet = subnet.Masked()
	if p.block < 2 {
		return nil, p.fieldErr("spec.perNodeBlockSize", "%d: a block holds at least 2 addresses", p.block)
	}
	usable := new(big.Int).Lsh(big.NewInt(1), uint(p.subnet.Addr().BitLen()-p.subnet.Bits()))
	if p.subnet.Addr().BitLen()-p.subnet.Bits() > 1 {
		usable.Sub(usable, big.NewInt(2)) // rule 3: the first and last are reserved
	}
	if usable.Cmp(big.NewInt(int64(p.block))) < 0 {
		return nil, p.fieldErr("spec.perNodeBlockSize", "%d does not fit in %s (%s usable addresses)", p.block, p.subnet, usable)
	}
	if spec.Gateway != "" {
		if p.gateway, err = netip.ParseAddr(spec.Gateway); err != nil || !p.subnet.Contains(p.gateway.Unmap()) {
			return nil, p.fieldErr("spec.gateway", "%s is not an address of %s", quote(spec.Gateway), p.subnet)
		}
		p.gateway = p.gateway.Unmap()
	}
	for i, x := range spec.Exclusions {
		from, err1 := netip.ParseAddr(x.StartIP)
		to, err2 := netip.ParseAddr(x.EndIP)
		if err1 != nil || err2 != nil || !p.subnet.Contains(from.Unmap()) || !p.subnet.Contains(to.Unmap()) || to.Less(from) {
			return nil, p.fieldErr(fmt.Sprintf("spec.exclusions[%d]", i), "%s-%s is not a range of %s", quote(x.StartIP), quote(x.EndIP), p.subnet)
		}
		p.exclusions = append(p.exclusions, span{from.Unmap(), to.Unmap()})
	}
	return p, nil
}

// Sync is the request that makes ipam-server hold the pool's network for
// the in-cluster front of owner, under the pool's own owner; the nodes'
// blocks are allocations of another owner and stay.
func (p *NVIDIAPool) Sync(owner string) (*ipamv1.SyncRequest, error) {
	id := NVIDIAPoolID(owner, p.Namespace, p.Name)
	if len(id) > maxIDLength {
		return nil, p.fieldErr("metadata.name", "too long: the pool's network instance %s... would exceed %d characters", id[:64], maxIDLength)
	}
	zero := netip.IPv4Unspecified()
	if !p.subnet.Addr().Is4() {
		zero = netip.IPv6Unspecified()
	}
	network := &ipamv1.Prefix{
		Key:             &ipamv1.Key{Owner: id, Namespace: p.Namespace, Name: "ippool." + p.Name + ".network"},
		Kind:            string(ipamv1alpha1.PrefixKindNetwork),
		NetworkInstance: id,
		Prefix:          p.subnet.String(),
		GatewayInBlocks: true,
	}
	if p.gateway.IsValid() {
		network.Prefix = netip.PrefixFrom(p.gateway, p.subnet.Bits()).String()
		network.Labels = map[string]string{ipamv1alpha1.LabelGateway: "true"}
	}
	for _, x := range p.exclusions {
		network.Exclusions = append(network.Exclusions, &ipamv1.AddrRange{Start: x.from.String(), End: x.to.String()})
	}
	return &ipamv1.SyncRequest{
		Owner: id,
		Prune: true,
		NetworkInstances: []*ipamv1.NetworkInstance{{Key: &ipamv1.Key{Owner: id, Name: id},
			Prefixes: []*ipamv1.VRFPrefix{{Prefix: netip.PrefixFrom(zero, 0).String()}}}},
		Prefixes: []*ipamv1.Prefix{network},
	}, nil
}

// NVIDIABlockKey is the key of node's block of the pool namespace/name.
func NVIDIABlockKey(owner, namespace, pool, node string) *ipamv1.Key {
	return &ipamv1.Key{Owner: NVIDIAOwner(owner), Namespace: namespace, Name: "ippool." + pool + "." + node}
}

// Block is the allocation of node's block: perNodeBlockSize consecutive
// addresses, the lowest run free (first fit from the start of the subnet).
func (p *NVIDIAPool) Block(owner, node string) *ipamv1.Allocation {
	id := NVIDIAPoolID(owner, p.Namespace, p.Name)
	return &ipamv1.Allocation{
		Key:             NVIDIABlockKey(owner, p.Namespace, p.Name, node),
		Kind:            string(ipamv1alpha1.PrefixKindNetwork),
		NetworkInstance: id,
		Count:           int32(p.block),
		Selector:        map[string]string{ipamv1alpha1.LabelNetworkInstance: id},
		Labels:          map[string]string{nvv1alpha1.LabelNode: node, nvv1alpha1.LabelPool: p.Namespace + "." + p.Name},
	}
}

// BlockRange is the first and last address of a block's result.
func BlockRange(res *ipamv1.Result) (start, end string, err error) {
	pfx, err := netip.ParsePrefix(res.GetPrefix())
	if err != nil {
		return "", "", fmt.Errorf("ipam-server answered %q: %w", res.GetPrefix(), err)
	}
	end = res.GetLast()
	if end == "" {
		end = pfx.Addr().String()
	}
	return pfx.Addr().String(), end, nil
}
