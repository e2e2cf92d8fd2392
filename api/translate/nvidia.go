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
	if len(spec.Exclusions) > 256 {
		return nil, p.fieldErr("spec.exclusions", "%d entries; at most 256", len(spec.Exclusions))
	}
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
	ni, err := poolInstance(id, id, p.subnet.Addr(), p.fieldErr)
	if err != nil {
		return nil, err
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
	return &ipamv1.SyncRequest{Owner: id, Prune: true, NetworkInstances: []*ipamv1.NetworkInstance{ni}, Prefixes: []*ipamv1.Prefix{network}}, nil
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

// NVIDIACIDRPoolID names a CIDRPool in ipam-server.
func NVIDIACIDRPoolID(owner, namespace, name string) string {
	return NVIDIAOwner(owner) + ".cidrpool." + namespace + "." + name
}

// NVIDIACIDRPool is a CIDRPool's spec, read and checked.
type NVIDIACIDRPool struct {
	// Namespace and Name identify the pool.
	Namespace, Name string
	cidr            netip.Prefix
	bits            int
	gatewayIndex    *int32
	static          map[string]staticPrefix
}

type staticPrefix struct {
	prefix  netip.Prefix
	gateway netip.Addr
}

func (p *NVIDIACIDRPool) fieldErr(field, format string, args ...any) error {
	return &FieldError{Kind: nvv1alpha1.KindCIDRPool, Namespace: p.Namespace, Name: p.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ParseNVIDIACIDRPool reads the spec of the CIDRPool namespace/name and
// checks what NVIDIA's webhook checks: the per-node prefix inside the
// CIDR, the gateway index inside a node's prefix, static allocations of
// the per-node length inside the CIDR, one per node and apart.
func ParseNVIDIACIDRPool(namespace, name string, spec *nvv1alpha1.CIDRPoolSpec) (*NVIDIACIDRPool, error) {
	p := &NVIDIACIDRPool{Namespace: namespace, Name: name, bits: int(spec.PerNodeNetworkPrefix), gatewayIndex: spec.GatewayIndex, static: map[string]staticPrefix{}}
	cidr, err := netip.ParsePrefix(spec.CIDR)
	if err != nil {
		return nil, p.fieldErr("spec.cidr", "%s is not in CIDR notation", quote(spec.CIDR))
	}
	p.cidr = cidr.Masked()
	if len(spec.StaticAllocations) > 4096 {
		return nil, p.fieldErr("spec.staticAllocations", "%d entries; at most 4096", len(spec.StaticAllocations))
	}
	if p.bits < p.cidr.Bits() || p.bits > p.cidr.Addr().BitLen() {
		return nil, p.fieldErr("spec.perNodeNetworkPrefix", "%d is not a length between %d and %d", p.bits, p.cidr.Bits(), p.cidr.Addr().BitLen())
	}
	if gi := spec.GatewayIndex; gi != nil && (p.cidr.Addr().BitLen()-p.bits < 31 && int64(*gi) >= int64(1)<<(p.cidr.Addr().BitLen()-p.bits)) {
		return nil, p.fieldErr("spec.gatewayIndex", "%d is past the %d addresses of a /%d", *gi, int64(1)<<(p.cidr.Addr().BitLen()-p.bits), p.bits)
	}
	for i, s := range spec.StaticAllocations {
		field := fmt.Sprintf("spec.staticAllocations[%d]", i)
		sp, err := netip.ParsePrefix(s.Prefix)
		if err != nil || sp.Bits() != p.bits || sp.Masked() != sp || !p.cidr.Contains(sp.Addr()) {
			return nil, p.fieldErr(field+".prefix", "%s is not a /%d of %s", quote(s.Prefix), p.bits, p.cidr)
		}
		if _, dup := p.static[s.NodeName]; dup {
			return nil, p.fieldErr(field+".nodeName", "%s has another static allocation", quote(s.NodeName))
		}
		st := staticPrefix{prefix: sp}
		if s.Gateway != "" {
			if st.gateway, err = netip.ParseAddr(s.Gateway); err != nil || !sp.Contains(st.gateway) {
				return nil, p.fieldErr(field+".gateway", "%s is not an address of %s", quote(s.Gateway), sp)
			}
		}
		for node, o := range p.static {
			if o.prefix == sp {
				return nil, p.fieldErr(field+".prefix", "%s is node %s's already", sp, node)
			}
		}
		p.static[s.NodeName] = st
	}
	return p, nil
}

// Sync is the request that makes ipam-server hold the pool's CIDR (a pool
// prefix) for the in-cluster front of owner, under the pool's own owner.
func (p *NVIDIACIDRPool) Sync(owner string) (*ipamv1.SyncRequest, error) {
	id := NVIDIACIDRPoolID(owner, p.Namespace, p.Name)
	ni, err := poolInstance(id, id, p.cidr.Addr(), p.fieldErr)
	if err != nil {
		return nil, err
	}
	return &ipamv1.SyncRequest{
		Owner:            id,
		Prune:            true,
		NetworkInstances: []*ipamv1.NetworkInstance{ni},
		Prefixes: []*ipamv1.Prefix{{
			Key:             &ipamv1.Key{Owner: id, Namespace: p.Namespace, Name: "cidrpool." + p.Name},
			Kind:            string(ipamv1alpha1.PrefixKindPool),
			NetworkInstance: id,
			Prefix:          p.cidr.String(),
		}},
	}, nil
}

// Static reports whether node has a static allocation.
func (p *NVIDIACIDRPool) Static(node string) bool { _, ok := p.static[node]; return ok }

// NodePrefix is the allocation of node's prefix: its static one, or the
// lowest free prefix of perNodeNetworkPrefix (best fit, rule 5).
func (p *NVIDIACIDRPool) NodePrefix(owner, node string) *ipamv1.Allocation {
	id := NVIDIACIDRPoolID(owner, p.Namespace, p.Name)
	a := &ipamv1.Allocation{
		Key:             &ipamv1.Key{Owner: NVIDIAOwner(owner), Namespace: p.Namespace, Name: "cidrpool." + p.Name + "." + node},
		Kind:            string(ipamv1alpha1.PrefixKindNetwork),
		NetworkInstance: id,
		PrefixLength:    int32(p.bits),
		// The pool prefix, not the aggregate around it.
		Selector: map[string]string{ipamv1alpha1.LabelNetworkInstance: id, ipamv1alpha1.LabelPrefixKind: string(ipamv1alpha1.PrefixKindPool)},
		Labels:   map[string]string{nvv1alpha1.LabelNode: node, nvv1alpha1.LabelPool: p.Namespace + "." + p.Name},
	}
	if s, ok := p.static[node]; ok {
		a.Prefix = s.prefix.String()
	}
	return a
}

// NodeGateway is the gateway of node's prefix: its static gateway, or the
// address at gatewayIndex, or none.
func (p *NVIDIACIDRPool) NodeGateway(node string, prefix netip.Prefix) string {
	if s, ok := p.static[node]; ok && s.gateway.IsValid() {
		return s.gateway.String()
	}
	if p.gatewayIndex == nil {
		return ""
	}
	a := prefix.Masked().Addr()
	n := new(big.Int).SetBytes(a.AsSlice())
	n.Add(n, big.NewInt(int64(*p.gatewayIndex)))
	b := n.FillBytes(make([]byte, len(a.AsSlice())))
	gw, _ := netip.AddrFromSlice(b)
	return gw.String()
}
