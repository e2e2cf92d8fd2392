package engine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/kptdev/krm-functions-sdk/go/fn"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	commonv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/common/v1alpha1"
	nipamv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/ipam/v1alpha1"
	vlanv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/vlan/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
	"github.com/nephio-project/ipam/api/vocab"
	ipamclient "github.com/nephio-project/ipam/service/client"
)

// Nephio's resource API in a package. NetworkInstances and IPPrefixes of
// ipam.resource.nephio.org/v1alpha1 and VLANIndexes of
// vlan.resource.nephio.org/v1alpha1 join the package's Sync as the VRFs,
// prefixes and VLAN indexes they declare (their items are left as they
// are, as Nephio's ipam-fn leaves them); IPClaims and VLANClaims become
// allocations keyed NephioIPClaimName / NephioVLANClaimName, and their
// answers are written into the claim's status (prefix and gateway;
// vlanID or vlanRange) and into one condition per claim of the root
// Kptfile in the form of Nephio's condition SDK. A claim annotated
// nephio.org/action: get reads the claim the owner holds, and fails when
// there is none; an IPClaim's spec.index is the address at that offset of
// the first network its selector matches.

// NephioIPClaimName is the key name of an IPClaim's allocation in a
// package's Sync (translate.NephioIPClaimName).
func NephioIPClaimName(name string) string { return translate.NephioIPClaimName(name) }

// NephioVLANClaimName is the key name of a VLANClaim's allocation in a
// package's Sync (translate.NephioVLANClaimName).
func NephioVLANClaimName(name string) string { return translate.NephioVLANClaimName(name) }

// NephioConditionType is the type of the root Kptfile's condition for
// the claim of apiVersion and kind named name, as Nephio's condition SDK
// writes it: ipam.resource.nephio.org/v1alpha1.IPClaim.n3.
func NephioConditionType(apiVersion, kind, name string) string {
	return apiVersion + "." + kind + "." + name
}

// MessageNephioDone is the message of a served claim's Kptfile condition.
const MessageNephioDone = "update done"

// nephioPart is a Nephio resource read.
type nephioPart struct {
	// ipClaim and vlanClaim are the claim read, if o is one.
	ipClaim   *nipamv1alpha1.IPClaim
	vlanClaim *vlanv1alpha1.VLANClaim
	// get: the claim reads what the owner holds (nephio.org/action: get).
	get bool
}

// nephioKindOf is the kind of it when it is one of Nephio's resource
// kinds this engine serves, or "".
func nephioKindOf(it *fn.KubeObject) string {
	for _, k := range []string{nipamv1alpha1.KindNetworkInstance, nipamv1alpha1.KindIPPrefix, nipamv1alpha1.KindIPClaim} {
		if it.IsGVK(nipamv1alpha1.Group, nipamv1alpha1.Version, k) {
			return k
		}
	}
	for _, k := range []string{vlanv1alpha1.KindVLANIndex, vlanv1alpha1.KindVLANClaim} {
		if it.IsGVK(vlanv1alpha1.Group, vlanv1alpha1.Version, k) {
			return k
		}
	}
	return ""
}

// isNephioClaim reports whether o is an IPClaim or VLANClaim.
func (o *object) isNephioClaim() bool {
	return o.nres != nil && (o.nres.ipClaim != nil || o.nres.vlanClaim != nil)
}

