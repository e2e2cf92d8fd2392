package translate

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	nvv1alpha1 "github.com/nephio-project/ipam/api/nvidia/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

func TestParseNVIDIAPool(t *testing.T) {
	p, err := ParseNVIDIAPool("kube-system", "pool1", &nvv1alpha1.IPPoolSpec{Subnet: "192.168.0.0/16", PerNodeBlockSize: 24, Gateway: "192.168.0.1",
		Exclusions: []nvv1alpha1.ExcludeRange{{StartIP: "192.168.0.30", EndIP: "192.168.0.31"}}})
	require.NoError(t, err)
	req, err := p.Sync("k8s")
	require.NoError(t, err)
	id := "k8s.nvidia.ippool.kube-system.pool1"
	assert.Equal(t, id, req.GetOwner())
	n := req.GetPrefixes()[0]
	assert.Equal(t, "192.168.0.1/16", n.GetPrefix(), "the network records the gateway")
	assert.True(t, n.GetGatewayInBlocks())
	assert.Equal(t, "192.168.0.30", n.GetExclusions()[0].GetStart())
	b := p.Block("k8s", "host-a")
	assert.Equal(t, int32(24), b.GetCount())
	assert.Equal(t, &ipamv1.Key{Owner: "k8s.nvidia", Namespace: "kube-system", Name: "ippool.pool1.host-a"}, b.GetKey())
	assert.Equal(t, "host-a", b.GetLabels()[nvv1alpha1.LabelNode])
	start, end, err := BlockRange(&ipamv1.Result{Prefix: "192.168.0.1/16", Last: "192.168.0.24"})
	require.NoError(t, err)
	assert.Equal(t, "192.168.0.1-192.168.0.24", start+"-"+end)

	for name, tc := range map[string]struct {
		spec nvv1alpha1.IPPoolSpec
		want string
	}{
		"subnet":    {nvv1alpha1.IPPoolSpec{Subnet: "x", PerNodeBlockSize: 2}, `spec.subnet: "x" is not a subnet`},
		"block":     {nvv1alpha1.IPPoolSpec{Subnet: "10.0.0.0/24", PerNodeBlockSize: 1}, "spec.perNodeBlockSize: 1: a block holds at least 2"},
		"too big":   {nvv1alpha1.IPPoolSpec{Subnet: "10.0.0.0/30", PerNodeBlockSize: 3}, "spec.perNodeBlockSize: 3 does not fit in 10.0.0.0/30 (2 usable addresses)"},
		"gateway":   {nvv1alpha1.IPPoolSpec{Subnet: "10.0.0.0/24", PerNodeBlockSize: 2, Gateway: "10.0.1.1"}, `spec.gateway: "10.0.1.1" is not an address of 10.0.0.0/24`},
		"exclusion": {nvv1alpha1.IPPoolSpec{Subnet: "10.0.0.0/24", PerNodeBlockSize: 2, Exclusions: []nvv1alpha1.ExcludeRange{{StartIP: "10.0.0.9", EndIP: "10.0.0.1"}}}, "spec.exclusions[0]"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseNVIDIAPool("ns", "p", &tc.spec)
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "IPPool ns/p: "), err.Error())
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestParseNVIDIACIDRPool(t *testing.T) {
	gi := int32(1)
	p, err := ParseNVIDIACIDRPool("ns", "pods", &nvv1alpha1.CIDRPoolSpec{CIDR: "10.90.0.0/16", PerNodeNetworkPrefix: 24, GatewayIndex: &gi,
		StaticAllocations: []nvv1alpha1.CIDRPoolStaticAllocation{{NodeName: "b", Prefix: "10.90.7.0/24", Gateway: "10.90.7.254"}}})
	require.NoError(t, err)
	req, err := p.Sync("k8s")
	require.NoError(t, err)
	assert.Equal(t, "pool", req.GetPrefixes()[0].GetKind())
	assert.Equal(t, "10.90.7.0/24", p.NodePrefix("k8s", "b").GetPrefix(), "a static allocation asks for its prefix")
	assert.Empty(t, p.NodePrefix("k8s", "a").GetPrefix())
	assert.Equal(t, int32(24), p.NodePrefix("k8s", "a").GetPrefixLength())
	assert.Equal(t, "10.90.7.254", p.NodeGateway("b", netip.MustParsePrefix("10.90.7.0/24")))
	assert.Equal(t, "10.90.3.1", p.NodeGateway("a", netip.MustParsePrefix("10.90.3.0/24")))

	big := int32(1 << 30)
	v6, err := ParseNVIDIACIDRPool("ns", "v6", &nvv1alpha1.CIDRPoolSpec{CIDR: "fd00::/48", PerNodeNetworkPrefix: 64, GatewayIndex: &big})
	require.NoError(t, err)
	assert.Equal(t, "fd00::5:0:0:4000:0", v6.NodeGateway("x", netip.MustParsePrefix("fd00:0:0:5::/64")), "a large index costs no loop")

	for name, tc := range map[string]struct {
		spec nvv1alpha1.CIDRPoolSpec
		want string
	}{
		"cidr":         {nvv1alpha1.CIDRPoolSpec{CIDR: "x", PerNodeNetworkPrefix: 24}, `spec.cidr: "x" is not in CIDR notation`},
		"short prefix": {nvv1alpha1.CIDRPoolSpec{CIDR: "10.0.0.0/16", PerNodeNetworkPrefix: 8}, "spec.perNodeNetworkPrefix: 8 is not a length between 16 and 32"},
		"gateway index": {nvv1alpha1.CIDRPoolSpec{CIDR: "10.0.0.0/16", PerNodeNetworkPrefix: 30, GatewayIndex: ptr32(4)},
			"spec.gatewayIndex: 4 is past the 4 addresses of a /30"},
		"static outside": {nvv1alpha1.CIDRPoolSpec{CIDR: "10.0.0.0/16", PerNodeNetworkPrefix: 24,
			StaticAllocations: []nvv1alpha1.CIDRPoolStaticAllocation{{NodeName: "a", Prefix: "10.1.0.0/24"}}}, "spec.staticAllocations[0].prefix"},
		"static twice": {nvv1alpha1.CIDRPoolSpec{CIDR: "10.0.0.0/16", PerNodeNetworkPrefix: 24,
			StaticAllocations: []nvv1alpha1.CIDRPoolStaticAllocation{{NodeName: "a", Prefix: "10.0.1.0/24"}, {NodeName: "b", Prefix: "10.0.1.0/24"}}}, "is node a's already"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseNVIDIACIDRPool("ns", "p", &tc.spec)
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "CIDRPool ns/p: "), err.Error())
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func ptr32(i int32) *int32 { return &i }
