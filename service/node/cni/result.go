package cni

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	nodev1 "github.com/nephio-project/ipam/api/proto/nvidia/ipam/node/v1"
)

// maxRoutes caps the routes of one allocation the plugin takes.
const maxRoutes = 256

// toResult turns the daemon's answer into a CNI result (types 100): one IP
// per pool in the request's order, with no interface index (an IPAM plugin
// creates no interface), its gateway, and the pool's routes through it. The
// daemon returns the default route (0.0.0.0/0 or ::/0) among the routes
// when the pool has defaultGateway: true, as NVIDIA's does; the plugin adds
// none of its own. An answer that does not match the request is an
// ErrBadDaemonAnswer error.
func toResult(pools []string, resp *nodev1.AllocateResponse) (*current.Result, *types.Error) {
	bad := func(format string, a ...any) *types.Error {
		return types.NewError(ErrBadDaemonAnswer, "nv-ipam: unexpected answer from the daemon", capDetail(fmt.Sprintf(format, a...)))
	}
	allocs := resp.GetAllocations()
	if len(allocs) != len(pools) {
		return nil, bad("%d allocations for %d pools", len(allocs), len(pools))
	}
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion}
	seen := map[string]bool{}
	for i, a := range allocs {
		if a.GetPool() != "" && a.GetPool() != pools[i] {
			return nil, bad("allocation %d is of pool %q, want %q", i, a.GetPool(), pools[i])
		}
		p, err := netip.ParsePrefix(a.GetIp())
		if err != nil {
			return nil, bad("pool %s: ip %q is not address/length", pools[i], a.GetIp())
		}
		ipc := &current.IPConfig{Address: net.IPNet{
			IP:   net.IP(p.Addr().AsSlice()),
			Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen()),
		}}
		if a.GetGateway() == "" {
			if len(a.GetRoutes()) > 0 {
				return nil, bad("pool %s: routes without a gateway", pools[i])
			}
			res.IPs = append(res.IPs, ipc)
			continue
		}
		gw, err := netip.ParseAddr(a.GetGateway())
		if err != nil || gw.Is4() != p.Addr().Is4() || gw.Zone() != "" {
			return nil, bad("pool %s: gateway %q is not an address of the family of %s", pools[i], a.GetGateway(), a.GetIp())
		}
		ipc.Gateway = net.IP(gw.AsSlice())
		res.IPs = append(res.IPs, ipc)
		if len(a.GetRoutes()) > maxRoutes {
			return nil, bad("pool %s: %d routes, at most %d", pools[i], len(a.GetRoutes()), maxRoutes)
		}
		for _, r := range a.GetRoutes() {
			dst, err := netip.ParsePrefix(r.GetDest())
			if err != nil || dst.Addr().Is4() != gw.Is4() {
				return nil, bad("pool %s: route %q is not a prefix of the family of gateway %s", pools[i], r.GetDest(), gw)
			}
			dst = dst.Masked()
			key := dst.String() + " via " + gw.String()
			if seen[key] {
				continue
			}
			seen[key] = true
			res.Routes = append(res.Routes, &types.Route{
				Dst: net.IPNet{IP: net.IP(dst.Addr().AsSlice()), Mask: net.CIDRMask(dst.Bits(), dst.Addr().BitLen())},
				GW:  net.IP(gw.AsSlice()),
			})
		}
	}
	return res, nil
}
