package engine

import (
	"context"
	"fmt"
	"net/netip"
	"path"
	"strconv"

	"github.com/kptdev/krm-functions-sdk/go/fn"

	capicorev1beta2 "github.com/nephio-project/ipam/api/capi/core/v1beta2"
	capiv1beta2 "github.com/nephio-project/ipam/api/capi/ipam/v1beta2"
	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	metal3v1alpha1 "github.com/nephio-project/ipam/api/metal3/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
	"github.com/nephio-project/ipam/api/vocab"
)

// The Cluster API front in a package (GitOps mode). InClusterIPPools and
// GlobalInClusterIPPools join the package's Sync as their network
// instance, networks and ranges (translate.PoolSpec.AddTo); every
// IPAddressClaim whose poolRef names one of them, an IPPrefix of the
// package or a NetworkInstance becomes an allocation keyed
// ipaddressclaim.<name> in the claim's namespace. The answer is written
// into the claim's status and into an IPAddress object named after the
// claim (file ipaddress-<name>.yaml next to the claim), reviewable in Git.
// An IPAddress already in the package is what Git says the claim holds:
// it is re-registered as exactly that address when the server does not
// hold it (a fresh or restored server), so rendering never moves it.
// IPAddresses of this front whose claim left the package are removed.

// capiVersions are the versions of IPAddressClaim and IPAddress read
// from a package; v1beta1 and v1beta2 share the fields the front uses.
var capiVersions = []string{capiv1beta2.Version, "v1beta1"}

// isCAPI reports whether it is an IPAddressClaim or IPAddress (kind) of
// a served Cluster API version.
func isCAPI(it *fn.KubeObject, kind string) bool {
	for _, v := range capiVersions {
		if it.IsGVK(capiv1beta2.Group, v, kind) {
			return true
		}
	}
	return false
}

// alias is a key of the server's objects that a package object answers
// for in errors: a pool's network instance, networks and ranges; a
// claim's allocation.
type alias struct{ object, ns, name string }

// answers reports whether the item error it is about o.
func (o *object) answers(it *ipamv1.ItemError) bool {
	k, kind := it.GetKey(), translate.ItemKind(it)
	if o.kind == kind && o.ns == k.GetNamespace() && o.name == k.GetName() {
		return true
	}
	for _, a := range o.aliases {
		if a.object == kind && (a.ns == k.GetNamespace() || a.object == vocab.ObjNetworkInstance) && a.name == k.GetName() {
			return true
		}
	}
	return false
}

// addPool appends pool o's objects to req.
func (o *object) addPool(req *ipamv1.SyncRequest, owner string) ([]*translate.FieldError, error) {
	var spec ipamv1alpha1.InClusterIPPoolSpec
	w, err := o.spec(&spec)
	if err != nil {
		return w, err
	}
	ns := o.ns
	if o.kind == ipamv1alpha1.KindGlobalInClusterIPPool {
		ns = ""
	}
	p, err := translate.ParsePool(o.kind, ns, o.name, &spec)
	if err != nil {
		return w, err
	}
	nis, prefixes, ranges := len(req.NetworkInstances), len(req.Prefixes), len(req.Ranges)
	if err := p.AddTo(req, owner, owner); err != nil {
		return w, err
	}
	for _, ni := range req.NetworkInstances[nis:] {
		o.aliases = append(o.aliases, alias{vocab.ObjNetworkInstance, "", ni.GetKey().GetName()})
	}
	for _, x := range req.Prefixes[prefixes:] {
		o.aliases = append(o.aliases, alias{vocab.ObjPrefix, ns, x.GetKey().GetName()})
	}
	for _, r := range req.Ranges[ranges:] {
		o.aliases = append(o.aliases, alias{vocab.ObjRange, ns, r.GetKey().GetName()})
	}
	o.index = prefixes
	o.pool = p
	return w, nil
}

// claimPart is what a claim object carries besides its item: a Cluster
// API IPAddressClaim (capi) or a Metal3 IPClaim (m3).
type claimPart struct {
	capi *capiv1beta2.IPAddressClaim
	m3   *metal3v1alpha1.IPClaim
	// pool is a Metal3 claim's IPPool.
	pool *object
	// addr is the claim's IPAddress in the package, if any.
	addr *fn.KubeObject
}

