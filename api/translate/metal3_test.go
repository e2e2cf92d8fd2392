package translate

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	metal3v1alpha1 "github.com/nephio-project/ipam/api/metal3/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

func metal3Spec(t *testing.T, doc string) *metal3v1alpha1.IPPoolSpec {
	t.Helper()
	var s metal3v1alpha1.IPPoolSpec
	require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &s))
	return &s
}

func TestParseMetal3Pool(t *testing.T) {
	// The blog's pool: entries read as Metal3 reads them.
	p, err := ParseMetal3Pool("ns", "pool1", metal3Spec(t, `
pools:
  - {start: 192.168.0.10, end: 192.168.0.30, prefix: 25, gateway: 192.168.0.1}
  - {subnet: 192.168.1.1/26}
  - {subnet: 192.168.1.128/25}
prefix: 24
gateway: 192.168.1.1
preAllocations: {claim2: 192.168.0.12, lost: 10.0.0.1}
`))
	require.NoError(t, err)
	req := &ipamv1.SyncRequest{}
	require.NoError(t, p.AddTo(req, "k8s", "k8s", nil))
	var got []string
	for _, r := range req.GetRanges() {
		got = append(got, r.GetStart()+"-"+r.GetEnd()+" /"+itoa(r.GetPrefixLength())+" gw "+r.GetGateway()+" pre "+r.GetPreAllocations()["claim2"])
		assert.True(t, r.GetAllocateReserved(), "Metal3 reserves no address")
	}
	assert.Equal(t, []string{
		"192.168.0.10-192.168.0.30 /25 gw 192.168.0.1 pre 192.168.0.12",
		"192.168.1.2-192.168.1.63 /24 gw 192.168.1.1 pre ",
		"192.168.1.129-192.168.1.255 /24 gw 192.168.1.1 pre ",
	}, got, "a subnet entry starts after the address written; an entry's prefix and gateway win")
	var nets []string
	for _, n := range req.GetPrefixes() {
		nets = append(nets, n.GetPrefix())
	}
	assert.Equal(t, []string{"192.168.1.128/25", "192.168.1.0/26", "192.168.0.0/27"}, nets)
	assert.Equal(t, "k8s.metal3.ippool.ns.pool1", req.GetNetworkInstances()[0].GetKey().GetName())
	assert.True(t, p.PreAllocationOutOfBounds("lost"))
	assert.False(t, p.PreAllocationOutOfBounds("claim2"))
	assert.Equal(t, "pool1-192-168-0-13", p.Metal3AddressName(netip.MustParseAddr("192.168.0.13")))
	a := p.Metal3Address(netip.MustParseAddr("192.168.1.2"), "ns", "c")
	assert.Equal(t, 24, a.Prefix)
	assert.Equal(t, "192.168.1.1", string(*a.Gateway))

	v6, err := ParseMetal3Pool("ns", "v6", metal3Spec(t, "namePrefix: m3\npools: [{subnet: '2001:db8::/96'}]\nprefix: 96\n"))
	require.NoError(t, err)
	assert.Equal(t, "m3-2001-db8--1", v6.Metal3AddressName(netip.MustParseAddr("2001:db8::1")))

	for name, tc := range map[string]struct{ doc, want string }{
		"no start or subnet": {"pools: [{end: 10.0.0.1}]", "spec.pools[0]: start or subnet is required"},
		"start only":         {"pools: [{start: 10.0.0.1}]", "spec.pools[0].end: end or subnet is required"},
		"reversed":           {"pools: [{start: 10.0.0.9, end: 10.0.0.1}]", "spec.pools[0]: 10.0.0.9-10.0.0.1 is not a range"},
		"outside subnet":     {"pools: [{start: 10.0.0.9, end: 10.0.1.1, subnet: 10.0.0.0/24}]", "spec.pools[0].subnet: 10.0.0.0/24 does not contain"},
		"overlap":            {"pools: [{start: 10.0.0.1, end: 10.0.0.9}, {subnet: 10.0.0.0/28}]", "spec.pools[1]: 10.0.0.1-10.0.0.15 overlaps spec.pools[0]"},
		"mixed":              {"pools: [{start: 10.0.0.1, end: 10.0.0.9}, {subnet: 'fd00::/120'}]", "spec.pools[1]: IPv4 and IPv6 cannot be mixed"},
		"bad gateway":        {"gateway: x\npools: [{subnet: 10.0.0.0/28}]", `spec.gateway: "x" is not an IP address`},
		"bad pre-allocation": {"pools: [{subnet: 10.0.0.0/28}]\npreAllocations: {c: nope}", `spec.preAllocations[c]: "nope" is not an IP address`},
		"too many entries":   {"pools: [" + strings.Repeat("{subnet: 10.0.0.0/28},", MaxMetal3Entries+1) + "]", "spec.pools: 257 entries; at most 256"},
		"long prefix":        {"pools: [{subnet: 10.0.0.0/28, prefix: 40}]", "spec.pools[0].prefix: 40 is longer than a 32-bit address"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseMetal3Pool("ns", "p", metal3Spec(t, tc.doc))
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "IPPool ns/p: "), err.Error())
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

// FuzzParseMetal3Pool: any pool parses into ranges inside their networks,
// or fails naming a field; never a panic.
func FuzzParseMetal3Pool(f *testing.F) {
	f.Add("192.168.0.10", "192.168.0.30", "192.168.1.1/26", 24, "192.168.0.12")
	f.Add("2001:db8::10", "2001:db8::ff", "2001:db8:1::/96", 96, "2001:db8::12")
	f.Fuzz(func(t *testing.T, start, end, subnet string, prefix int, pre string) {
		s1, e1, sn := metal3v1alpha1.IPAddressStr(start), metal3v1alpha1.IPAddressStr(end), metal3v1alpha1.IPSubnetStr(subnet)
		spec := &metal3v1alpha1.IPPoolSpec{Pools: []metal3v1alpha1.Pool{{Start: &s1, End: &e1}, {Subnet: &sn}}, Prefix: prefix,
			PreAllocations: map[string]metal3v1alpha1.IPAddressStr{"c": metal3v1alpha1.IPAddressStr(pre)}}
		p, err := ParseMetal3Pool("ns", "p", spec)
		if err != nil {
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			return
		}
		req := &ipamv1.SyncRequest{}
		if p.AddTo(req, "o", "o", nil) != nil {
			return
		}
		for _, r := range req.GetRanges() {
			s, e := netip.MustParseAddr(r.GetStart()), netip.MustParseAddr(r.GetEnd())
			in := false
			for _, n := range req.GetPrefixes() {
				np := netip.MustParsePrefix(n.GetPrefix())
				in = in || np.Contains(s) && np.Contains(e)
			}
			require.True(t, in, "range %s-%s in no network", s, e)
		}
	})
}
