package translate

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"google.golang.org/protobuf/proto"

	commonv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/common/v1alpha1"
	nipamv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/vocab"
)

// Nephio's ipam.resource.nephio.org view. Its NetworkInstance is the VRF
// of that name, the same VRF an ipam.nephio.org NetworkInstance of that
// name declares; its IPPrefix is a prefix of the VRF its
// spec.networkInstance names; its IPClaim is an allocation. The object
// reference's namespace is not part of the VRF's name: VRFs are named by
// name alone, as in ipam.nephio.org.

// NephioIPClaimName is the key name of an IPClaim's allocation:
// nephio-ipclaim.<name>, apart from the IPAllocations and Metal3 claims
// of the same owner and namespace.
func NephioIPClaimName(name string) string { return "nephio-ipclaim." + name }

// NephioVLANClaimName is the key name of a VLANClaim's allocation:
// nephio-vlanclaim.<name>.
func NephioVLANClaimName(name string) string { return "nephio-vlanclaim." + name }

// NephioNetworkInstance is the service's network instance for ni,
// declared by owner.
func NephioNetworkInstance(owner string, ni *nipamv1alpha1.NetworkInstance) *ipamv1.NetworkInstance {
	out := &ipamv1.NetworkInstance{Key: Key(owner, ni), Labels: Labels(ni.Labels, nil)}
	for _, p := range ni.Spec.Prefixes {
		out.Prefixes = append(out.Prefixes, &ipamv1.VRFPrefix{Prefix: p.Prefix, Labels: Labels(p.Labels, nil)})
	}
	return out
}

// NephioPrefix is the service's prefixes for p, declared by owner. Its
// nephio.org/network-name label, if any, is the prefix's network. A
// network written with a host part (10.0.0.1/24, with the
// nephio.org/gateway label for a gateway) is, as in Nephio, the network
// 10.0.0.0/24 carrying p's labels and the address 10.0.0.1 in it: two
// prefixes, the network keyed by p's name and the address by
// NephioHostName of it. Claims that select by p's labels then get
// addresses of the network, and the address is its gateway.
func NephioPrefix(owner string, p *nipamv1alpha1.IPPrefix) ([]*ipamv1.Prefix, error) {
	if p.Spec.NetworkInstance.Name == "" {
		return nil, &FieldError{Kind: nipamv1alpha1.KindIPPrefix, Namespace: p.Namespace, Name: p.Name,
			Field: "spec.networkInstance.name", Msg: "a network instance is required"}
	}
	labels := Labels(p.Labels, p.Spec.Labels)
	x := &ipamv1.Prefix{
		Key:             Key(owner, p),
		Kind:            string(p.Spec.Kind),
		NetworkInstance: p.Spec.NetworkInstance.Name,
		Network:         labels[commonv1alpha1.LabelNetworkName],
		Prefix:          p.Spec.Prefix,
		Labels:          labels,
	}
	pfx, err := netip.ParsePrefix(p.Spec.Prefix)
	if err != nil || pfx.Masked() == pfx || p.Spec.Kind != "" && p.Spec.Kind != nipamv1alpha1.PrefixKindNetwork {
		return []*ipamv1.Prefix{x}, nil // the service names what is wrong, if anything
	}
	host := proto.Clone(x).(*ipamv1.Prefix)
	host.Key.Name = NephioHostName(p.Name)
	x.Prefix = pfx.Masked().String()
	if _, ok := labels[commonv1alpha1.LabelGateway]; ok {
		x.Labels = maps.Clone(labels)
		delete(x.Labels, commonv1alpha1.LabelGateway)
	}
	return []*ipamv1.Prefix{x, host}, nil
}

// NephioHostName is the key name of the address of a Nephio IPPrefix
// written with a host part: <name>.host.
func NephioHostName(name string) string { return name + ".host" }

