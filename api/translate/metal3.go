package translate

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	metal3v1alpha1 "github.com/nephio-project/ipam/api/metal3/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

// The Metal3 front: an IPPool is a network instance of its own in
// ipam-server, <owner>.metal3.ippool.<namespace>.<name>, with the
// aggregate of its family, a network around each pools[] entry (the
// smallest prefix holding it) and one range per entry, labelled with the
// pool kind, carrying the entry's prefix and gateway and the
// pre-allocations that lie in it, and handing out its network's first and
// last addresses (Metal3 reserves none). IPClaims are allocations of the front's
// owner <owner>.metal3 keyed by the claim's namespace and name, so that a
// pre-allocation (keyed by claim name) is theirs.

// LabelPoolEntry is the user label every range of a Metal3 pool carries,
// set to the index of its pools[] entry: claims take entries in order.
const LabelPoolEntry = "ipam.nephio.org/pool-entry"

// Bounds of a Metal3 IPPool (its CRD's too).
const (
	// MaxMetal3Entries bounds pools[].
	MaxMetal3Entries = 256
	// MaxPreAllocations bounds preAllocations.
	MaxPreAllocations = 4096
)

// Metal3Owner is the owner the Metal3 front keys its claims' allocations
// by, derived from the front's owner.
func Metal3Owner(owner string) string { return owner + ".metal3" }

// cover is the smallest prefix holding s.
func cover(s span) netip.Prefix {
	for bits := s.from.BitLen(); ; bits-- {
		if p := netip.PrefixFrom(s.from, bits).Masked(); p.Contains(s.to) {
			return p
		}
	}
}

// Metal3PoolID names an IPPool in ipam-server: its network instance and
// the owner of its objects.
func Metal3PoolID(owner, namespace, name string) string {
	return Metal3Owner(owner) + ".ippool." + namespace + "." + name
}

// PackageMetal3ClaimName is the key name of an IPClaim's allocation in a
// package's Sync, where other objects share the owner: ipclaim.<name>.
func PackageMetal3ClaimName(name string) string { return "ipclaim." + name }

// PackageMetal3AddressName is the key name of an IPAddress taken out of a
// pool by hand, in a package's Sync: ipaddress.<name>.
func PackageMetal3AddressName(name string) string { return "ipaddress." + name }

// Metal3ClaimKey is the key of an IPClaim's allocation.
func Metal3ClaimKey(owner, namespace, name string) *ipamv1.Key {
	return &ipamv1.Key{Owner: Metal3Owner(owner), Namespace: namespace, Name: name}
}

// metal3Entry is one pools[] entry, read.
type metal3Entry struct {
	span
	prefix  int
	gateway netip.Addr
	dns     []metal3v1alpha1.IPAddressStr
}

// Metal3Pool is an IPPool's spec, read and checked.
type Metal3Pool struct {
	// Namespace and Name identify the pool.
	Namespace, Name string
	spec            *metal3v1alpha1.IPPoolSpec
	entries         []metal3Entry
	pre             map[string]netip.Addr
}