// readClaim reads claim o; ours is false for a claim of another
// provider's pool, which the function leaves alone.
func (o *object) readClaim() (ours bool, err error) {
	meta, err := o.meta()
	if err != nil {
		return false, err
	}
	o.claim = &claimPart{capi: &capiv1beta2.IPAddressClaim{ObjectMeta: meta}}
	var spec capiv1beta2.IPAddressClaimSpec
	if _, err := o.spec(&spec); err != nil {
		return false, err
	}
	o.claim.capi.Spec = spec
	if spec.PoolRef.APIGroup != ipamv1alpha1.Group {
		return false, nil
	}
	if err := o.checkStatus(); err != nil {
		return true, err
	}
	return true, nil
}

// addClaims appends the allocation of every claim among objs to req,
// resolving its pool among objs. It returns the error results.
func addClaims(req *ipamv1.SyncRequest, owner string, objs []*object, items fn.KubeObjects) fn.Results {
	var results fn.Results
	addrs, m3addrs := map[string]*fn.KubeObject{}, map[string]*fn.KubeObject{}
	for _, it := range items {
		if isCAPI(it, capiv1beta2.KindIPAddress) {
			claimName, _, _ := it.NestedString("spec", "claimRef", "name")
			addrs[translate.ID(it.GetNamespace(), claimName)] = it
		}
		if isMetal3(it, metal3v1alpha1.KindIPAddress) {
			if claimName, _, _ := it.NestedString("spec", "claim", "name"); claimName != "" {
				m3addrs[translate.ID(it.GetNamespace(), claimName)] = it
			}
		}
	}
	taken := map[string]*object{}
	for _, o := range objs {
		if o.kind == ipamv1alpha1.KindIPAllocation {
			taken[translate.ID(o.ns, o.name)] = o
		}
	}
	for _, o := range objs {
		if o.claim == nil {
			continue
		}
		if o.claim.m3 != nil {
			if err := addMetal3Claim(req, owner, o, objs, m3addrs); err != nil {
				results = append(results, fieldResult(o, err))
			}
			continue
		}
		c := o.claim.capi
		name := translate.PackageClaimName(o.name)
		if other := taken[translate.ID(o.ns, name)]; other != nil {
			results = append(results, objectResult(o, "metadata.name", fmt.Sprintf("its allocation is keyed %s, the name of %s in the package: rename one", name, other.id()), "InvalidArgument"))
			continue
		}
		key := &ipamv1.Key{Owner: owner, Namespace: o.ns, Name: name}
		want, err := claimRequest(owner, key, c, objs)
		if err != nil {
			results = append(results, objectResult(o, "spec.poolRef", err.Error(), "InvalidArgument"))
			continue
		}
		o.claim.addr = addrs[translate.ID(o.ns, o.name)]
		o.index = len(req.Allocations)
		o.aliases = append(o.aliases, alias{vocab.ObjAllocation, o.ns, name})
		req.Allocations = append(req.Allocations, want)
	}
	return results
}

// claimRequest is the allocation of claim c, from the pool its poolRef
// names among objs.
func claimRequest(owner string, key *ipamv1.Key, c *capiv1beta2.IPAddressClaim, objs []*object) (*ipamv1.Allocation, error) {
	ref := c.Spec.PoolRef
	ns := c.Namespace
	switch ref.Kind {
	case ipamv1alpha1.KindNetworkInstance:
		return translate.ClaimFromNetworkInstance(key, ref.Name), nil
	case ipamv1alpha1.KindGlobalInClusterIPPool:
		ns = ""
	case ipamv1alpha1.KindInClusterIPPool, ipamv1alpha1.KindIPPrefix:
	default:
		return nil, fmt.Errorf("%s is not a pool kind of %s: use %s, %s, %s or %s", vocab.Quote(ref.Kind), ipamv1alpha1.Group,
			ipamv1alpha1.KindInClusterIPPool, ipamv1alpha1.KindGlobalInClusterIPPool, ipamv1alpha1.KindIPPrefix, ipamv1alpha1.KindNetworkInstance)
	}
	for _, o := range objs {
		if o.kind != ref.Kind || o.name != ref.Name || (ns != "" && o.ns != ns) {
			continue
		}
		if o.prefix != nil {
			return translate.ClaimFromPrefix(key, o.prefix), nil
		}
		if o.pool != nil {
			return translate.ClaimAllocation(owner, key, c, ns), nil
		}
		return nil, fmt.Errorf("%s %s cannot be read", ref.Kind, translate.ID(ns, ref.Name))
	}
	return nil, fmt.Errorf("no %s %s in the package", ref.Kind, vocab.Quote(translate.ID(ns, ref.Name)))
}

