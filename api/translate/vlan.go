package translate

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	vlanv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/vlan/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/vocab"
)

// VLAN IDs are served by the address-set structures of the core: a
// VLANIndex is a VRF of its own (VLANVRF) whose aggregate (VLANAggregate)
// holds one network of 4096 addresses (VLANNetwork), and VLAN ID n is the address at offset n of
// it. The network's rule of reserving its first and last address
// reserves IDs 0 and 4095, a dynamic claim gets the lowest free ID as a
// dynamic address gets the lowest free address, a static ID is a static
// address, and a range is a block of consecutive addresses. Every rule
// of allocations (idempotence by owner key, atomic Sync, durability, both
// stores, authorization, limits) holds for IDs because they are
// allocations.

// The VLAN ID space.
const (
	// MinVLAN is the lowest VLAN ID a claim gets.
	MinVLAN = 1
	// MaxVLAN is the highest VLAN ID a claim gets.
	MaxVLAN = 4094
	// VLANVRFPrefix starts the VRF name of every VLAN index. The colon
	// cannot appear in a Kubernetes name, so no NetworkInstance shares it.
	VLANVRFPrefix = "vlan:"
)

// VLANNetwork is the network whose address at offset n is VLAN ID n,
// and VLANAggregate the aggregate of a VLAN index's VRF that holds it.
var (
	VLANNetwork   = netip.MustParsePrefix("fd00::/116")
	VLANAggregate = netip.MustParsePrefix("fd00::/112")
)

// VLANVRF is the name of the VRF of the VLAN index named index.
func VLANVRF(index string) string { return VLANVRFPrefix + index }

// VLANAddr is the address of VLAN ID id.
func VLANAddr(id int) netip.Addr {
	p, _ := IndexAddress(VLANNetwork, uint32(id)) // id is 0..4095
	return p.Addr()
}

// VLANOf is the VLAN ID of address a of a VLAN index's network.
func VLANOf(a netip.Addr) (int, error) {
	if !VLANNetwork.Contains(a) {
		return 0, fmt.Errorf("%s is not a VLAN ID's address", a)
	}
	b := a.As16()
	return int(b[14])<<8&0xf00 | int(b[15]), nil
}

// VLANIndex is the service's network instance and network for the VLAN
// index x, declared by owner.
func VLANIndex(owner string, x *vlanv1alpha1.VLANIndex) (*ipamv1.NetworkInstance, *ipamv1.Prefix) {
	vrf := VLANVRF(x.Name)
	labels := Labels(x.Labels, x.Spec.Labels)
	ni := &ipamv1.NetworkInstance{Key: &ipamv1.Key{Owner: owner, Namespace: x.Namespace, Name: vrf},
		Prefixes: []*ipamv1.VRFPrefix{{Prefix: VLANAggregate.String()}}, Labels: Labels(x.Labels, nil)}
	p := &ipamv1.Prefix{Key: &ipamv1.Key{Owner: owner, Namespace: x.Namespace, Name: vrf}, Kind: "network",
		NetworkInstance: vrf, Prefix: VLANNetwork.String(), Labels: labels}
	return ni, p
}

// VLANRange is a parsed spec.range of a VLANClaim: First-Last, or Size
// IDs wherever they are free (First and Last zero).
type VLANRange struct {
	// First and Last are the IDs of a static range, both included.
	First, Last int
	// Size is the number of IDs of a dynamic range.
	Size int
}

// ParseVLANRange reads spec.range: "100-200" (IDs 100 to 200) or a size
// ("10": ten consecutive free IDs). IDs are 1-4094.
func ParseVLANRange(s string) (VLANRange, error) {
	num := func(v, what string) (int, error) {
		if v == "" || len(v) > 4 || strings.TrimLeft(v, "0123456789") != "" {
			return 0, fmt.Errorf("%s %s is not a number of 1 to 4 digits", what, vocab.Quote(v))
		}
		n, _ := strconv.Atoi(v)
		if n < MinVLAN || n > MaxVLAN {
			return 0, fmt.Errorf("%s %d is outside %d-%d", what, n, MinVLAN, MaxVLAN)
		}
		return n, nil
	}
	first, last, isRange := strings.Cut(s, "-")
	if !isRange {
		n, err := num(first, "size")
		return VLANRange{Size: n}, err
	}
	a, err := num(first, "first ID")
	if err != nil {
		return VLANRange{}, err
	}
	b, err := num(last, "last ID")
	if err != nil {
		return VLANRange{}, err
	}
	if a > b {
		return VLANRange{}, fmt.Errorf("first ID %d is above last ID %d", a, b)
	}
	return VLANRange{First: a, Last: b}, nil
}

// String is the range as spec.range and status.vlanRange write it.
func (r VLANRange) String() string {
	if r.Size > 0 {
		return strconv.Itoa(r.Size)
	}
	return strconv.Itoa(r.First) + "-" + strconv.Itoa(r.Last)
}

