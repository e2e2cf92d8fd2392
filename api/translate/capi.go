package translate

import (
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	capiv1beta2 "github.com/nephio-project/ipam/api/capi/ipam/v1beta2"
	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

// The Cluster API front: an InClusterIPPool or GlobalInClusterIPPool is a
// network instance of its own in ipam-server (pools may overlap, as
// upstream's do), holding a network prefix per subnet the addresses touch
// and a range per addresses entry and subnet. Its objects belong to an
// owner of their own, the pool's ID, so that one Sync with prune makes the
// server hold exactly what the spec says, atomically; the claims'
// allocations belong to the front's owner, keyed by the claim's namespace
// and name.

// LabelPoolKind is the user label every range of a Cluster API pool
// carries, set to the pool's kind; claims select it.
const LabelPoolKind = "ipam.nephio.org/pool-kind"

// MaxPoolEntries bounds addresses and excludedAddresses (the CRD's
// bound too).
const MaxPoolEntries = 1024

// MaxPoolRanges bounds the ranges one pool becomes: the addresses split
// at every boundary of a /prefix network, and a hostile pool (a /8 range
// with prefix 32) must not make millions.
const MaxPoolRanges = 256

// CAPIOwner is the owner the Cluster API front keys its claims' allocations
// by, derived from the front's owner.
func CAPIOwner(owner string) string { return owner + ".capi" }

// PoolID names a Cluster API pool in ipam-server: it is both the network
// instance the pool becomes and the owner of the pool's objects:
// <owner>.capi.<kind>.<namespace>.<name>, without the namespace for a
// GlobalInClusterIPPool (namespace empty). Dots, not slashes: an
// authorization pattern for Porch owners (*/*) must not match it.
func PoolID(owner, kind, namespace, name string) string {
	if namespace == "" {
		return CAPIOwner(owner) + "." + strings.ToLower(kind) + "." + name
	}
	return CAPIOwner(owner) + "." + strings.ToLower(kind) + "." + namespace + "." + name
}

// maxIDLength is the longest name ipam-server takes (a DNS subdomain).
const maxIDLength = 253

// poolInstance is the network instance a front's pool becomes: named id,
// keyed under objOwner, with the whole address space of a's family as its
// aggregate (none when a is not valid: a pool without addresses).
// fieldErr names the pool's metadata.name when id is too long.
func poolInstance(id, objOwner string, a netip.Addr, fieldErr func(field, format string, args ...any) error) (*ipamv1.NetworkInstance, error) {
	if len(id) > maxIDLength {
		return nil, fieldErr("metadata.name", "too long: the pool's network instance %s... would exceed %d characters", id[:64], maxIDLength)
	}
	ni := &ipamv1.NetworkInstance{Key: &ipamv1.Key{Owner: objOwner, Name: id}}
	if a.IsValid() {
		zero := netip.IPv4Unspecified()
		if !a.Is4() {
			zero = netip.IPv6Unspecified()
		}
		ni.Prefixes = []*ipamv1.VRFPrefix{{Prefix: netip.PrefixFrom(zero, 0).String()}}
	}
	return ni, nil
}

// span is an inclusive range of addresses.
type span struct{ from, to netip.Addr }

// parseEntry reads one addresses entry: 10.0.0.10, 10.0.0.24-10.0.0.32 or
// 10.0.0.128/28 (the whole block, whatever its host bits).
func parseEntry(s string) (span, error) {
	if a, b, ok := strings.Cut(s, "-"); ok {
		from, err := netip.ParseAddr(strings.TrimSpace(a))
		if err != nil {
			return span{}, err
		}
		to, err := netip.ParseAddr(strings.TrimSpace(b))
		if err != nil {
			return span{}, err
		}
		if from.Is4() != to.Is4() || to.Less(from) {
			return span{}, fmt.Errorf("%s-%s is not a range of one family, first <= last", from, to)
		}
		return span{from.Unmap(), to.Unmap()}, nil
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return span{}, err
		}
		p = p.Masked()
		return span{p.Addr(), lastOf(p)}, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return span{}, err
	}
	return span{a.Unmap(), a.Unmap()}, nil
}

// lastOf is the last address of p.
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// PoolSpec is a Cluster API pool's spec, read and checked.
type PoolSpec struct {
	// Kind, Namespace and Name identify the pool.
	Kind, Namespace, Name string
	spec                  *ipamv1alpha1.InClusterIPPoolSpec
	addrs, excluded       []span
	gateway               netip.Addr
}

