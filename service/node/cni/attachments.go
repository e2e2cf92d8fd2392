package cni

import (
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	ipamnodev1 "github.com/nephio-project/ipam/api/proto/ipam/node/v1"
)

// maxGCResponseBytes caps what the plugin reads of a GarbageCollect
// answer, which lists every allocation released.
const maxGCResponseBytes = 4 << 20

// validAttachments reads cni.dev/valid-attachments of a GC's network
// configuration: the container interfaces whose allocations stay.
func validAttachments(stdin []byte) ([]*ipamnodev1.Attachment, *types.Error) {
	var conf struct {
		Valid []types.GCAttachment `json:"cni.dev/valid-attachments"`
	}
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "network configuration: cni.dev/valid-attachments does not decode", capDetail(err.Error()))
	}
	out := make([]*ipamnodev1.Attachment, len(conf.Valid))
	for i, a := range conf.Valid {
		out[i] = &ipamnodev1.Attachment{ContainerId: a.ContainerID, Ifname: a.IfName}
	}
	return out, nil
}

// prevResultIPs reads the addresses of a CHECK's prevResult, nil when
// there is none; a result holding more addresses than the network has
// pools is not nv-ipam's alone, and its addresses are not checked.
func prevResultIPs(stdin []byte, pools int) ([]string, *types.Error) {
	var conf types.NetConf
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "network configuration: not a JSON object of the CNI form", capDetail(err.Error()))
	}
	if conf.RawPrevResult == nil {
		return nil, nil
	}
	if err := version.ParsePrevResult(&conf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "network configuration: prevResult does not decode", capDetail(err.Error()))
	}
	res, err := current.NewResultFromResult(conf.PrevResult)
	if err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "network configuration: prevResult cannot be read as a CNI 1.0 result", capDetail(err.Error()))
	}
	if len(res.IPs) == 0 || len(res.IPs) > pools {
		return nil, nil
	}
	out := make([]string, 0, len(res.IPs))
	for _, ip := range res.IPs {
		a, ok := netip.AddrFromSlice(ip.Address.IP)
		if !ok {
			return nil, types.NewError(types.ErrInvalidNetworkConfig, "network configuration: prevResult", fmt.Sprintf("%q is not an address", ip.Address.IP))
		}
		out = append(out, a.Unmap().String())
	}
	return out, nil
}
