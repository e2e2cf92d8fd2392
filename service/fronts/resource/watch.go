package resource

import (
	"strings"

	"google.golang.org/grpc"

	nipamv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/ipam/v1alpha1"
	vlanv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/vlan/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	resourcepb "github.com/nephio-project/ipam/api/proto/resource"
	"github.com/nephio-project/ipam/api/translate"
)

// WatchClaim streams a WatchResponse for each committed change of a
// claim whose owner is of req's ownerGvk (any resource owner without
// one): Unknown when it was made or changed, InValid when it was
// released. It runs ipam-server's own Watch, with its read authorization
// and its limits on watchers.
func (s *Server) WatchClaim(req *resourcepb.WatchRequest, stream grpc.ServerStreamingServer[resourcepb.WatchResponse]) error {
	prefix := OwnerPrefix
	if og := req.GetHeader().GetOwnerGvk(); og.GetKind() != "" {
		prefix = ownerKind(og)
	}
	if strings.Count(prefix, "/") != strings.Count(OwnerPrefix, "/") && strings.Count(prefix, "/") != 3 {
		return invalid("header.ownerGvk", "a group, version or kind holds a /")
	}
	return s.ipam.Watch(&ipamv1.WatchRequest{}, &watchStream{ServerStream: stream, send: func(ev *ipamv1.WatchEvent) error {
		resp, ok := watchResponse(ev, prefix)
		if !ok {
			return nil
		}
		return stream.Send(resp)
	}})
}

// watchStream is the stream ipam-server's Watch writes its events to:
// each is translated and sent on the resource stream it wraps.
type watchStream struct {
	grpc.ServerStream
	send func(*ipamv1.WatchEvent) error
}

// Send hands ev to the resource stream.
func (w *watchStream) Send(ev *ipamv1.WatchEvent) error { return w.send(ev) }

// watchResponse is what ev means to a watcher of the owners starting
// with prefix: the claim it changed, or false when it changed none.
func watchResponse(ev *ipamv1.WatchEvent, prefix string) (*resourcepb.WatchResponse, bool) {
	k := ev.GetKey()
	og, nsn, ok := parseOwner(k.GetOwner())
	if !ok || !strings.HasPrefix(k.GetOwner(), prefix) {
		return nil, false
	}
	gvk := &resourcepb.GVK{Group: nipamv1alpha1.Group, Version: nipamv1alpha1.Version, Kind: nipamv1alpha1.KindIPClaim}
	name := k.GetName()
	switch ev.GetKind() {
	case ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION:
		if n, ok := strings.CutPrefix(name, translate.NephioIPClaimName("")); ok {
			name = n
		} else if n, ok := strings.CutPrefix(name, translate.NephioVLANClaimName("")); ok {
			name = n
			gvk = &resourcepb.GVK{Group: vlanv1alpha1.Group, Version: vlanv1alpha1.Version, Kind: vlanv1alpha1.KindVLANClaim}
		} else {
			return nil, false
		}
	case ipamv1.ObjectKind_OBJECT_KIND_PREFIX:
		if strings.HasSuffix(name, translate.NephioHostName("")) || strings.HasPrefix(name, translate.VLANVRFPrefix) {
			return nil, false // part of a prefix, or a VLAN index's network
		}
	default:
		return nil, false
	}
	code := resourcepb.StatusCode_Unknown
	if ev.GetType() == ipamv1.WatchEvent_TYPE_DELETE {
		code = resourcepb.StatusCode_InValid
	}
	return &resourcepb.WatchResponse{Header: &resourcepb.Header{
		Gvk: gvk, Nsn: &resourcepb.NSN{Namespace: k.GetNamespace(), Name: name},
		OwnerGvk: og, OwnerNsn: nsn,
	}, StatusCode: code}, true
}