// addNephio reads Nephio resource o into its typed form and appends its
// translation to req.
func (o *object) addNephio(req *ipamv1.SyncRequest, owner string) ([]*translate.FieldError, error) {
	meta, err := o.meta()
	if err != nil {
		return nil, err
	}
	o.nres = &nephioPart{get: o.item.GetAnnotation(commonv1alpha1.LabelAction) == commonv1alpha1.ActionGet}
	switch o.kind {
	case nipamv1alpha1.KindNetworkInstance:
		ni := &nipamv1alpha1.NetworkInstance{ObjectMeta: meta}
		w, err := o.spec(&ni.Spec)
		if err != nil {
			return w, err
		}
		o.index = len(req.NetworkInstances)
		req.NetworkInstances = append(req.NetworkInstances, translate.NephioNetworkInstance(owner, ni))
		return w, nil
	case nipamv1alpha1.KindIPPrefix:
		p := &nipamv1alpha1.IPPrefix{ObjectMeta: meta}
		w, err := o.spec(&p.Spec)
		if err != nil {
			return w, err
		}
		xs, err := translate.NephioPrefix(owner, p)
		if err != nil {
			return w, err
		}
		o.index = len(req.Prefixes)
		for _, x := range xs[1:] {
			o.aliases = append(o.aliases, alias{vocab.ObjPrefix, o.ns, x.GetKey().GetName()})
		}
		req.Prefixes = append(req.Prefixes, xs...)
		return w, nil
	case vlanv1alpha1.KindVLANIndex:
		x := &vlanv1alpha1.VLANIndex{ObjectMeta: meta}
		w, err := o.spec(&x.Spec)
		if err != nil {
			return w, err
		}
		ni, p := translate.VLANIndex(owner, x)
		o.aliases = append(o.aliases, alias{vocab.ObjNetworkInstance, o.ns, ni.GetKey().GetName()}, alias{vocab.ObjPrefix, o.ns, p.GetKey().GetName()})
		o.index = len(req.Prefixes)
		req.NetworkInstances = append(req.NetworkInstances, ni)
		req.Prefixes = append(req.Prefixes, p)
		return w, nil
	case nipamv1alpha1.KindIPClaim:
		c := &nipamv1alpha1.IPClaim{ObjectMeta: meta}
		w, err := o.spec(&c.Spec)
		if err == nil {
			err = o.checkStatus()
		}
		if err != nil {
			return w, err
		}
		c.Name = NephioIPClaimName(o.name)
		want, err := translate.IPClaim(owner, c)
		c.Name = o.name
		if err != nil {
			return w, renamed(err, o)
		}
		o.nres.ipClaim = c
		o.addAllocation(req, want)
		return w, nil
	default: // VLANClaim
		c := &vlanv1alpha1.VLANClaim{ObjectMeta: meta}
		w, err := o.spec(&c.Spec)
		if err == nil {
			err = o.checkStatus()
		}
		if err != nil {
			return w, err
		}
		c.Name = NephioVLANClaimName(o.name)
		want, err := translate.VLANClaim(owner, c)
		c.Name = o.name
		if err != nil {
			return w, renamed(err, o)
		}
		o.nres.vlanClaim = c
		o.addAllocation(req, want)
		return w, nil
	}
}

// renamed is err about the claim o under its own name rather than its
// key's.
func renamed(err error, o *object) error {
	if fe, ok := err.(*translate.FieldError); ok {
		fe.Name = o.name
	}
	return err
}

// addAllocation appends the claim's allocation want to req.
func (o *object) addAllocation(req *ipamv1.SyncRequest, want *ipamv1.Allocation) {
	o.index = len(req.Allocations)
	o.aliases = append(o.aliases, alias{vocab.ObjAllocation, o.ns, want.GetKey().GetName()})
	req.Allocations = append(req.Allocations, want)
}

// resolveNephio completes the requests of the package's Nephio claims
// from what ipam-server holds: a get claim becomes the request the owner
// holds under its key (an error when there is none), and an IPClaim's
// spec.index the address at that offset of the first network its
// selector matches, among the package's prefixes and the server's.
func resolveNephio(ctx context.Context, client ipamv1.IPAMClient, req *ipamv1.SyncRequest, objs []*object) fn.Results {
	var results fn.Results
	for _, o := range objs {
		if !o.isNephioClaim() {
			continue
		}
		want := req.Allocations[o.index]
		if o.nres.get {
			resp, err := client.Get(ctx, &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, Key: want.GetKey()})
			if status.Code(err) == codes.NotFound {
				results = append(results, objectResult(o, "metadata.annotations."+commonv1alpha1.LabelAction,
					fmt.Sprintf("get: owner %s holds no claim %s in ipam-server", vocab.Quote(req.GetOwner()), translate.ID(o.ns, o.name)), codes.NotFound.String()))
				continue
			}
			if err != nil {
				results = append(results, objectResult(o, "", "get: "+status.Convert(err).Message(), status.Code(err).String()))
				continue
			}
			held := proto.Clone(resp.GetObject().GetAllocation().GetAllocation()).(*ipamv1.Allocation)
			held.Key = want.GetKey()
			req.Allocations[o.index] = held
			continue
		}
		c := o.nres.ipClaim
		if c == nil || c.Spec.Index == nil {
			continue
		}
		if err := ipamclient.ResolveIndex(ctx, client.List, want, *c.Spec.Index, req.GetPrefixes()); err != nil {
			field, msg, _ := strings.Cut(err.Error(), ": ")
			code := codes.InvalidArgument
			if errors.Is(err, ipamclient.ErrNoNetwork) {
				code = codes.NotFound
			}
			if st, ok := status.FromError(err); ok {
				field, msg, code = "spec.index", "listing the networks: "+st.Message(), st.Code()
			}
			results = append(results, objectResult(o, field, msg, code.String()))
		}
	}
	return results
}