func (p *Metal3Pool) fieldErr(field, format string, args ...any) error {
	return &FieldError{Kind: metal3v1alpha1.KindIPPool, Namespace: p.Namespace, Name: p.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ParseMetal3Pool reads the spec of the IPPool namespace/name as Metal3
// does: an entry with start runs to end, or to the end of subnet; an
// entry with a subnet alone holds the subnet's addresses after the one
// written (192.168.1.1/26: .2 to .63). Prefix, gateway and DNS servers
// of an entry override the pool's. It refuses what Metal3's webhook
// refuses, naming the field, and entries that overlap.
func ParseMetal3Pool(namespace, name string, spec *metal3v1alpha1.IPPoolSpec) (*Metal3Pool, error) {
	p := &Metal3Pool{Namespace: namespace, Name: name, spec: spec, pre: map[string]netip.Addr{}}
	// The CRD's bounds, for packages no API server validated.
	if len(spec.Pools) > MaxMetal3Entries {
		return nil, p.fieldErr("spec.pools", "%d entries; at most %d", len(spec.Pools), MaxMetal3Entries)
	}
	if len(spec.PreAllocations) > MaxPreAllocations {
		return nil, p.fieldErr("spec.preAllocations", "%d entries; at most %d", len(spec.PreAllocations), MaxPreAllocations)
	}
	poolGW, err := p.addr("spec.gateway", spec.Gateway)
	if err != nil {
		return nil, err
	}
	for i, e := range spec.Pools {
		field := fmt.Sprintf("spec.pools[%d]", i)
		en := metal3Entry{prefix: spec.Prefix, gateway: poolGW, dns: spec.DNSServers}
		var net netip.Prefix
		if e.Subnet != nil {
			if net, err = netip.ParsePrefix(string(*e.Subnet)); err != nil {
				return nil, p.fieldErr(field+".subnet", "%s is not a subnet in CIDR notation", quote(string(*e.Subnet)))
			}
		}
		start, err := p.addr(field+".start", e.Start)
		if err != nil {
			return nil, err
		}
		end, err := p.addr(field+".end", e.End)
		if err != nil {
			return nil, err
		}
		switch {
		case start.IsValid():
			en.from = start
		case net.IsValid():
			if en.from = net.Addr().Unmap().Next(); !net.Contains(en.from) {
				return nil, p.fieldErr(field+".subnet", "%s holds no address after %s", net, net.Addr())
			}
		default:
			return nil, p.fieldErr(field, "start or subnet is required")
		}
		switch {
		case end.IsValid():
			en.to = end
		case net.IsValid():
			en.to = lastOf(net.Masked())
		default:
			return nil, p.fieldErr(field+".end", "end or subnet is required with start")
		}
		if en.from.Is4() != en.to.Is4() || en.to.Less(en.from) {
			return nil, p.fieldErr(field, "%s-%s is not a range of one family with start <= end", en.from, en.to)
		}
		if net.IsValid() && (!net.Contains(en.from) || !net.Contains(en.to)) {
			return nil, p.fieldErr(field+".subnet", "%s does not contain %s-%s", net, en.from, en.to)
		}
		if len(p.entries) > 0 && en.from.Is4() != p.entries[0].from.Is4() {
			return nil, p.fieldErr(field, "IPv4 and IPv6 cannot be mixed in one pool")
		}
		for j, o := range p.entries {
			if _, _, ok := overlap(en.span, o.span); ok {
				return nil, p.fieldErr(field, "%s-%s overlaps spec.pools[%d] (%s-%s)", en.from, en.to, j, o.from, o.to)
			}
		}
		if e.Prefix != 0 {
			en.prefix = e.Prefix
		}
		if en.prefix > en.from.BitLen() {
			return nil, p.fieldErr(field+".prefix", "%d is longer than a %d-bit address", en.prefix, en.from.BitLen())
		}
		if e.Gateway != nil {
			if en.gateway, err = p.addr(field+".gateway", e.Gateway); err != nil {
				return nil, err
			}
		}
		if en.gateway.IsValid() && en.gateway.Is4() != en.from.Is4() {
			return nil, p.fieldErr(field+".gateway", "%s is not of the entry's family", en.gateway)
		}
		if len(e.DNSServers) > 0 {
			en.dns = e.DNSServers
		}
		p.entries = append(p.entries, en)
	}
	for claim, s := range spec.PreAllocations {
		a, err := netip.ParseAddr(string(s))
		if err != nil {
			return nil, p.fieldErr("spec.preAllocations["+claim+"]", "%s is not an IP address", quote(string(s)))
		}
		p.pre[claim] = a.Unmap()
	}
	return p, nil
}

// addr parses an optional address field.
func (p *Metal3Pool) addr(field string, s *metal3v1alpha1.IPAddressStr) (netip.Addr, error) {
	if s == nil {
		return netip.Addr{}, nil
	}
	a, err := netip.ParseAddr(string(*s))
	if err != nil {
		return netip.Addr{}, p.fieldErr(field, "%s is not an IP address", quote(string(*s)))
	}
	return a.Unmap(), nil
}

// entryOf is the first entry holding a, or nil.
func (p *Metal3Pool) entryOf(a netip.Addr) *metal3Entry {
	for i := range p.entries {
		if e := &p.entries[i]; !a.Less(e.from) && !e.to.Less(a) {
			return e
		}
	}
	return nil
}

// PreAllocationOutOfBounds reports whether claim has a pre-allocated
// address that lies in no entry: Metal3 refuses the claim, not the pool.
func (p *Metal3Pool) PreAllocationOutOfBounds(claim string) bool {
	a, ok := p.pre[claim]
	return ok && p.entryOf(a) == nil
}

// Contains reports whether a lies in one of the pool's entries.
func (p *Metal3Pool) Contains(a netip.Addr) bool { return p.entryOf(a.Unmap()) != nil }

// AddTo appends the pool's objects to req, keyed under objOwner, for the
// front of owner: its network instance, the networks around its entries
// and one range per entry, named ippool.<name>.range-<n> in the pool's
// namespace, with the entry's pre-allocations under the key name
// claimName gives a claim's allocation (nil: the claim's name).
func (p *Metal3Pool) AddTo(req *ipamv1.SyncRequest, owner, objOwner string, claimName func(string) string) error {
	id := Metal3PoolID(owner, p.Namespace, p.Name)
	var first netip.Addr
	if len(p.entries) > 0 {
		first = p.entries[0].from
	}
	ni, err := poolInstance(id, objOwner, first, p.fieldErr)
	if err != nil {
		return err
	}
	req.NetworkInstances = append(req.NetworkInstances, ni)
	if len(p.entries) == 0 {
		return nil
	}
	// A network per entry, the smallest prefix around it, dropping those
	// inside another: prefixes nest or are apart, so the rest are apart.
	var nets []netip.Prefix
	for _, e := range p.entries {
		nets = append(nets, cover(e.span))
	}
	slices.SortFunc(nets, func(a, b netip.Prefix) int { return a.Bits() - b.Bits() })
	var kept []netip.Prefix
	for _, n := range nets {
		if !slices.ContainsFunc(kept, func(k netip.Prefix) bool { return k.Contains(n.Addr()) }) {
			kept = append(kept, n)
			req.Prefixes = append(req.Prefixes, &ipamv1.Prefix{
				Key:             &ipamv1.Key{Owner: objOwner, Namespace: p.Namespace, Name: "ippool." + p.Name + ".network-" + n.String()},
				Kind:            string(ipamv1alpha1.PrefixKindNetwork),
				NetworkInstance: id,
				Prefix:          n.String(),
			})
		}
	}
	for i, e := range p.entries {
		r := &ipamv1.IPRange{
			Key:             &ipamv1.Key{Owner: objOwner, Namespace: p.Namespace, Name: fmt.Sprintf("ippool.%s.range-%d", p.Name, i)},
			NetworkInstance: id,
			Start:           e.from.String(),
			End:             e.to.String(),
			Labels:          map[string]string{LabelPoolKind: metal3v1alpha1.KindIPPool, LabelPoolEntry: strconv.Itoa(i)},
			PrefixLength:    int32(e.prefix),
			// Metal3 reserves no network or broadcast address.
			AllocateReserved: true,
		}
		if e.gateway.IsValid() {
			r.Gateway = e.gateway.String()
		}
		for claim, a := range p.pre {
			if !a.Less(e.from) && !e.to.Less(a) {
				if r.PreAllocations == nil {
					r.PreAllocations = map[string]string{}
				}
				if claimName != nil {
					claim = claimName(claim)
				}
				r.PreAllocations[claim] = a.String()
			}
		}
		req.Ranges = append(req.Ranges, r)
	}
	return nil
}

// External is the allocation of an IPAddress taken out of the pool by
// hand, name, at a: exactly that address, keyed ipaddress.<name> under
// objOwner in the pool's namespace.
func (p *Metal3Pool) External(owner, objOwner, name string, a netip.Addr) *ipamv1.Allocation {
	return &ipamv1.Allocation{
		Key:             &ipamv1.Key{Owner: objOwner, Namespace: p.Namespace, Name: PackageMetal3AddressName(name)},
		Kind:            string(ipamv1alpha1.PrefixKindNetwork),
		NetworkInstance: Metal3PoolID(owner, p.Namespace, p.Name),
		Prefix:          netip.PrefixFrom(a, a.BitLen()).String(),
	}
}

// Metal3Sync is the request that makes ipam-server hold the pool as its
// spec says for the in-cluster front of owner, with the addresses taken
// by hand (IPAddresses without a claim, name -> address) as allocations
// of exactly those addresses, all under the pool's own owner.
func (p *Metal3Pool) Metal3Sync(owner string, external map[string]netip.Addr) (*ipamv1.SyncRequest, error) {
	id := Metal3PoolID(owner, p.Namespace, p.Name)
	req := &ipamv1.SyncRequest{Owner: id, Prune: true}
	if err := p.AddTo(req, owner, id, nil); err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(external)) {
		req.Allocations = append(req.Allocations, p.External(owner, id, name, external[name]))
	}
	return req, nil
}

// Entries is the number of the pool's pools[] entries.
func (p *Metal3Pool) Entries() int { return len(p.entries) }

// HasPreAllocation reports whether claim has a pre-allocated address.
func (p *Metal3Pool) HasPreAllocation(claim string) bool { _, ok := p.pre[claim]; return ok }

// Metal3ClaimEntry is Metal3Claim narrowed to entry i: Metal3 takes the
// lowest free address of the first entry that has one, in spec order,
// where ipam-server would take the entries in address order.
func (p *Metal3Pool) Metal3ClaimEntry(owner string, key *ipamv1.Key, i int) *ipamv1.Allocation {
	a, _ := p.Metal3Claim(owner, key, "")
	a.Selector[LabelPoolEntry] = strconv.Itoa(i)
	return a
}

// Metal3Claim is the allocation of an IPClaim, keyed key, from the pool:
// its pre-allocated address, the lowest free address of its entries in
// address order, or the address its ipAddress annotation asks for (empty:
// none).
func (p *Metal3Pool) Metal3Claim(owner string, key *ipamv1.Key, requested string) (*ipamv1.Allocation, error) {
	a := &ipamv1.Allocation{
		Key:             key,
		Kind:            string(ipamv1alpha1.PrefixKindNetwork),
		NetworkInstance: Metal3PoolID(owner, p.Namespace, p.Name),
		Selector:        map[string]string{LabelPoolKind: metal3v1alpha1.KindIPPool},
	}
	if requested != "" {
		ip, err := netip.ParseAddr(requested)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %s is not an IP address", metal3v1alpha1.AnnotationIPAddress, quote(requested))
		}
		a.Prefix = netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()).String()
	}
	return a, nil
}

