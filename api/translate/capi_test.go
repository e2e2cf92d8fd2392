package translate

import (
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
)

func TestParsePoolErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		spec ipamv1alpha1.InClusterIPPoolSpec
		want string
	}{
		"no addresses":    {ipamv1alpha1.InClusterIPPoolSpec{Prefix: 24}, "spec.addresses: at least one"},
		"bad address":     {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.0.0.1", "x"}, Prefix: 24}, `spec.addresses[1]: "x" is not an address`},
		"reversed":        {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.0.0.9-10.0.0.1"}, Prefix: 24}, "spec.addresses[0]"},
		"mixed":           {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.0.0.1", "fd00::1"}, Prefix: 24}, "spec.addresses[1]: fd00::1: IPv4 and IPv6 cannot be mixed"},
		"range families":  {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.0.0.1-fd00::1"}, Prefix: 24}, "spec.addresses[0]"},
		"prefix 0":        {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.0.0.1"}}, "spec.prefix: 0 is not a prefix length"},
		"v4 prefix 33":    {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.0.0.1"}, Prefix: 33}, "spec.prefix: 33"},
		"gateway":         {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.0.0.1"}, Prefix: 24, Gateway: "gw"}, `spec.gateway: "gw" is not an IP address`},
		"gateway family":  {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.0.0.1"}, Prefix: 24, Gateway: "fd00::1"}, "spec.gateway: fd00::1 is not of the addresses' family"},
		"gateway outside": {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.0.0.1", "10.0.1.1"}, Prefix: 24, Gateway: "10.0.0.254"}, "spec.gateway: 10.0.0.254 is not in the network 10.0.1.0/24 of spec.addresses[1] (10.0.1.1)"},
		"excluded":        {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.0.0.1"}, Prefix: 24, ExcludedAddresses: []string{"fd00::/64"}}, "spec.excludedAddresses[0]: fd00::/64 is not of the addresses' family"},
		"too many":        {ipamv1alpha1.InClusterIPPoolSpec{Addresses: slices.Repeat([]string{"10.0.0.1"}, MaxPoolEntries+1), Prefix: 24}, "spec.addresses: 1025 entries; at most 1024"},
		"long value":      {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{strings.Repeat("9", 500)}, Prefix: 24}, `"9999999999999999999999999999999999999999999999999999999999999999"...`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePool(ipamv1alpha1.KindInClusterIPPool, "ns", "p", &tc.spec)
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "InClusterIPPool ns/p: spec."), err.Error())
			assert.Contains(t, err.Error(), tc.want)
			assert.Less(t, len(err.Error()), 300, "capped")
		})
	}
}

func TestPoolSync(t *testing.T) {
	p, err := ParsePool(ipamv1alpha1.KindInClusterIPPool, "ns", "p", &ipamv1alpha1.InClusterIPPoolSpec{
		Addresses:         []string{"10.0.0.10", "10.0.0.250-10.0.1.5", "10.0.2.128/28"},
		Prefix:            24,
		Gateway:           "10.0.0.1",
		ExcludedAddresses: []string{"10.0.1.0-10.0.1.2", "10.9.9.9"},
	})
	require.ErrorContains(t, err, "spec.gateway: 10.0.0.1 is not in the network 10.0.2.0/24 of spec.addresses[2]")
	assert.Nil(t, p)

	p, err = ParsePool(ipamv1alpha1.KindGlobalInClusterIPPool, "", "g", &ipamv1alpha1.InClusterIPPoolSpec{
		Addresses:                   []string{"10.0.0.10", "10.0.0.250-10.0.1.5", "10.0.2.128/28"},
		Prefix:                      24,
		ExcludedAddresses:           []string{"10.0.1.0-10.0.1.2", "10.9.9.9"},
		AllocateReservedIPAddresses: true,
	})
	require.NoError(t, err)
	req, err := p.Sync("k8s")
	require.NoError(t, err)
	id := "k8s.capi.globalinclusterippool.g"
	assert.Equal(t, id, req.GetOwner())
	assert.True(t, req.GetPrune())
	require.Len(t, req.GetNetworkInstances(), 1)
	assert.Equal(t, id, req.GetNetworkInstances()[0].GetKey().GetName())
	assert.Equal(t, "0.0.0.0/0", req.GetNetworkInstances()[0].GetPrefixes()[0].GetPrefix())
	var nets []string
	for _, n := range req.GetPrefixes() {
		nets = append(nets, n.GetPrefix())
		assert.Equal(t, "network", n.GetKind())
	}
	assert.Equal(t, []string{"10.0.0.0/24", "10.0.1.0/24", "10.0.2.0/24"}, nets, "one network per subnet the addresses touch")
	type rng struct{ start, end, excl string }
	var got []rng
	for _, r := range req.GetRanges() {
		x := ""
		for _, e := range r.GetExclusions() {
			x += e.GetStart() + "-" + e.GetEnd()
		}
		got = append(got, rng{r.GetStart(), r.GetEnd(), x})
		assert.Equal(t, int32(24), r.GetPrefixLength())
		assert.True(t, r.GetAllocateReserved())
		assert.Equal(t, map[string]string{LabelPoolKind: ipamv1alpha1.KindGlobalInClusterIPPool}, r.GetLabels())
		assert.Equal(t, id, r.GetNetworkInstance())
	}
	assert.Equal(t, []rng{
		{"10.0.0.10", "10.0.0.10", ""},
		{"10.0.0.250", "10.0.0.255", ""},
		{"10.0.1.0", "10.0.1.5", "10.0.1.0-10.0.1.2"},
		{"10.0.2.128", "10.0.2.143", ""},
	}, got, "a range split at the network boundary; exclusions clipped to each range")
	// 1 + 6 + 6 + 16 addresses, 3 excluded; reserved ones opted in.
	assert.Equal(t, 26, p.Total())
	assert.True(t, p.Contains(netip.MustParseAddr("10.0.1.1")), "excluded addresses are still the pool's")
	assert.False(t, p.Contains(netip.MustParseAddr("10.0.0.11")))
}

func TestPoolTotal(t *testing.T) {
	for name, tc := range map[string]struct {
		spec ipamv1alpha1.InClusterIPPoolSpec
		want int
	}{
		"network and broadcast reserved": {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.0.0.0/24"}, Prefix: 24, Gateway: "10.0.0.1"}, 253},
		"reserved opted in":              {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.0.0.0/24"}, Prefix: 24, Gateway: "10.0.0.1", AllocateReservedIPAddresses: true}, 255},
		"/31 reserves nothing":           {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.0.0.0/31"}, Prefix: 31}, 2},
		"duplicates count once":          {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.0.0.10-10.0.0.19", "10.0.0.15", "10.0.0.16/30"}, Prefix: 24}, 10},
		"excluded overlapping":           {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.0.0.10-10.0.0.19"}, Prefix: 24, ExcludedAddresses: []string{"10.0.0.10-10.0.0.12", "10.0.0.11-10.0.0.13", "10.1.0.0/16"}}, 6},
		"ipv6 huge":                      {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"fd00::/32"}, Prefix: 32}, math.MaxInt},
		"ipv6: the network's first":      {ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"fd00::/120"}, Prefix: 64}, 255},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := ParsePool(ipamv1alpha1.KindInClusterIPPool, "ns", "p", &tc.spec)
			require.NoError(t, err)
			assert.Equal(t, tc.want, p.Total())
		})
	}
}

func TestPoolSyncLimits(t *testing.T) {
	p, err := ParsePool(ipamv1alpha1.KindInClusterIPPool, "ns", "p", &ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.0.0.0/8"}, Prefix: 32})
	require.NoError(t, err)
	_, err = p.Sync("k8s")
	require.ErrorContains(t, err, "spec.addresses[0]: the addresses span more than 256 networks of /32")
	assert.Positive(t, p.Total(), "counting stays bounded")

	p, err = ParsePool(ipamv1alpha1.KindInClusterIPPool, strings.Repeat("n", 63), strings.Repeat("p", 253), &ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{"10.0.0.1"}, Prefix: 24})
	require.NoError(t, err)
	_, err = p.Sync("k8s")
	require.ErrorContains(t, err, "metadata.name: too long")
	assert.Less(t, len(err.Error()), 700)
}

// FuzzParsePool checks that any pool either parses into ranges that lie
// in the pool's networks, or fails naming a field; never a panic.
func FuzzParsePool(f *testing.F) {
	f.Add("10.0.0.10-10.0.0.20", "10.0.0.128/28", "10.0.0.1", "10.0.0.12", int32(24), false)
	f.Add("fd00::10-fd00::ff", "fd00::/120", "fd00::1", "fd00::12-fd00::13", int32(64), true)
	f.Add("10.0.0.0/8", "1.2.3.4", "", "", int32(30), false)
	f.Fuzz(func(t *testing.T, a, b, gw, excl string, prefix int32, reserved bool) {
		spec := &ipamv1alpha1.InClusterIPPoolSpec{Addresses: []string{a, b}, Prefix: prefix, Gateway: gw, AllocateReservedIPAddresses: reserved}
		if excl != "" {
			spec.ExcludedAddresses = []string{excl}
		}
		p, err := ParsePool(ipamv1alpha1.KindInClusterIPPool, "ns", "p", spec)
		if err != nil {
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			require.NotEmpty(t, fe.Field)
			return
		}
		total := p.Total()
		require.GreaterOrEqual(t, total, 0)
		req, err := p.Sync("k8s")
		if err != nil {
			return
		}
		for _, r := range req.GetRanges() {
			s, e := netip.MustParseAddr(r.GetStart()), netip.MustParseAddr(r.GetEnd())
			require.False(t, e.Less(s))
			require.True(t, p.Contains(s) && p.Contains(e))
			require.Equal(t, netip.PrefixFrom(s, int(prefix)).Masked(), netip.PrefixFrom(e, int(prefix)).Masked(), "a range lies in one network")
		}
	})
}