// IPClaim is the service's request for c, made by owner: an address of
// the first network its selector matches (kind network or loopback), or a
// prefix of spec.prefixLength (kind pool, or createPrefix). spec.index is
// not part of the request: IndexAddress turns it into a static address
// once the selected prefix is known. Fields the service cannot serve are
// refused with a *FieldError.
func IPClaim(owner string, c *nipamv1alpha1.IPClaim) (*ipamv1.Allocation, error) {
	fe := func(field, msg string) error {
		return &FieldError{Kind: nipamv1alpha1.KindIPClaim, Namespace: c.Namespace, Name: c.Name, Field: field, Msg: msg}
	}
	s := &c.Spec
	if s.NetworkInstance.Name == "" {
		return nil, fe("spec.networkInstance.name", "a network instance is required")
	}
	kind := s.Kind
	if kind == "" {
		kind = nipamv1alpha1.PrefixKindNetwork
	}
	out := &ipamv1.Allocation{
		Key:             Key(owner, c),
		Kind:            string(kind),
		NetworkInstance: s.NetworkInstance.Name,
		Labels:          Labels(c.Labels, s.Labels),
	}
	switch kind {
	case nipamv1alpha1.PrefixKindNetwork, nipamv1alpha1.PrefixKindLoopback, nipamv1alpha1.PrefixKindPool:
	case nipamv1alpha1.PrefixKindAggregate:
		return nil, fe("spec.kind", "aggregate is not claimed here: declare it in the NetworkInstance's spec.prefixes or as an IPPrefix of kind aggregate")
	default:
		return nil, fe("spec.kind", fmt.Sprintf("unknown kind %s (one of network, loopback, pool)", vocab.Quote(string(kind))))
	}
	if s.AddressFamily != nil {
		out.AddressFamily = string(*s.AddressFamily)
	}
	if s.Prefix != nil {
		out.Prefix = *s.Prefix
	}
	createPrefix := s.CreatePrefix != nil && *s.CreatePrefix
	if s.PrefixLength != nil && (kind == nipamv1alpha1.PrefixKindPool || createPrefix) {
		out.PrefixLength = int32(*s.PrefixLength)
	}
	if createPrefix && s.PrefixLength == nil && s.Prefix == nil {
		return nil, fe("spec.prefixLength", "required with createPrefix")
	}
	if s.Index != nil {
		switch {
		case kind == nipamv1alpha1.PrefixKindPool || createPrefix:
			return nil, fe("spec.index", "picks an address; it does not combine with kind pool or createPrefix")
		case s.Prefix != nil:
			return nil, fe("spec.index", "contradicts spec.prefix: give one of them")
		}
	}
	if sel := s.Selector; sel != nil {
		if len(sel.MatchExpressions) > 0 {
			return nil, fe("spec.selector.matchExpressions", "not supported: ipam-server selects by labels; use matchLabels")
		}
		out.Selector = Labels(sel.MatchLabels, nil)
	}
	return out, nil
}

// IndexAddress is the address at offset index of the network p, written
// with p's length: index 7 of 10.0.0.0/24 is 10.0.0.7/24. An index
// outside p is an error.
func IndexAddress(p netip.Prefix, index uint32) (netip.Prefix, error) {
	p = p.Masked()
	hostBits := p.Addr().BitLen() - p.Bits()
	if hostBits < 32 && uint64(index) >= 1<<hostBits {
		return netip.Prefix{}, fmt.Errorf("%d is outside %s (%d addresses)", index, p, uint64(1)<<hostBits)
	}
	b := p.Addr().AsSlice()
	carry := uint64(index)
	for i := len(b) - 1; i >= 0 && carry > 0; i-- {
		sum := uint64(b[i]) + carry&0xff
		b[i] = byte(sum)
		carry = carry>>8 + sum>>8
	}
	a, _ := netip.AddrFromSlice(b)
	return netip.PrefixFrom(a, p.Bits()), nil
}

// FirstNetwork is the lowest network among networks whose labels (user
// and system) hold want's selector and whose family is want's: the
// network an address claim by that selector is served from, whose
// address at spec.index (IndexAddress) an IPClaim with an index gets.
func FirstNetwork(networks []*ipamv1.Prefix, want *ipamv1.Allocation) (netip.Prefix, bool) {
	var found []netip.Prefix
	for _, p := range networks {
		pfx, err := netip.ParsePrefix(p.GetPrefix())
		if err != nil {
			continue
		}
		af := "ipv4"
		if pfx.Addr().Is6() {
			af = "ipv6"
		}
		if f := want.GetAddressFamily(); f != "" && f != af {
			continue
		}
		labels := map[string]string{
			vocab.LabelNetworkInstance: p.GetNetworkInstance(), vocab.LabelPrefixKind: "network",
			vocab.LabelAddressFamily: af, vocab.LabelNetworkName: p.GetNetwork(),
		}
		match := true
		for k, v := range want.GetSelector() {
			if got, ok := p.GetLabels()[k]; ok {
				match = match && got == v
			} else {
				match = match && labels[k] == v
			}
		}
		if match {
			found = append(found, pfx.Masked())
		}
	}
	if len(found) == 0 {
		return netip.Prefix{}, false
	}
	slices.SortFunc(found, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return found[0], true
}