// writeNephioClaim writes res into a copy of claim o's status: prefix and
// gateway of an IPClaim, vlanID or vlanRange of a VLANClaim. It reports
// whether anything changed.
func writeNephioClaim(o *object, res *ipamv1.Result) (*fn.KubeObject, bool, error) {
	next := o.item.Copy()
	var s setter
	var cur map[string]any
	if found, _ := next.NestedResource(&cur, "status"); found && len(cur) == 0 {
		// interface-fn writes status: {}; a status written into that flow
		// map would stay on one line.
		if _, err := next.RemoveNestedField("status"); err != nil {
			return nil, false, err
		}
	}
	if c := o.nres.vlanClaim; c != nil {
		id, rng, err := translate.VLANResult(c, res)
		if err != nil {
			return nil, false, err
		}
		if rng != "" {
			if err := s.set(&next.SubObject, rng, "status", "vlanRange"); err != nil {
				return nil, false, err
			}
			err = s.remove(&next.SubObject, "status", "vlanID")
			return next, s.changed, err
		}
		if cur, found, _ := next.NestedInt64("status", "vlanID"); !found || cur != int64(id) {
			s.changed = true
			if err := next.SetNestedInt(id, "status", "vlanID"); err != nil {
				return nil, false, err
			}
		}
		err = s.remove(&next.SubObject, "status", "vlanRange")
		return next, s.changed, err
	}
	if err := s.set(&next.SubObject, res.GetPrefix(), "status", "prefix"); err != nil {
		return nil, false, err
	}
	var err error
	if g := res.GetGateway(); g != "" {
		err = s.set(&next.SubObject, g, "status", "gateway")
	} else {
		err = s.remove(&next.SubObject, "status", "gateway")
	}
	return next, s.changed, err
}

// nephioCondition is the Kptfile condition of served claim o: True,
// update done, keeping the reason (the owner interface-fn names there)
// of the condition k already holds.
func nephioCondition(k *fn.KubeObject, o *object) Condition {
	c := Condition{Type: NephioConditionType(o.item.GetAPIVersion(), o.kind, o.name), Status: "True", Message: MessageNephioDone}
	if k != nil {
		if cur, ok := KptfileCondition(k, c.Type); ok {
			c.Reason = cur.Reason
		}
	}
	return c
}

// nephioConditionPrefixes are the condition types of Nephio claims this
// engine writes, without the claim name.
var nephioConditionPrefixes = []string{
	NephioConditionType(nipamv1alpha1.APIVersion, nipamv1alpha1.KindIPClaim, ""),
	NephioConditionType(vlanv1alpha1.APIVersion, vlanv1alpha1.KindVLANClaim, ""),
}

// staleNephioCondition reports whether e is the Kptfile condition of a
// Nephio claim that left the package and that no other function owns (it
// names no owner in its reason).
func staleNephioCondition(e *fn.SubObject, want map[string]bool) bool {
	t, _, _ := e.NestedString("type")
	if want[t] || !slices.ContainsFunc(nephioConditionPrefixes, func(p string) bool { return strings.HasPrefix(t, p) }) {
		return false
	}
	r, _, _ := e.NestedString("reason")
	return r == ""
}