// fieldErr is a *FieldError about the pool's field.
func (p *PoolSpec) fieldErr(field, format string, args ...any) error {
	return &FieldError{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ParsePool reads the spec of the pool of kind, namespace and name (an
// empty namespace for a GlobalInClusterIPPool). It checks what the CRD's
// validation checks, so that a package rendered by ipam-fn, which no API
// server validated, gets the same answer.
func ParsePool(kind, namespace, name string, spec *ipamv1alpha1.InClusterIPPoolSpec) (*PoolSpec, error) {
	p := &PoolSpec{Kind: kind, Namespace: namespace, Name: name, spec: spec}
	if len(spec.Addresses) == 0 {
		return nil, p.fieldErr("spec.addresses", "at least one address, range or CIDR is required")
	}
	// The CRD's bounds, for packages no API server validated.
	if len(spec.Addresses) > MaxPoolEntries {
		return nil, p.fieldErr("spec.addresses", "%d entries; at most %d", len(spec.Addresses), MaxPoolEntries)
	}
	if len(spec.ExcludedAddresses) > MaxPoolEntries {
		return nil, p.fieldErr("spec.excludedAddresses", "%d entries; at most %d", len(spec.ExcludedAddresses), MaxPoolEntries)
	}
	for i, s := range spec.Addresses {
		sp, err := parseEntry(s)
		if err != nil {
			return nil, p.fieldErr(fmt.Sprintf("spec.addresses[%d]", i), "%s is not an address, a range first-last of one family or a CIDR", quote(s))
		}
		if i > 0 && sp.from.Is4() != p.addrs[0].from.Is4() {
			return nil, p.fieldErr(fmt.Sprintf("spec.addresses[%d]", i), "%s: IPv4 and IPv6 cannot be mixed in one pool", s)
		}
		p.addrs = append(p.addrs, sp)
	}
	v4 := p.addrs[0].from.Is4()
	bits := 128
	if v4 {
		bits = 32
	}
	if spec.Prefix < 1 || int(spec.Prefix) > bits {
		return nil, p.fieldErr("spec.prefix", "%d is not a prefix length of the pool's family (1-%d)", spec.Prefix, bits)
	}
	for i, s := range spec.ExcludedAddresses {
		sp, err := parseEntry(s)
		if err != nil {
			return nil, p.fieldErr(fmt.Sprintf("spec.excludedAddresses[%d]", i), "%s is not an address, a range first-last of one family or a CIDR", quote(s))
		}
		if sp.from.Is4() != v4 {
			return nil, p.fieldErr(fmt.Sprintf("spec.excludedAddresses[%d]", i), "%s is not of the addresses' family", s)
		}
		p.excluded = append(p.excluded, sp)
	}
	if spec.Gateway != "" {
		gw, err := netip.ParseAddr(spec.Gateway)
		if err != nil {
			return nil, p.fieldErr("spec.gateway", "%s is not an IP address", quote(spec.Gateway))
		}
		gw = gw.Unmap()
		if gw.Is4() != v4 {
			return nil, p.fieldErr("spec.gateway", "%s is not of the addresses' family", gw)
		}
		net := netip.PrefixFrom(gw, int(spec.Prefix)).Masked()
		for i, a := range p.addrs {
			if !net.Contains(a.from) {
				return nil, p.fieldErr("spec.gateway", "%s is not in the network %s of spec.addresses[%d] (%s)", gw, netip.PrefixFrom(a.from, int(spec.Prefix)).Masked(), i, spec.Addresses[i])
			}
		}
		p.gateway = gw
	}
	return p, nil
}

// quote repeats a user's value in a message, cut to a bounded length.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}

// piece is one range of the pool: addresses of one network.
type piece struct {
	entry int
	net   netip.Prefix
	span
}

// pieces splits the addresses at the boundaries of the pool's networks.
func (p *PoolSpec) pieces() ([]piece, error) {
	var out []piece
	for i, a := range p.addrs {
		from := a.from
		for {
			net := netip.PrefixFrom(from, int(p.spec.Prefix)).Masked()
			to := lastOf(net)
			if a.to.Less(to) {
				to = a.to
			}
			if len(out) == MaxPoolRanges {
				return nil, p.fieldErr(fmt.Sprintf("spec.addresses[%d]", i), "the addresses span more than %d networks of /%d; use fewer or a shorter prefix", MaxPoolRanges, p.spec.Prefix)
			}
			out = append(out, piece{entry: i, net: net, span: span{from, to}})
			if to == a.to {
				break
			}
			from = to.Next()
		}
	}
	return out, nil
}

// Sync is the request that makes ipam-server hold the pool as its spec
// says, for the in-cluster front of owner: the pool's objects (see
// AddTo) under an owner of their own, the pool's ID, pruning whatever the
// spec no longer has. A range that would drop an allocated address is
// refused by the server and nothing changes.
func (p *PoolSpec) Sync(owner string) (*ipamv1.SyncRequest, error) {
	id := PoolID(owner, p.Kind, p.Namespace, p.Name)
	req := &ipamv1.SyncRequest{Owner: id, Prune: true}
	if err := p.AddTo(req, owner, id); err != nil {
		return nil, err
	}
	return req, nil
}

// AddTo appends the pool's objects to req, keyed under objOwner, for the
// front of owner: the pool's network instance PoolID(owner, ...) with the
// aggregate of its family, a network prefix per subnet the addresses
// touch and a range per addresses entry and subnet, named
// <kind>.<name>.network-<subnet> and <kind>.<name>.range-<n> in the pool's
// namespace. ipam-fn adds them to its package's Sync.
func (p *PoolSpec) AddTo(req *ipamv1.SyncRequest, owner, objOwner string) error {
	id := PoolID(owner, p.Kind, p.Namespace, p.Name)
	ni, err := poolInstance(id, objOwner, p.addrs[0].from, p.fieldErr)
	if err != nil {
		return err
	}
	pieces, err := p.pieces()
	if err != nil {
		return err
	}
	req.NetworkInstances = append(req.NetworkInstances, ni)
	base := p.ObjectPrefix()
	nets := map[netip.Prefix]bool{}
	for j, pc := range pieces {
		if !nets[pc.net] {
			nets[pc.net] = true
			req.Prefixes = append(req.Prefixes, &ipamv1.Prefix{
				Key:             &ipamv1.Key{Owner: objOwner, Namespace: p.Namespace, Name: base + "network-" + pc.net.String()},
				Kind:            string(ipamv1alpha1.PrefixKindNetwork),
				NetworkInstance: id,
				Prefix:          pc.net.String(),
			})
		}
		r := &ipamv1.IPRange{
			Key:              &ipamv1.Key{Owner: objOwner, Namespace: p.Namespace, Name: fmt.Sprintf("%srange-%d", base, j)},
			NetworkInstance:  id,
			Start:            pc.from.String(),
			End:              pc.to.String(),
			Labels:           map[string]string{LabelPoolKind: p.Kind},
			PrefixLength:     p.spec.Prefix,
			AllocateReserved: p.spec.AllocateReservedIPAddresses,
		}
		if p.gateway.IsValid() {
			r.Gateway = p.gateway.String()
		}
		for _, x := range p.excluded {
			if lo, hi, ok := overlap(pc.span, x); ok {
				r.Exclusions = append(r.Exclusions, &ipamv1.AddrRange{Start: lo.String(), End: hi.String()})
			}
		}
		req.Ranges = append(req.Ranges, r)
	}
	return nil
}

// ObjectPrefix starts the names of the pool's objects in ipam-server:
// <kind>.<name>. (lower-case kind).
func (p *PoolSpec) ObjectPrefix() string { return strings.ToLower(p.Kind) + "." + p.Name + "." }

// Contains reports whether addr is one of the pool's addresses (excluded
// ones included: an address the pool once handed out stays in range).
func (p *PoolSpec) Contains(addr netip.Addr) bool {
	for _, a := range p.addrs {
		if !addr.Less(a.from) && !a.to.Less(addr) {
			return true
		}
	}
	return false
}

// Total is how many addresses the pool can hand out: its addresses minus
// the excluded ones, the gateway and, unless allocateReservedIPAddresses,
// the first and last address of each network (rule 3: none for /31, /32,
// /127, /128). Addresses listed twice count once; an IPv6 pool too large
// for an int counts math.MaxInt.
func (p *PoolSpec) Total() int {
	remove := append([]span(nil), p.excluded...)
	if p.gateway.IsValid() {
		remove = append(remove, span{p.gateway, p.gateway})
	}
	if !p.spec.AllocateReservedIPAddresses && p.addrs[0].from.BitLen()-int(p.spec.Prefix) > 1 {
		pieces, _ := p.pieces() // at most MaxPoolRanges: the rest count as addresses
		for _, pc := range pieces {
			first, last := pc.net.Addr(), lastOf(pc.net)
			remove = append(remove, span{first, first}, span{last, last})
		}
	}
	remove = merge(remove)
	n := new(big.Int)
	for _, a := range merge(p.addrs) {
		n.Add(n, size(a))
		for _, x := range remove {
			if lo, hi, ok := overlap(a, x); ok {
				n.Sub(n, size(span{lo, hi}))
			}
		}
	}
	if !n.IsInt64() || n.Int64() > math.MaxInt {
		return math.MaxInt
	}
	return int(n.Int64())
}

// size is the number of addresses of s.
func size(s span) *big.Int {
	from := new(big.Int).SetBytes(s.from.AsSlice())
	to := new(big.Int).SetBytes(s.to.AsSlice())
	return to.Sub(to, from).Add(to, big.NewInt(1))
}

// overlap is the intersection of a and b.
func overlap(a, b span) (netip.Addr, netip.Addr, bool) {
	if b.to.Less(a.from) || a.to.Less(b.from) {
		return netip.Addr{}, netip.Addr{}, false
	}
	lo, hi := a.from, a.to
	if lo.Less(b.from) {
		lo = b.from
	}
	if b.to.Less(hi) {
		hi = b.to
	}
	return lo, hi, true
}

// merge sorts spans and merges the overlapping and touching ones.
func merge(in []span) []span {
	s := slices.Clone(in)
	slices.SortFunc(s, func(a, b span) int { return a.from.Compare(b.from) })
	var out []span
	for _, x := range s {
		if n := len(out); n > 0 && (!out[n-1].to.Less(x.from) || out[n-1].to.Next() == x.from) {
			if out[n-1].to.Less(x.to) {
				out[n-1].to = x.to
			}
			continue
		}
		out = append(out, x)
	}
	return out
}

// ClaimKey is the key of a claim's allocation for the in-cluster front
// of owner: the claim's namespace and name under CAPIOwner(owner), apart
// from the IPAllocations the front keys under owner.
func ClaimKey(owner, namespace, name string) *ipamv1.Key {
	return &ipamv1.Key{Owner: CAPIOwner(owner), Namespace: namespace, Name: name}
}

// PackageClaimName is the key name of a claim's allocation in a package's
// Sync, where IPAllocations share the owner: ipaddressclaim.<name>.
func PackageClaimName(name string) string { return "ipaddressclaim." + name }

// ClaimAllocation is the request of a claim, keyed key, whose pool is a
// Cluster API pool of the front of owner: an address from the ranges of
// the pool's network instance.
func ClaimAllocation(owner string, key *ipamv1.Key, claim *capiv1beta2.IPAddressClaim, poolNamespace string) *ipamv1.Allocation {
	ref := claim.Spec.PoolRef
	return &ipamv1.Allocation{
		Key:             key,
		Kind:            string(ipamv1alpha1.PrefixKindNetwork),
		NetworkInstance: PoolID(owner, ref.Kind, poolNamespace, ref.Name),
		Selector:        map[string]string{LabelPoolKind: ref.Kind},
	}
}

// ClaimFromPrefix is the request of a claim, keyed key, whose pool is an
// IPPrefix: an address of the network instance of the prefix, from what
// the prefix's user labels and its network name select (its gateway label
// is not a selector: the gateway is never handed out).
func ClaimFromPrefix(key *ipamv1.Key, p *ipamv1alpha1.IPPrefix) *ipamv1.Allocation {
	sel := Labels(p.Labels, p.Spec.Labels)
	if sel == nil {
		sel = map[string]string{}
	}
	delete(sel, ipamv1alpha1.LabelGateway)
	sel[ipamv1alpha1.LabelNetworkInstance] = p.Spec.NetworkInstance
	sel[ipamv1alpha1.LabelPrefixKind] = string(ipamv1alpha1.PrefixKindNetwork)
	if p.Spec.Network != "" {
		sel[ipamv1alpha1.LabelNetworkName] = p.Spec.Network
	}
	return &ipamv1.Allocation{
		Key:             key,
		Kind:            string(ipamv1alpha1.PrefixKindNetwork),
		NetworkInstance: p.Spec.NetworkInstance,
		Selector:        sel,
	}
}

// ClaimFromNetworkInstance is the request of a claim, keyed key, whose
// pool is a NetworkInstance: the lowest free address of its first network.
func ClaimFromNetworkInstance(key *ipamv1.Key, ni string) *ipamv1.Allocation {
	return &ipamv1.Allocation{
		Key:             key,
		Kind:            string(ipamv1alpha1.PrefixKindNetwork),
		NetworkInstance: ni,
		Selector: map[string]string{ipamv1alpha1.LabelNetworkInstance: ni,
			ipamv1alpha1.LabelPrefixKind: string(ipamv1alpha1.PrefixKindNetwork)},
	}
}

// AddressSpec is the IPAddress spec of a claim that got res from the pool
// ref: the address without its length, the length and the gateway.
func AddressSpec(claim *capiv1beta2.IPAddressClaim, res *ipamv1.Result) (capiv1beta2.IPAddressSpec, error) {
	p, err := netip.ParsePrefix(res.GetPrefix())
	if err != nil {
		return capiv1beta2.IPAddressSpec{}, fmt.Errorf("ipam-server answered %q for %s %s: %w", res.GetPrefix(), capiv1beta2.KindIPAddressClaim, ID(claim.Namespace, claim.Name), err)
	}
	bits := int32(p.Bits())
	return capiv1beta2.IPAddressSpec{
		ClaimRef: capiv1beta2.IPAddressClaimReference{Name: claim.Name},
		PoolRef:  claim.Spec.PoolRef,
		Address:  p.Addr().String(),
		Prefix:   &bits,
		Gateway:  res.GetGateway(),
	}, nil
}