// pinClaims makes the claims whose IPAddress the package already holds ask
// for exactly that address, unless ipam-server holds it for them already
// (then they repeat what the server has, so that nothing changes): Git
// says what each claim holds, and a fresh server learns it back. It lists
// the owner's allocations once, and only when a claim has an IPAddress.
func pinClaims(ctx context.Context, client ipamv1.IPAMClient, req *ipamv1.SyncRequest, objs []*object) error {
	need := false
	for _, o := range objs {
		need = need || o.claim != nil && o.claim.addr != nil
	}
	if !need {
		return nil
	}
	held := map[string]*ipamv1.AllocationRecord{}
	for token := ""; ; {
		resp, err := client.List(ctx, &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, Owner: req.GetOwner(), PageToken: token})
		if err != nil {
			return err
		}
		for _, obj := range resp.GetObjects() {
			rec := obj.GetAllocation()
			k := rec.GetAllocation().GetKey()
			held[translate.ID(k.GetNamespace(), k.GetName())] = rec
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	for _, o := range objs {
		if o.claim == nil || o.claim.addr == nil {
			continue
		}
		s, _, _ := o.claim.addr.NestedString("spec", "address")
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue // a broken IPAddress is rewritten from the answer
		}
		want := req.Allocations[o.index]
		if rec := held[translate.ID(o.ns, want.GetKey().GetName())]; rec != nil {
			if p, err := netip.ParsePrefix(rec.GetResult().GetPrefix()); err == nil && p.Addr() == a.Unmap() {
				want.Prefix = rec.GetAllocation().GetPrefix()
				continue
			}
		}
		want.Prefix = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()).String()
	}
	return nil
}

// claimOutput is what writeResults makes of a claim's answer: the claim
// with its status, and its IPAddress (new, or the package's updated).
type claimOutput struct {
	claim, addr *fn.KubeObject
	added       bool
}

// writeAnyClaim writes res into copies of claim o, whatever its kind.
func writeAnyClaim(o *object, res *ipamv1.Result) (claimOutput, bool, error) {
	if o.claim.m3 != nil {
		return writeMetal3Claim(o, res)
	}
	return writeClaim(o, res)
}

// writeClaim writes res into copies of claim o and its IPAddress.
func writeClaim(o *object, res *ipamv1.Result) (claimOutput, bool, error) {
	c := o.claim.capi
	spec, err := translate.AddressSpec(c, res)
	if err != nil {
		return claimOutput{}, false, err
	}
	var s setter
	out := claimOutput{claim: o.item.Copy()}
	status := out.claim.UpsertMap("status")
	if err := s.set(status, o.name, "addressRef", "name"); err != nil {
		return claimOutput{}, false, err
	}
	if err := s.conditions(status, []Condition{{Type: capiv1beta2.ConditionReady, Status: "True",
		Reason: capiv1beta2.ReasonReady, Message: "allocated " + res.GetPrefix()}}, false); err != nil {
		return claimOutput{}, false, err
	}
	if o.claim.addr != nil {
		out.addr = o.claim.addr.Copy()
	} else {
		out.addr, out.added, s.changed = newIPAddress(o, capiv1beta2.GroupVersion.String(), capiv1beta2.KindIPAddress, o.ns, o.name), true, true
	}
	a := out.addr
	if err := s.addressSpec(&a.SubObject, []fieldValue{
		{o.name, []string{"spec", "claimRef", "name"}},
		{spec.PoolRef.APIGroup, []string{"spec", "poolRef", "apiGroup"}},
		{spec.PoolRef.Kind, []string{"spec", "poolRef", "kind"}},
		{spec.PoolRef.Name, []string{"spec", "poolRef", "name"}},
		{spec.Address, []string{"spec", "address"}},
	}, int(*spec.Prefix), spec.Gateway); err != nil {
		return claimOutput{}, false, err
	}
	if cluster := clusterName(c); cluster != "" && a.GetLabels()[capicorev1beta2.ClusterNameLabel] != cluster {
		s.changed = true
		if err := a.SetLabel(capicorev1beta2.ClusterNameLabel, cluster); err != nil {
			return claimOutput{}, false, err
		}
	}
	return out, s.changed, nil
}

// clusterName is the Cluster a claim belongs to.
func clusterName(c *capiv1beta2.IPAddressClaim) string {
	if c.Spec.ClusterName != "" {
		return c.Spec.ClusterName
	}
	return c.Labels[capicorev1beta2.ClusterNameLabel]
}