// nephioError is the field and message of a server error about Nephio
// resource o in o's words (translate.NephioMessage): the claim, not its
// allocation; a VLAN ID, not its address; spec.vlanID or spec.range, not
// the allocation's spec.prefix or spec.count.
func (o *object) nephioError(field, msg string) (string, string) {
	msg = translate.NephioMessage(msg)
	if o.kind != vlanv1alpha1.KindVLANClaim {
		return field, msg
	}
	mapped := translate.NephioVLANField(o.nres.vlanClaim, field)
	return mapped, strings.Replace(msg, ": "+field+": ", ": "+mapped+": ", 1)
}

// declaredNephio is what Nephio resource o declares in ipam-server, for
// the audit: a NetworkInstance's VRF; an IPPrefix's prefixes and a
// VLANIndex's VRF and network, with the prefixes of req; a claim's
// allocation with what its status says (a VLAN ID as its address).
func (o *object) declaredNephio(req *ipamv1.SyncRequest) []Declared {
	var out []Declared
	switch o.kind {
	case nipamv1alpha1.KindNetworkInstance:
		return []Declared{{Kind: vocab.ObjNetworkInstance, Namespace: o.ns, Name: o.name, Item: o.item}}
	case nipamv1alpha1.KindIPPrefix, vlanv1alpha1.KindVLANIndex:
		names := []alias{{vocab.ObjPrefix, o.ns, o.name}}
		if o.kind == vlanv1alpha1.KindVLANIndex {
			names = nil
		}
		for _, a := range append(names, o.aliases...) {
			d := Declared{Kind: a.object, Namespace: a.ns, Name: a.name, Item: o.item}
			for _, p := range req.GetPrefixes() {
				if a.object == vocab.ObjPrefix && p.GetKey().GetName() == a.name && p.GetKey().GetNamespace() == a.ns {
					d.Prefix = p.GetPrefix()
				}
			}
			out = append(out, d)
		}
		return out
	}
	if !o.isNephioClaim() || len(o.aliases) == 0 {
		return nil
	}
	d := Declared{Kind: vocab.ObjAllocation, Namespace: o.ns, Name: o.aliases[0].name, Item: o.item}
	if o.nres.vlanClaim != nil {
		d.AddressOnly = true
		if id, found, _ := o.item.NestedInt64("status", "vlanID"); found && id >= 0 && id <= translate.MaxVLAN {
			d.Prefix = netip.PrefixFrom(translate.VLANAddr(int(id)), translate.VLANNetwork.Bits()).String()
		} else if rng, _, _ := o.item.NestedString("status", "vlanRange"); rng != "" {
			if r, err := translate.ParseVLANRange(rng); err == nil && r.Size == 0 {
				d.Prefix = netip.PrefixFrom(translate.VLANAddr(r.First), translate.VLANNetwork.Bits()).String()
			}
		}
	} else {
		d.Prefix, _, _ = o.item.NestedString("status", "prefix")
	}
	return append(out, d)
}

// NephioFailedConditions are the root Kptfile conditions of the Nephio
// claims that results (of a failed Process) name: False, with the error
// as the message and the reason the Kptfile k holds for the claim kept.
// Process writes none (kpt keeps nothing a failed function returns); a
// client that keeps its package after a failure, as the Porch injector
// does, writes them as Nephio's condition SDK does.
func NephioFailedConditions(k *fn.KubeObject, results fn.Results) []Condition {
	var out []Condition
	seen := map[string]int{}
	for _, r := range results {
		ref := r.ResourceRef
		if r.Severity != fn.Error || ref == nil ||
			!(ref.APIVersion == nipamv1alpha1.APIVersion && ref.Kind == nipamv1alpha1.KindIPClaim ||
				ref.APIVersion == vlanv1alpha1.APIVersion && ref.Kind == vlanv1alpha1.KindVLANClaim) {
			continue
		}
		c := Condition{Type: NephioConditionType(ref.APIVersion, ref.Kind, ref.Name), Status: "False", Message: r.Message}
		if r.Field != nil && r.Field.Path != "" {
			c.Message = r.Field.Path + ": " + c.Message
		}
		if k != nil {
			if cur, ok := KptfileCondition(k, c.Type); ok {
				c.Reason = cur.Reason
			}
		}
		if i, ok := seen[c.Type]; ok { // one condition per claim: the errors joined
			out[i].Message += "; " + c.Message
			continue
		}
		seen[c.Type] = len(out)
		out = append(out, c)
	}
	return out
}
