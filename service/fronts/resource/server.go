package resource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nipamv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/ipam/v1alpha1"
	vlanv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/vlan/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	resourcepb "github.com/nephio-project/ipam/api/proto/resource"
	"github.com/nephio-project/ipam/api/translate"
	"github.com/nephio-project/ipam/api/vocab"
	"github.com/nephio-project/ipam/service/client"
)

// MaxSpecBytes bounds ClaimRequest.spec, the JSON of one object.
const MaxSpecBytes = 64 << 10

// Server is the resource.Resource service over an ipam.v1.IPAM service.
type Server struct {
	resourcepb.UnimplementedResourceServer

	ipam ipamv1.IPAMServer
}

// New returns the resource service over svc, ipam-server's own service.
func New(svc ipamv1.IPAMServer) *Server { return &Server{ipam: svc} }

var _ resourcepb.ResourceServer = (*Server)(nil)

// object is the object a request names, read from its header and spec.
type object struct {
	h     *resourcepb.Header
	owner string
	kind  string
	ns    string
	name  string
	spec  []byte
}

// invalid is an InvalidArgument status about field of a request.
func invalid(field, format string, args ...any) error {
	return status.Error(codes.InvalidArgument, field+": "+fmt.Sprintf(format, args...))
}

// read checks req's header (gvk one of kinds of its group, nsn, owner)
// and the size of its spec.
func read(req *resourcepb.ClaimRequest, kinds ...string) (*object, error) {
	h := req.GetHeader()
	if h == nil {
		return nil, invalid("header", "is required")
	}
	g := h.GetGvk()
	known := false
	for _, k := range kinds {
		known = known || g.GetKind() == k && g.GetVersion() == version && g.GetGroup() == groupOf(k)
	}
	if !known {
		want := make([]string, len(kinds))
		for i, k := range kinds {
			want[i] = groupOf(k) + "/" + version + " " + k
		}
		return nil, invalid("header.gvk", "%s is not served here: one of %s", vocab.Quote(g.GetGroup()+"/"+g.GetVersion()+" "+g.GetKind()), strings.Join(want, ", "))
	}
	if h.GetNsn().GetName() == "" {
		return nil, invalid("header.nsn.name", "is required")
	}
	if len(req.GetSpec()) > MaxSpecBytes {
		return nil, invalid("spec", "%d bytes exceed the limit of %d", len(req.GetSpec()), MaxSpecBytes)
	}
	owner, err := Owner(h)
	if err != nil {
		return nil, invalid("header", "%v", err)
	}
	return &object{h: h, owner: owner, kind: g.GetKind(), ns: h.GetNsn().GetNamespace(), name: h.GetNsn().GetName(), spec: []byte(req.GetSpec())}, nil
}

const version = "v1alpha1"

// groupOf is the API group of kind.
func groupOf(kind string) string {
	if kind == vlanv1alpha1.KindVLANIndex || kind == vlanv1alpha1.KindVLANClaim {
		return vlanv1alpha1.Group
	}
	return nipamv1alpha1.Group
}

// decode reads o's spec (the JSON of the whole object) into into; an
// empty spec leaves into as it is.
func (o *object) decode(into any) error {
	if len(o.spec) == 0 {
		return nil
	}
	if err := json.Unmarshal(o.spec, into); err != nil {
		return invalid("spec", "cannot be read as a %s: %s", o.kind, clip(err.Error()))
	}
	return nil
}

// clip cuts a message that repeats client input.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// key is the key of o's object named name.
func (o *object) key(name string) *ipamv1.Key {
	return &ipamv1.Key{Owner: o.owner, Namespace: o.ns, Name: name}
}

// CreateIndex declares a NetworkInstance's VRF or a VLANIndex's.
func (s *Server) CreateIndex(ctx context.Context, req *resourcepb.ClaimRequest) (*resourcepb.EmptyResponse, error) {
	o, err := read(req, nipamv1alpha1.KindNetworkInstance, vlanv1alpha1.KindVLANIndex)
	if err != nil {
		return nil, err
	}
	sync := &ipamv1.SyncRequest{Owner: o.owner}
	meta := metav1.ObjectMeta{Namespace: o.ns, Name: o.name}
	if o.kind == vlanv1alpha1.KindVLANIndex {
		x := &vlanv1alpha1.VLANIndex{}
		if err := o.decode(x); err != nil {
			return nil, err
		}
		x.ObjectMeta = metav1.ObjectMeta{Namespace: o.ns, Name: o.name, Labels: x.Labels}
		ni, p := translate.VLANIndex(o.owner, x)
		sync.NetworkInstances, sync.Prefixes = []*ipamv1.NetworkInstance{ni}, []*ipamv1.Prefix{p}
	} else {
		ni := &nipamv1alpha1.NetworkInstance{}
		if err := o.decode(ni); err != nil {
			return nil, err
		}
		meta.Labels = ni.Labels
		ni.ObjectMeta = meta
		// Nephio's client claims each aggregate of spec.prefixes on its own
		// (kind aggregate, createPrefix); declaring them here too would
		// declare each twice.
		ni.Spec.Prefixes = nil
		sync.NetworkInstances = []*ipamv1.NetworkInstance{translate.NephioNetworkInstance(o.owner, ni)}
	}
	if _, err := s.ipam.Sync(ctx, sync); err != nil {
		return nil, err
	}
	return &resourcepb.EmptyResponse{}, nil
}