// newIPAddress is an empty object of apiVersion and kind (a Cluster API
// or Metal3 IPAddress), namespace/name, for claim o, in a file of its own
// next to the claim's: ipaddress-<claim>.yaml.
func newIPAddress(o *object, apiVersion, kind, namespace, name string) *fn.KubeObject {
	a := fn.NewEmptyKubeObject()
	_ = a.SetAPIVersion(apiVersion)
	_ = a.SetKind(kind)
	_ = a.SetName(name)
	if namespace != "" {
		_ = a.SetNamespace(namespace)
	}
	file := "ipaddress-" + o.name + ".yaml"
	if p := pathOf(o.item); p != "" {
		file = path.Join(path.Dir(p), file)
	}
	_ = a.SetAnnotation(annotationPath, file)
	_ = a.SetAnnotation(annotationIndex, strconv.Itoa(0))
	return a
}

// staleAddresses are the IPAddresses of the fronts' pools whose claim is
// not in the package any more (Metal3 IPAddresses without a claim stay:
// they take an address out of their pool by hand).
func staleAddresses(items fn.KubeObjects, objs []*object) []*fn.KubeObject {
	claims := map[string]bool{}
	for _, o := range objs {
		if o.claim != nil {
			claims[translate.ID(o.ns, o.name)] = true
		}
	}
	var out []*fn.KubeObject
	for _, it := range items {
		switch {
		case isCAPI(it, capiv1beta2.KindIPAddress):
			group, _, _ := it.NestedString("spec", "poolRef", "apiGroup")
			claim, _, _ := it.NestedString("spec", "claimRef", "name")
			if group == ipamv1alpha1.Group && !claims[translate.ID(it.GetNamespace(), claim)] {
				out = append(out, it)
			}
		case isMetal3(it, metal3v1alpha1.KindIPAddress):
			claim, _, _ := it.NestedString("spec", "claim", "name")
			if claim != "" && !claims[translate.ID(it.GetNamespace(), claim)] {
				out = append(out, it)
			}
		}
	}
	return out
}

// Declared is a server object a package's Cluster API resources declare,
// for audits: its kind as the server names it, its key and the prefix the
// package records for it ("" when the package records none yet).
type Declared struct {
	// Kind is NetworkInstance, IPPrefix or IPAllocation.
	Kind string
	// Namespace and Name are the key under the package's owner.
	Namespace, Name string
	// Prefix is what Git records: a network's prefix, or a claim's
	// IPAddress as address/prefix.
	Prefix string
	// Item is the package object that declares it.
	Item *fn.KubeObject
	// AddressOnly says that only the address of Prefix is what Git
	// records (a Metal3 address: its length is the pool entry's, which
	// ipam-server may not know).
	AddressOnly bool
}

// DeclaredByFronts lists the server objects that the Cluster API and
// Metal3 pools and claims among items declare for owner: each pool's
// network instance and networks (and a Metal3 pool's addresses taken by
// hand), each claim's allocation with the address of its IPAddress.
// Pools and claims that cannot be read are left out (a render reports
// them).
func DeclaredByFronts(owner string, items fn.KubeObjects) []Declared {
	req, objs, _, _ := buildRequest(Options{Owner: owner, NoIdentity: true}, items)
	var out []Declared
	for _, o := range objs {
		switch {
		case o.pool != nil || o.m3pool != nil:
			for _, a := range o.aliases {
				d := Declared{Kind: a.object, Namespace: a.ns, Name: a.name, Item: o.item}
				switch a.object {
				case vocab.ObjRange:
					continue // ranges are not audited
				case vocab.ObjPrefix:
					for _, p := range req.GetPrefixes() {
						if p.GetKey().GetName() == a.name && p.GetKey().GetNamespace() == a.ns {
							d.Prefix = p.GetPrefix()
						}
					}
				case vocab.ObjAllocation: // a Metal3 address taken by hand
					for _, x := range req.GetAllocations() {
						if x.GetKey().GetName() == a.name && x.GetKey().GetNamespace() == a.ns {
							d.Prefix, d.AddressOnly = x.GetPrefix(), true
						}
					}
				}
				out = append(out, d)
			}
		case o.nres != nil:
			out = append(out, o.declaredNephio(req)...)
		case o.claim != nil && len(o.aliases) > 0:
			d := Declared{Kind: vocab.ObjAllocation, Namespace: o.ns, Name: o.aliases[0].name, Item: o.item, AddressOnly: o.claim.m3 != nil}
			if a := o.claim.addr; a != nil {
				addr, _, _ := a.NestedString("spec", "address")
				bits, found, _ := a.NestedInt64("spec", "prefix")
				if found || d.AddressOnly {
					d.Prefix = addr + "/" + strconv.FormatInt(bits, 10)
				}
			}
			out = append(out, d)
		}
	}
	return out
}
