package engine

import (
	"fmt"
	"net/netip"

	"github.com/kptdev/krm-functions-sdk/go/fn"

	metal3v1alpha1 "github.com/nephio-project/ipam/api/metal3/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
	"github.com/nephio-project/ipam/api/vocab"
)

// The Metal3 front in a package (GitOps mode). IPPools join the
// package's Sync (translate.Metal3Pool.AddTo, pre-allocations keyed by
// the claims' allocations), with the IPAddresses taken out of a pool by
// hand (no claim) as allocations of exactly their address. Every IPClaim
// of a pool in the package becomes an allocation keyed ipclaim.<name> (its
// ipAddress annotation asks for that address); the answer is written
// into the claim's status.address and into an IPAddress
// <namePrefix>-<address> (file ipaddress-<claim>.yaml next to the
// claim). An IPAddress already in Git pins its claim, as for Cluster API
// claims. Within one Sync the entries are taken in address order.

// isMetal3 reports whether it is of kind in ipam.metal3.io/v1alpha1.
func isMetal3(it *fn.KubeObject, kind string) bool {
	return it.IsGVK(metal3v1alpha1.Group, metal3v1alpha1.Version, kind)
}

// addMetal3Pool appends IPPool o's objects to req, and the addresses the
// package's IPAddresses take out of it by hand.
func (o *object) addMetal3Pool(req *ipamv1.SyncRequest, owner string, items fn.KubeObjects) ([]*translate.FieldError, error) {
	var spec metal3v1alpha1.IPPoolSpec
	w, err := o.spec(&spec)
	if err != nil {
		return w, err
	}
	p, err := translate.ParseMetal3Pool(o.ns, o.name, &spec)
	if err != nil {
		return w, err
	}
	nis, prefixes, ranges := len(req.NetworkInstances), len(req.Prefixes), len(req.Ranges)
	if err := p.AddTo(req, owner, owner, translate.PackageMetal3ClaimName); err != nil {
		return w, err
	}
	for _, ni := range req.NetworkInstances[nis:] {
		o.aliases = append(o.aliases, alias{vocab.ObjNetworkInstance, "", ni.GetKey().GetName()})
	}
	for _, x := range req.Prefixes[prefixes:] {
		o.aliases = append(o.aliases, alias{vocab.ObjPrefix, o.ns, x.GetKey().GetName()})
	}
	for _, r := range req.Ranges[ranges:] {
		o.aliases = append(o.aliases, alias{vocab.ObjRange, o.ns, r.GetKey().GetName()})
	}
	for _, it := range items {
		if !isMetal3(it, metal3v1alpha1.KindIPAddress) || it.GetNamespace() != o.ns {
			continue
		}
		pool, _, _ := it.NestedString("spec", "pool", "name")
		claim, _, _ := it.NestedString("spec", "claim", "name")
		s, _, _ := it.NestedString("spec", "address")
		a, err := netip.ParseAddr(s)
		if pool != o.name || claim != "" || err != nil {
			continue
		}
		x := p.External(owner, owner, it.GetName(), a.Unmap())
		o.aliases = append(o.aliases, alias{vocab.ObjAllocation, o.ns, x.GetKey().GetName()})
		req.Allocations = append(req.Allocations, x)
	}
	o.index = prefixes
	o.m3pool = p
	return w, nil
}

// readMetal3Claim reads IPClaim o.
func (o *object) readMetal3Claim() error {
	meta, err := o.meta()
	if err != nil {
		return err
	}
	c := &metal3v1alpha1.IPClaim{ObjectMeta: meta}
	if _, err := o.spec(&c.Spec); err != nil {
		return err
	}
	c.Annotations = o.item.GetAnnotations()
	o.claim = &claimPart{m3: c}
	return o.checkStatus()
}