// VLANClaim is the service's request for c, made by owner: the lowest
// free ID of its index, exactly spec.vlanID, or the IDs of spec.range.
func VLANClaim(owner string, c *vlanv1alpha1.VLANClaim) (*ipamv1.Allocation, error) {
	fe := func(field, msg string) error {
		return &FieldError{Kind: vlanv1alpha1.KindVLANClaim, Namespace: c.Namespace, Name: c.Name, Field: field, Msg: msg}
	}
	s := &c.Spec
	if s.VLANIndex.Name == "" {
		return nil, fe("spec.vlanIndex.name", "a VLAN index is required")
	}
	out := &ipamv1.Allocation{Key: Key(owner, c), Kind: "network", NetworkInstance: VLANVRF(s.VLANIndex.Name),
		AddressFamily: "ipv6", Labels: Labels(c.Labels, s.Labels)}
	switch {
	case s.VLANID != nil && s.VLANRange != nil:
		return nil, fe("spec.range", "contradicts spec.vlanID: give one of them")
	case s.VLANID != nil:
		if id := int(*s.VLANID); id < MinVLAN || id > MaxVLAN {
			return nil, fe("spec.vlanID", fmt.Sprintf("%d is outside %d-%d", id, MinVLAN, MaxVLAN))
		}
		out.Prefix = netip.PrefixFrom(VLANAddr(int(*s.VLANID)), VLANNetwork.Bits()).String()
	case s.VLANRange != nil:
		r, err := ParseVLANRange(*s.VLANRange)
		if err != nil {
			return nil, fe("spec.range", err.Error())
		}
		if r.Size > 0 {
			out.Count = int32(r.Size)
		} else {
			out.Prefix = netip.PrefixFrom(VLANAddr(r.First), VLANNetwork.Bits()).String()
			out.Count = int32(r.Last - r.First + 1)
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

// VLANResult is what res, the service's answer to the request of c,
// means for c's status: an ID (vlanID), or a range first-last (range
// claims).
func VLANResult(c *vlanv1alpha1.VLANClaim, res *ipamv1.Result) (id int, rng string, err error) {
	p, err := netip.ParsePrefix(res.GetPrefix())
	if err != nil {
		return 0, "", fmt.Errorf("ipam-server answered %s: %w", vocab.Quote(res.GetPrefix()), err)
	}
	first, err := VLANOf(p.Addr())
	if err != nil {
		return 0, "", err
	}
	if c.Spec.VLANRange == nil {
		return first, "", nil
	}
	last := first
	if l := res.GetLast(); l != "" {
		a, err := netip.ParseAddr(l)
		if err != nil {
			return 0, "", fmt.Errorf("ipam-server answered last %s: %w", vocab.Quote(l), err)
		}
		if last, err = VLANOf(a); err != nil {
			return 0, "", err
		}
	}
	return 0, VLANRange{First: first, Last: last}.String(), nil
}

var (
	vlanAddrRE  = regexp.MustCompile(`\bfd00::([0-9a-f]{1,3})(/116)?\b`)
	claimKeyRE  = regexp.MustCompile(`\bIPAllocation ((?:[a-z0-9-]+/)?)nephio-(ip|vlan)claim\.`)
	vlanIndexRE = regexp.MustCompile(`\bnetwork instance ` + VLANVRFPrefix)
)

// NephioMessage is msg, a message of ipam-server about a Nephio claim,
// in the claim's words: its allocation named as the claim (IPClaim
// ns/n3, VLANClaim ns/n3), a VLAN ID's address as the ID, a VLAN index's
// VRF as the index.
func NephioMessage(msg string) string {
	msg = claimKeyRE.ReplaceAllStringFunc(msg, func(m string) string {
		sub := claimKeyRE.FindStringSubmatch(m)
		kind := "IPClaim "
		if sub[2] == "vlan" {
			kind = "VLANClaim "
		}
		return kind + sub[1]
	})
	msg = vlanAddrRE.ReplaceAllStringFunc(msg, func(m string) string {
		a, err := netip.ParseAddr(strings.TrimSuffix(m, "/116"))
		if err != nil {
			return m
		}
		id, err := VLANOf(a)
		if err != nil {
			return m
		}
		return "VLAN ID " + strconv.Itoa(id)
	})
	return vlanIndexRE.ReplaceAllString(msg, "VLAN index ")
}

// NephioVLANField is the field of a VLANClaim that field, a field of its
// allocation, stands for: spec.prefix and spec.count are spec.vlanID or
// spec.range.
func NephioVLANField(c *vlanv1alpha1.VLANClaim, field string) string {
	switch field {
	case "spec.prefix", "spec.count":
		if c != nil && c.Spec.VLANRange != nil {
			return "spec.range"
		}
		return "spec.vlanID"
	case "spec.networkInstance":
		return "spec.vlanIndex.name"
	}
	return field
}