// DeleteIndex deletes the VRF of a NetworkInstance or VLANIndex.
func (s *Server) DeleteIndex(ctx context.Context, req *resourcepb.ClaimRequest) (*resourcepb.EmptyResponse, error) {
	o, err := read(req, nipamv1alpha1.KindNetworkInstance, vlanv1alpha1.KindVLANIndex)
	if err != nil {
		return nil, err
	}
	name := o.name
	if o.kind == vlanv1alpha1.KindVLANIndex {
		name = translate.VLANVRF(o.name)
		if err := absentOK(s.ipam.DeletePrefix(ctx, &ipamv1.DeleteRequest{Key: o.key(name)})); err != nil {
			return nil, err
		}
	}
	if err := absentOK(s.ipam.DeleteNetworkInstance(ctx, &ipamv1.DeleteRequest{Key: o.key(name)})); err != nil {
		return nil, err
	}
	return &resourcepb.EmptyResponse{}, nil
}

// absentOK is err, but nil for NotFound: deleting what is gone succeeds.
func absentOK(_ *ipamv1.DeleteResponse, err error) error {
	if status.Code(err) == codes.NotFound {
		return nil
	}
	return err
}

// claim is a claim read from a request: an IPClaim (an allocation, or a
// prefix it declares) or a VLANClaim.
type claim struct {
	*object
	ip   *nipamv1alpha1.IPClaim
	vlan *vlanv1alpha1.VLANClaim
}

// readClaim reads the claim of req.
func readClaim(req *resourcepb.ClaimRequest) (*claim, error) {
	o, err := read(req, nipamv1alpha1.KindIPClaim, vlanv1alpha1.KindVLANClaim)
	if err != nil {
		return nil, err
	}
	c := &claim{object: o}
	if o.kind == vlanv1alpha1.KindVLANClaim {
		c.vlan = &vlanv1alpha1.VLANClaim{}
		err = o.decode(c.vlan)
		c.vlan.TypeMeta = metav1.TypeMeta{APIVersion: vlanv1alpha1.APIVersion, Kind: vlanv1alpha1.KindVLANClaim}
		c.vlan.Namespace, c.vlan.Name = o.ns, o.name
	} else {
		c.ip = &nipamv1alpha1.IPClaim{}
		err = o.decode(c.ip)
		c.ip.TypeMeta = metav1.TypeMeta{APIVersion: nipamv1alpha1.APIVersion, Kind: nipamv1alpha1.KindIPClaim}
		c.ip.Namespace, c.ip.Name = o.ns, o.name
	}
	return c, err
}

// declaresPrefix reports whether c declares a prefix rather than
// claiming from one: an IPClaim with createPrefix and a prefix, as
// Nephio's client sends IPPrefixes and a NetworkInstance's aggregates.
func (c *claim) declaresPrefix() bool {
	return c.ip != nil && c.ip.Spec.CreatePrefix != nil && *c.ip.Spec.CreatePrefix && c.ip.Spec.Prefix != nil
}

// allocName is the key name of c's allocation.
func (c *claim) allocName() string {
	if c.vlan != nil {
		return translate.NephioVLANClaimName(c.name)
	}
	return translate.NephioIPClaimName(c.name)
}

// prefixes are the prefixes the IPClaim c declares.
func (c *claim) prefixes() ([]*ipamv1.Prefix, error) {
	s := c.ip.Spec
	kind := s.Kind
	if kind == "" {
		kind = nipamv1alpha1.PrefixKindNetwork
	}
	p := &nipamv1alpha1.IPPrefix{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name, Labels: c.ip.Labels},
		Spec: nipamv1alpha1.IPPrefixSpec{Kind: kind, NetworkInstance: s.NetworkInstance, Prefix: *s.Prefix, UserDefinedLabels: s.UserDefinedLabels}}
	xs, err := translate.NephioPrefix(c.owner, p)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return xs, nil
}

// allocation is the allocation c asks for, its spec.index resolved.
func (s *Server) allocation(ctx context.Context, c *claim) (*ipamv1.Allocation, error) {
	var want *ipamv1.Allocation
	var err error
	if c.vlan != nil {
		c.vlan.Name = c.allocName()
		want, err = translate.VLANClaim(c.owner, c.vlan)
		c.vlan.Name = c.name
	} else {
		c.ip.Name = c.allocName()
		want, err = translate.IPClaim(c.owner, c.ip)
		c.ip.Name = c.name
	}
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if c.ip != nil && c.ip.Spec.Index != nil {
		list := func(ctx context.Context, req *ipamv1.ListRequest, _ ...grpc.CallOption) (*ipamv1.ListResponse, error) {
			return s.ipam.List(ctx, req)
		}
		if err := client.ResolveIndex(ctx, list, want, *c.ip.Spec.Index, nil); err != nil {
			if _, ok := status.FromError(err); ok {
				return nil, err
			}
			code := codes.InvalidArgument
			if errors.Is(err, client.ErrNoNetwork) {
				code = codes.NotFound
			}
			return nil, status.Errorf(code, "IPClaim %s: %v", translate.ID(c.ns, c.name), err)
		}
	}
	return want, nil
}