// Metal3Address is the IPAddress spec of addr for the claim claimNS/claim:
// the prefix, gateway and DNS servers of the entry holding it.
func (p *Metal3Pool) Metal3Address(addr netip.Addr, claimNS, claim string) metal3v1alpha1.IPAddressSpec {
	spec := metal3v1alpha1.IPAddressSpec{Address: metal3v1alpha1.IPAddressStr(addr.String()), Prefix: p.spec.Prefix, DNSServers: p.spec.DNSServers}
	spec.Pool.Name, spec.Pool.Namespace = p.Name, p.Namespace
	spec.Claim.Name, spec.Claim.Namespace = claim, claimNS
	spec.Gateway = p.spec.Gateway
	if e := p.entryOf(addr); e != nil {
		spec.Prefix, spec.DNSServers = e.prefix, e.dns
		if e.gateway.IsValid() {
			gw := metal3v1alpha1.IPAddressStr(e.gateway.String())
			spec.Gateway = &gw
		}
	}
	return spec
}

// Metal3AddressName is the name of the IPAddress of addr: the pool's
// namePrefix (default: its name), a dash, and the address with dashes
// for dots and colons (pool1-192-168-0-13, pool1-2001-db8--10).
func (p *Metal3Pool) Metal3AddressName(addr netip.Addr) string {
	prefix := p.spec.NamePrefix
	if prefix == "" {
		prefix = p.Name
	}
	return strings.TrimRight(prefix+"-"+strings.NewReplacer(".", "-", ":", "-").Replace(addr.String()), "-")
}