// addMetal3Claim appends the allocation of IPClaim o, from its pool among
// objs, to req; addrs are the package's IPAddresses by claim.
func addMetal3Claim(req *ipamv1.SyncRequest, owner string, o *object, objs []*object, addrs map[string]*fn.KubeObject) error {
	c := o.claim.m3
	ns := c.Spec.Pool.Namespace
	if ns == "" {
		ns = o.ns
	}
	var pool *object
	for _, x := range objs {
		if x.m3pool != nil && x.ns == ns && x.name == c.Spec.Pool.Name {
			pool = x
		}
	}
	if pool == nil {
		return &translate.FieldError{Kind: o.kind, Namespace: o.ns, Name: o.name, Field: "spec.pool",
			Msg: fmt.Sprintf("no IPPool %s in the package", vocab.Quote(translate.ID(ns, c.Spec.Pool.Name)))}
	}
	key := &ipamv1.Key{Owner: owner, Namespace: o.ns, Name: translate.PackageMetal3ClaimName(o.name)}
	want, err := pool.m3pool.Metal3Claim(owner, key, c.Annotations[metal3v1alpha1.AnnotationIPAddress])
	if err != nil {
		return &translate.FieldError{Kind: o.kind, Namespace: o.ns, Name: o.name, Field: "metadata.annotations." + metal3v1alpha1.AnnotationIPAddress, Msg: err.Error()}
	}
	if pool.m3pool.PreAllocationOutOfBounds(o.name) {
		return &translate.FieldError{Kind: o.kind, Namespace: o.ns, Name: o.name, Field: "spec.pool",
			Msg: metal3v1alpha1.ErrPreAllocatedOutOfBounds + ": IPPool " + translate.ID(ns, c.Spec.Pool.Name) + " pre-allocates an address outside its pools"}
	}
	o.claim.pool = pool
	o.claim.addr = addrs[translate.ID(o.ns, o.name)]
	o.index = len(req.Allocations)
	o.aliases = append(o.aliases, alias{vocab.ObjAllocation, o.ns, key.GetName()})
	req.Allocations = append(req.Allocations, want)
	return nil
}

// writeMetal3Claim writes res into copies of IPClaim o and its IPAddress
// (a new one when the address moved or there was none).
func writeMetal3Claim(o *object, res *ipamv1.Result) (claimOutput, bool, error) {
	pfx, err := netip.ParsePrefix(res.GetPrefix())
	if err != nil {
		return claimOutput{}, false, fmt.Errorf("ipam-server answered %q: %w", res.GetPrefix(), err)
	}
	p := o.claim.pool.m3pool
	ip := pfx.Addr()
	name := p.Metal3AddressName(ip)
	spec := p.Metal3Address(ip, o.ns, o.name)
	var s setter
	out := claimOutput{claim: o.item.Copy()}
	status := out.claim.UpsertMap("status")
	if err := s.set(status, name, "address", "name"); err != nil {
		return claimOutput{}, false, err
	}
	if err := s.set(status, p.Namespace, "address", "namespace"); err != nil {
		return claimOutput{}, false, err
	}
	if err := s.remove(status, "errorMessage"); err != nil {
		return claimOutput{}, false, err
	}
	if old := o.claim.addr; old != nil && old.GetName() == name {
		out.addr = old.Copy()
	} else {
		out.addr, out.added, s.changed = newIPAddress(o, metal3v1alpha1.GroupVersion.String(), metal3v1alpha1.KindIPAddress, p.Namespace, name), true, true
	}
	a := &out.addr.SubObject
	gateway := ""
	if spec.Gateway != nil {
		gateway = string(*spec.Gateway)
	}
	if err := s.addressSpec(a, []fieldValue{
		{spec.Claim.Name, []string{"spec", "claim", "name"}},
		{spec.Claim.Namespace, []string{"spec", "claim", "namespace"}},
		{spec.Pool.Name, []string{"spec", "pool", "name"}},
		{spec.Pool.Namespace, []string{"spec", "pool", "namespace"}},
		{string(spec.Address), []string{"spec", "address"}},
	}, spec.Prefix, gateway); err != nil {
		return claimOutput{}, false, err
	}
	var dns []string
	for _, d := range spec.DNSServers {
		dns = append(dns, string(d))
	}
	cur, _, _ := a.NestedStringSlice("spec", "dnsServers")
	if fmt.Sprint(cur) != fmt.Sprint(dns) {
		s.changed = true
		if len(dns) == 0 {
			_, err = a.RemoveNestedField("spec", "dnsServers")
		} else {
			err = a.SetNestedStringSlice(dns, "spec", "dnsServers")
		}
		if err != nil {
			return claimOutput{}, false, err
		}
	}
	return out, s.changed, nil
}