// Claim makes the claim of req, or returns the one held.
func (s *Server) Claim(ctx context.Context, req *resourcepb.ClaimRequest) (*resourcepb.ClaimResponse, error) {
	c, err := readClaim(req)
	if err != nil {
		return nil, err
	}
	sync := &ipamv1.SyncRequest{Owner: c.owner}
	if c.declaresPrefix() {
		if sync.Prefixes, err = c.prefixes(); err != nil {
			return nil, err
		}
	} else {
		want, err := s.allocation(ctx, c)
		if err != nil {
			return nil, err
		}
		sync.Allocations = []*ipamv1.Allocation{want}
	}
	resp, err := s.ipam.Sync(ctx, sync)
	if err != nil {
		return nil, claimError(err)
	}
	res := firstResult(resp.GetPrefixes())
	if !c.declaresPrefix() {
		res = firstResult(resp.GetAllocations())
	}
	return c.response(req, res)
}

// firstResult is the first of results, or an empty one.
func firstResult(results []*ipamv1.Result) *ipamv1.Result {
	if len(results) == 0 {
		return &ipamv1.Result{}
	}
	return results[0]
}

// GetClaim returns the claim of req as ipam-server holds it.
func (s *Server) GetClaim(ctx context.Context, req *resourcepb.ClaimRequest) (*resourcepb.ClaimResponse, error) {
	c, err := readClaim(req)
	if err != nil {
		return nil, err
	}
	get := &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, Key: c.key(c.allocName())}
	if c.declaresPrefix() {
		get = &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_PREFIX, Key: c.key(c.name)}
	}
	resp, err := s.ipam.Get(ctx, get)
	if err != nil {
		return nil, claimError(err)
	}
	res := resp.GetObject().GetAllocation().GetResult()
	if c.declaresPrefix() {
		res = resp.GetObject().GetPrefix().GetResult()
	}
	return c.response(req, res)
}

// DeleteClaim releases the claim of req.
func (s *Server) DeleteClaim(ctx context.Context, req *resourcepb.ClaimRequest) (*resourcepb.EmptyResponse, error) {
	c, err := readClaim(req)
	if err != nil {
		return nil, err
	}
	if c.declaresPrefix() {
		// The address of a network written with a host part goes first.
		if err := absentOK(s.ipam.DeletePrefix(ctx, &ipamv1.DeleteRequest{Key: c.key(translate.NephioHostName(c.name))})); err != nil {
			return nil, err
		}
		err = absentOK(s.ipam.DeletePrefix(ctx, &ipamv1.DeleteRequest{Key: c.key(c.name)}))
	} else {
		err = absentOK(s.ipam.Release(ctx, &ipamv1.DeleteRequest{Key: c.key(c.allocName())}))
	}
	if err != nil {
		return nil, claimError(err)
	}
	return &resourcepb.EmptyResponse{}, nil
}

// claimError is err, a status of ipam-server's own service about a
// claim, in the claim's words (translate.NephioMessage), with its code.
func claimError(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	return status.Error(st.Code(), translate.NephioMessage(st.Message()))
}

// response is the answer to req for claim c, held as res: the object
// with its status filled in.
func (c *claim) response(req *resourcepb.ClaimRequest, res *ipamv1.Result) (*resourcepb.ClaimResponse, error) {
	conds := []metav1.Condition{
		{Type: "Synced", Status: metav1.ConditionTrue, Reason: "ReconcileSuccess"},
		{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"},
	}
	var obj any
	if c.vlan != nil {
		id, rng, err := translate.VLANResult(c.vlan, res)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		c.vlan.Status.Conditions = conds
		c.vlan.Status.VLANID, c.vlan.Status.VLANRange = nil, nil
		if rng != "" {
			c.vlan.Status.VLANRange = &rng
		} else {
			v := uint16(id)
			c.vlan.Status.VLANID = &v
		}
		obj = c.vlan
	} else {
		c.ip.Status.Conditions = conds
		p, g := res.GetPrefix(), res.GetGateway()
		c.ip.Status.Prefix, c.ip.Status.Gateway = &p, nil
		if g != "" {
			c.ip.Status.Gateway = &g
		}
		obj = c.ip
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &resourcepb.ClaimResponse{Header: c.h, Spec: req.GetSpec(), Status: string(b),
		StatusCode: resourcepb.StatusCode_Valid, ExpiryTime: req.GetExpiryTime()}, nil
}
