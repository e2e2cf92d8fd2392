package ipam

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
)

// nsName is the part of a Key that is unique within one owner.
type nsName struct{ ns, name string }

func nsn(k Key) nsName { return nsName{k.Namespace, k.Name} }

func validKind(k Kind) bool {
	switch k {
	case KindAggregate, KindNetwork, KindPool, KindLoopback:
		return true
	}
	return false
}

// checkPrefixValue rejects prefixes the core cannot place.
func checkPrefixValue(p netip.Prefix, obj string, key Key, field string) error {
	if !p.IsValid() {
		return errf(ErrInvalid, obj, key, field, "a prefix such as 10.0.1.0/24 is required")
	}
	if p.Addr().Is4In6() {
		return errf(ErrInvalid, obj, key, field, "IPv4-mapped IPv6 prefix %s is not supported; write the IPv4 prefix", p)
	}
	return nil
}

// normalizePrefix validates an IPPrefix and fills defaults.
func normalizePrefix(p Prefix) (Prefix, error) {
	if p.Key.Name == "" {
		return p, errf(ErrInvalid, ObjPrefix, p.Key, "metadata.name", "a name is required")
	}
	if p.NetworkInstance == "" {
		return p, errf(ErrInvalid, ObjPrefix, p.Key, "spec.networkInstance", "a network instance is required")
	}
	if p.Kind == "" {
		p.Kind = KindNetwork
	}
	if !validKind(p.Kind) {
		return p, errf(ErrInvalid, ObjPrefix, p.Key, "spec.kind", "unknown kind %s (one of aggregate, network, pool, loopback)", Quote(string(p.Kind)))
	}
	if err := checkPrefixValue(p.Prefix, ObjPrefix, p.Key, "spec.prefix"); err != nil {
		return p, err
	}
	canon := p.Prefix.Masked()
	if p.Kind != KindNetwork && canon != p.Prefix {
		return p, errf(ErrInvalid, ObjPrefix, p.Key, "spec.prefix", "%s has host bits set; a %s is written %s", p.Prefix, p.Kind, canon)
	}
	if p.Labels[LabelGateway] == "true" && (p.Kind != KindNetwork || canon == p.Prefix) {
		return p, errf(ErrInvalid, ObjPrefix, p.Key, "metadata.labels", "%s=true needs a network prefix with a host address, e.g. %s",
			LabelGateway, netip.PrefixFrom(addOffset(canon.Addr(), 1), canon.Bits()))
	}
	if len(p.Exclusions) > 0 && p.Kind != KindNetwork {
		return p, errf(ErrInvalid, ObjPrefix, p.Key, "spec.exclusions", "only network prefixes have exclusions")
	}
	if p.AllocateReserved && p.Kind != KindNetwork {
		return p, errf(ErrInvalid, ObjPrefix, p.Key, "spec.allocateReserved", "only network prefixes reserve addresses")
	}
	if p.GatewayInBlocks && p.Kind != KindNetwork {
		return p, errf(ErrInvalid, ObjPrefix, p.Key, "spec.gatewayInBlocks", "only network prefixes have a gateway")
	}
	return p, nil
}

// samePrefixNode reports whether a and b declare the same prefix, gateway
// and all, whatever their exclusions and labels.
func samePrefixNode(a, b Prefix) bool {
	return a.NetworkInstance == b.NetworkInstance && a.Kind == b.Kind && a.Prefix == b.Prefix &&
		a.Network == b.Network && a.Labels[LabelGateway] == b.Labels[LabelGateway]
}

func prefixEqual(a, b Prefix) bool {
	return samePrefixNode(a, b) && slices.Equal(a.Exclusions, b.Exclusions) && maps.Equal(a.Labels, b.Labels) &&
		a.AllocateReserved == b.AllocateReserved && a.GatewayInBlocks == b.GatewayInBlocks
}

// putPrefix creates or updates an IPPrefix of its owner.
func (t *tx) putPrefix(os *ownerState, spec Prefix) (Result, error) {
	if !t.replay {
		if err := checkPrefixText(spec); err != nil {
			return Result{}, err
		}
	}
	spec, err := normalizePrefix(spec)
	if err != nil {
		return Result{}, err
	}
	spec = *clonePrefix(spec)
	old := os.prefixes[nsn(spec.Key)]
	if t.authz != nil {
		from := ""
		if old != nil {
			from = old.v.name
		}
		if err := t.authorizeMove(os, from, spec.NetworkInstance, ObjPrefix, spec.Key); err != nil {
			return Result{}, err
		}
	}
	v, err := t.vrf(spec.NetworkInstance, ObjPrefix, spec.Key, "spec.networkInstance")
	if err != nil {
		return Result{}, err
	}
	if old != nil {
		if prefixEqual(old.spec, spec) {
			return old.result(), nil
		}
		if samePrefixNode(old.spec, spec) {
			// Labels and exclusions change in place, while the prefix
			// holds allocations: a new exclusion must be free.
			if !slices.Equal(old.spec.Exclusions, spec.Exclusions) {
				n := old.node
				t.removeExclusions(n, old)
				if err := t.addExclusions(n, spec.Exclusions, old, ObjPrefix, spec.Key, "spec.exclusions"); err != nil {
					return Result{}, err
				}
			}
			if err := t.optIn(old.node, old.spec, spec, ObjPrefix, spec.Key); err != nil {
				return Result{}, err
			}
			if err := t.relabelPrefix(old, spec); err != nil {
				return Result{}, err
			}
			t.record(Record{Op: OpPutPrefix, Key: spec.Key, Prefix: &spec})
			return old.result(), nil
		}
		if err := t.deletePrefixObj(old, ObjPrefix, spec.Key); err != nil {
			return Result{}, err
		}
		t.setOwned(os.prefixes, nsn(spec.Key), nil)
	}
	obj, err := t.addPrefixObj(v, spec, nil, ObjPrefix, spec.Key, "spec.prefix")
	if err != nil {
		return Result{}, err
	}
	t.setOwned(os.prefixes, nsn(spec.Key), obj)
	t.record(Record{Op: OpPutPrefix, Key: spec.Key, Prefix: &spec})
	return obj.result(), nil
}

// deletePrefix deletes an IPPrefix of its owner.
func (t *tx) deletePrefix(os *ownerState, key Key) error {
	obj := os.prefixes[nsn(key)]
	if obj == nil {
		return errf(ErrNotFound, ObjPrefix, key, "", "not found")
	}
	if err := t.authorize(os, obj.v.name, ObjPrefix, key, ""); err != nil {
		return err
	}
	if err := t.deletePrefixObj(obj, ObjPrefix, key); err != nil {
		return err
	}
	t.setOwned(os.prefixes, nsn(key), nil)
	t.record(Record{Op: OpDeletePrefix, Key: key})
	return nil
}

// setOwned sets or (with a nil value) deletes an owner map entry.
func setOwned[V comparable](m map[nsName]V, k nsName, val V) {
	var zero V
	if val == zero {
		delete(m, k)
	} else {
		m[k] = val
	}
}

func (t *tx) setOwned(m map[nsName]*prefixObj, k nsName, val *prefixObj) {
	old := m[k]
	setOwned(m, k, val)
	t.onUndo(func() { setOwned(m, k, old) })
}

func (o *prefixObj) result() Result {
	r := Result{NetworkInstance: o.v.name, Prefix: o.spec.Prefix}
	if o.node != nil && o.node.kind == KindNetwork {
		r.Gateway = o.node.gateway
	}
	return r
}

// addPrefixObj places a prefix (placePrefixObj) and counts its opt-in to
// allocating its network's reserved addresses.
func (t *tx) addPrefixObj(v *vrf, spec Prefix, ni *niObj, obj string, key Key, field string) (*prefixObj, error) {
	o, err := t.placePrefixObj(v, spec, ni, obj, key, field)
	if err != nil {
		return o, err
	}
	return o, t.optIn(o.node, Prefix{}, spec, obj, key)
}

// optIn counts the change of the network options of a prefix of n from
// old to spec: allocating the reserved addresses, and blocks that contain
// the gateway.
func (t *tx) optIn(n *node, old, spec Prefix, obj string, key Key) error {
	if d := b2i(spec.AllocateReserved) - b2i(old.AllocateReserved); d != 0 {
		if err := t.optInReserved(n, d, obj, key); err != nil {
			return err
		}
	}
	if d := b2i(spec.GatewayInBlocks) - b2i(old.GatewayInBlocks); d != 0 {
		return t.optInGatewayBlocks(n, d, obj, key)
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// optInGatewayBlocks adds d to the prefixes of n that let blocks contain
// its gateway. When the last one goes, no block may contain it.
func (t *tx) optInGatewayBlocks(n *node, d int, obj string, key Key) error {
	// The offset a block (any count above 1) may share with the gateway;
	// nothing but a block holds it besides the gateway.
	if g, ok := n.blockGateway(2); ok && n.gwBlocks+d == 0 {
		if a, held := n.v.plainHolder(n, g); held {
			return errf(ErrInUse, obj, key, "spec.gatewayInBlocks", "the block %s-%s of %s contains the gateway %s",
				addOffset(n.prefix.Addr(), a.off), addOffset(n.prefix.Addr(), a.off+a.count()-1), objName(ObjAllocation, a.key()), n.gateway)
		}
	}
	old := n.gwBlocks
	n.gwBlocks += d
	t.onUndo(func() { n.gwBlocks = old })
	return nil
}

// optInReserved adds d to the prefixes of n that opt in to allocating its
// reserved addresses, and reserves accordingly (syncReserved).
func (t *tx) optInReserved(n *node, d int, obj string, key Key) error {
	old := n.optIn
	n.optIn += d
	t.onUndo(func() { n.optIn = old })
	return t.syncReserved(n, obj, key, "spec.allocateReserved")
}

// syncReserved makes n reserve what rule 3 reserves but for the offsets
// it allocates on request: all while a prefix of n opts in, else those
// inside ranges that opt in. An offset reserved again must be free (or
// excluded); else the error names its holder on field of obj key.
func (t *tx) syncReserved(n *node, obj string, key Key, field string) error {
	if n.kind != KindNetwork {
		return nil
	}
	var want []uint64
	if n.optIn == 0 {
		for _, off := range ruleThreeOffsets(n.prefix) {
			if g := n.rangeAt(off); g == nil || !g.obj.spec.AllocateReserved {
				want = append(want, off)
			}
		}
	}
	if slices.Equal(want, n.reserved) {
		return nil
	}
	for _, off := range want {
		if !n.isReserved(off) && n.addrs.Has(off) && n.excludedAt(off) == nil {
			return errf(ErrInUse, obj, key, field, "%s must be reserved again but is held by %s",
				addOffset(n.prefix.Addr(), off), n.describeHolder(off))
		}
	}
	old := n.reserved
	set := func(from, to []uint64) {
		for _, off := range from {
			if !slices.Contains(to, off) && n.excludedAt(off) == nil {
				n.addrs.Remove(off)
			}
		}
		for _, off := range to {
			n.addrs.Add(off)
		}
		n.reserved = to
	}
	set(old, want)
	t.onUndo(func() { set(want, old) })
	return nil
}

// placePrefixObj places a prefix: a node of its kind, or for a network
// with a host part a static address in its (possibly new) subnet.
func (t *tx) placePrefixObj(v *vrf, spec Prefix, ni *niObj, obj string, key Key, field string) (*prefixObj, error) {
	o := &prefixObj{spec: spec, v: v, ni: ni}
	canon := spec.Prefix.Masked()
	hb := hostBits(canon.Addr())
	hasHost := spec.Prefix.Addr() != canon.Addr()

	// A host-length prefix inside a network or loopback of its kind is a
	// static address of that prefix.
	if !hasHost && canon.Bits() == hb {
		if n := v.bitmapNodeFor(canon.Addr()); n != nil && n.kind == spec.Kind {
			return o, t.addHost(o, n, canon.Addr(), obj, key, field)
		}
	}
	if !hasHost {
		if n := v.nodes[canon]; n != nil && spec.Kind == KindNetwork && n.kind == KindNetwork && n.decl == nil && n.alloc == nil {
			// An implicit subnet (made by host-part prefixes) gets its declarer.
			if err := t.adoptSubnet(o, n, obj, key); err != nil {
				return nil, err
			}
			return o, t.addExclusions(n, spec.Exclusions, o, obj, key, "spec.exclusions")
		}
		n, err := t.insertNode(v, canon, spec.Kind, spec.Network, spec.Labels, obj, key)
		if err != nil {
			return nil, withField(err, field)
		}
		o.node = n
		t.setDecl(n, o)
		return o, t.addExclusions(n, spec.Exclusions, o, obj, key, "spec.exclusions")
	}

	// Network prefix with a host part: the subnet plus a static address.
	n := v.nodes[canon]
	if n == nil {
		var err error
		if n, err = t.insertNode(v, canon, KindNetwork, spec.Network, nil, obj, key); err != nil {
			return nil, withField(err, field)
		}
	} else if n.kind != KindNetwork {
		return nil, errf(ErrConflict, obj, key, field, "%s is a %s (%s), not a network", canon, n.kind, n.describe())
	}
	if err := t.addHost(o, n, spec.Prefix.Addr(), obj, key, field); err != nil {
		return nil, err
	}
	return o, t.addExclusions(n, spec.Exclusions, o, obj, key, "spec.exclusions")
}

// withField retargets the field of an *Error built by a shared primitive.
func withField(err error, field string) error {
	if e, ok := err.(*Error); ok && e.Field == "spec.prefix" && field != "spec.prefix" {
		c := *e
		c.Field = field
		return &c
	}
	return err
}

func (t *tx) setDecl(n *node, o *prefixObj) {
	old := n.decl
	n.decl = o
	t.onUndo(func() { n.decl = old })
}

// adoptSubnet makes o the declarer of the implicit subnet n.
func (t *tx) adoptSubnet(o *prefixObj, n *node, obj string, key Key) error {
	if err := t.reconcileNetworkName(n, o.spec.Network, obj, key); err != nil {
		return err
	}
	labels, bad := mergeLabels(systemLabels(n.v.name, n.kind, familyOf(n.prefix.Addr()), n.prefix.Bits(), n.network), o.spec.Labels)
	if bad != "" {
		return errf(ErrInvalid, obj, key, "metadata.labels", "label %s=%q contradicts the system label", bad, o.spec.Labels[bad])
	}
	t.relabel(n.v, n.entry, labels)
	oldUser := n.userLabels
	n.userLabels = o.spec.Labels
	t.onUndo(func() { n.userLabels = oldUser })
	o.node = n
	t.setDecl(n, o)
	return nil
}

// reconcileNetworkName checks that every prefix of a subnet names the same
// network, and fills the subnet's name from the first that names one.
func (t *tx) reconcileNetworkName(n *node, network string, obj string, key Key) error {
	if network == "" || network == n.network {
		return nil
	}
	if n.network != "" {
		return errf(ErrConflict, obj, key, "spec.network", "%q differs from network %q of %s (%s)", network, n.network, n.prefix, n.describe())
	}
	old := n.network
	n.network = network
	t.onUndo(func() { n.network = old })
	labels, _ := mergeLabels(systemLabels(n.v.name, n.kind, familyOf(n.prefix.Addr()), n.prefix.Bits(), network), n.userLabels)
	t.relabel(n.v, n.entry, labels)
	return nil
}

// addHost records the static address a of o in the network or loopback n.
func (t *tx) addHost(o *prefixObj, n *node, a netip.Addr, obj string, key Key, field string) error {
	if err := t.reconcileNetworkName(n, o.spec.Network, obj, key); err != nil {
		return err
	}
	off, ok := offsetOf(n.prefix.Addr(), a)
	if !ok || off > n.addrs.Last() {
		return errf(ErrInvalid, obj, key, field, "%s lies beyond the first 2^64 addresses of %s", a, n.prefix)
	}
	if n.addrs.Has(off) {
		switch {
		case n.isReserved(off) && off == 0:
			return errf(ErrInvalid, obj, key, field, "%s is the network address of %s, which is reserved (rule 3)", a, n.prefix)
		case n.isReserved(off):
			return errf(ErrInvalid, obj, key, field, "%s is the last address of %s, which is reserved (rule 3)", a, n.prefix)
		}
		return errf(ErrConflict, obj, key, field, "%s is already held by %s", a, n.describeHolder(off))
	}
	gw := o.spec.Labels[LabelGateway] == "true"
	if gw && n.gateway.IsValid() && n.gateway != a {
		return errf(ErrConflict, obj, key, "metadata.labels", "%s already has gateway %s", n.prefix, n.gateway)
	}
	hb := hostBits(a)
	labels, bad := mergeLabels(systemLabels(n.v.name, n.kind, familyOf(a), hb, n.network), o.spec.Labels)
	if bad != "" {
		return errf(ErrInvalid, obj, key, "metadata.labels", "label %s=%q contradicts the system label", bad, o.spec.Labels[bad])
	}
	h := &hostEntry{obj: o, node: n, off: off, addr: a}
	h.entry = &entry{order: orderKey{pfx: netip.PrefixFrom(a, hb), rank: 2}, labels: labels, host: h}
	t.hold(n, off, 1, h)
	t.indexEntry(n.v, h.entry)
	if gw {
		t.setGateway(n, a)
	}
	if n.refs == nil {
		n.refs = make(map[*prefixObj]struct{})
	}
	n.refs[o] = struct{}{}
	t.onUndo(func() { delete(n.refs, o) })
	o.node, o.host = n, h
	return nil
}

func (t *tx) setGateway(n *node, a netip.Addr) {
	old := n.gateway
	n.gateway = a
	t.onUndo(func() { n.gateway = old })
}

// relabelPrefix changes only the labels of a placed prefix.
func (t *tx) relabelPrefix(o *prefixObj, spec Prefix) error {
	e := o.node.entry
	sys := systemLabels(o.v.name, o.node.kind, familyOf(o.node.prefix.Addr()), o.node.prefix.Bits(), o.node.network)
	if o.host != nil {
		e = o.host.entry
		sys = systemLabels(o.v.name, o.node.kind, familyOf(o.host.addr), hostBits(o.host.addr), o.node.network)
	}
	labels, bad := mergeLabels(sys, spec.Labels)
	if bad != "" {
		return errf(ErrInvalid, ObjPrefix, spec.Key, "metadata.labels", "label %s=%q contradicts the system label", bad, spec.Labels[bad])
	}
	t.relabel(o.v, e, labels)
	if o.host == nil {
		old := o.node.userLabels
		o.node.userLabels = spec.Labels
		t.onUndo(func() { o.node.userLabels = old })
	}
	old := o.spec
	o.spec = spec
	t.onUndo(func() { o.spec = old })
	return nil
}

// deletePrefixObj removes what addPrefixObj placed.
func (t *tx) deletePrefixObj(o *prefixObj, obj string, key Key) error {
	n := o.node
	if err := t.optIn(n, o.spec, Prefix{}, obj, key); err != nil {
		return err
	}
	if n.isBitmap() {
		t.removeExclusions(n, o)
	}
	if h := o.host; h != nil {
		if h.claim != nil {
			return errf(ErrInUse, obj, key, "", "address %s is allocated to %s", h.addr, objName(ObjAllocation, h.claim.req.Key))
		}
		if n.gateway == h.addr {
			if users := n.gatewayUsers(); users > 0 {
				return errf(ErrInUse, obj, key, "", "gateway %s of %s is still the gateway of %d allocation(s)", h.addr, n.prefix, users)
			}
			t.setGateway(n, netip.Addr{})
		}
		t.unindexEntry(n.v, h.entry)
		t.unhold(n, h.off, 1)
		delete(n.refs, o)
		t.onUndo(func() { n.refs[o] = struct{}{} })
		if len(n.refs) > 0 || n.decl != nil || n.alloc != nil {
			return nil
		}
		return t.removeNode(n, obj, key)
	}
	if len(n.refs) > 0 {
		// The subnet stays for its static addresses; it loses its declarer.
		t.setDecl(n, nil)
		labels, _ := mergeLabels(systemLabels(n.v.name, n.kind, familyOf(n.prefix.Addr()), n.prefix.Bits(), n.network), nil)
		t.relabel(n.v, n.entry, labels)
		old := n.userLabels
		n.userLabels = nil
		t.onUndo(func() { n.userLabels = old })
		return nil
	}
	if err := t.removeNode(n, obj, key); err != nil {
		return err
	}
	t.setDecl(n, nil)
	return nil
}

// gatewayUsers counts the allocations of n that are given n's gateway:
// all but those of ranges with a gateway of their own.
func (n *node) gatewayUsers() int {
	if !slices.ContainsFunc(n.ranges, func(g *ipRange) bool { return g.obj.spec.Gateway.IsValid() }) {
		return n.allocationCount()
	}
	own := func(off uint64) bool {
		g := n.rangeAt(off)
		return g != nil && g.obj.spec.Gateway.IsValid()
	}
	c := n.allocationCount()
	for _, tb := range n.v.tables {
		for i := range tb.Len() {
			if r := tb.At(i); r.node == n && own(r.off) {
				c--
			}
		}
	}
	for off, h := range n.holders {
		if p, ok := h.(*preAlloc); ok && p.claim != nil && own(off) {
			c--
		}
	}
	return c
}

// allocationCount counts the allocations holding addresses of n.
func (n *node) allocationCount() int {
	c := n.plain
	for _, h := range n.holders {
		switch h := h.(type) {
		case *hostEntry:
			if h.claim != nil {
				c++
			}
		case *preAlloc:
			if h.claim != nil {
				c++
			}
		}
	}
	return c
}

// --- network instances -----------------------------------------------------

func normalizeNI(ni NetworkInstance) (NetworkInstance, error) {
	if ni.Key.Name == "" {
		return ni, errf(ErrInvalid, ObjNetworkInstance, ni.Key, "metadata.name", "a name is required")
	}
	seen := make(map[netip.Prefix]bool)
	for i, p := range ni.Prefixes {
		f := fmt.Sprintf("spec.prefixes[%d].prefix", i)
		if err := checkPrefixValue(p.Prefix, ObjNetworkInstance, ni.Key, f); err != nil {
			return ni, err
		}
		if p.Prefix.Masked() != p.Prefix {
			return ni, errf(ErrInvalid, ObjNetworkInstance, ni.Key, f, "%s has host bits set; an aggregate is written %s", p.Prefix, p.Prefix.Masked())
		}
		if seen[p.Prefix] {
			return ni, errf(ErrInvalid, ObjNetworkInstance, ni.Key, f, "%s is listed twice", p.Prefix)
		}
		seen[p.Prefix] = true
	}
	return ni, nil
}

func niEqual(a, b NetworkInstance) bool {
	return a.Key == b.Key && maps.Equal(a.Labels, b.Labels) && slices.EqualFunc(a.Prefixes, b.Prefixes, func(x, y VRFPrefix) bool {
		return x.Prefix == y.Prefix && maps.Equal(x.Labels, y.Labels)
	})
}

// putNI creates or updates a network instance; the caller holds the
// allocator's exclusive lock.
func (t *tx) putNI(spec NetworkInstance) error {
	if !t.replay {
		if err := checkNIText(spec); err != nil {
			return err
		}
	}
	spec, err := normalizeNI(spec)
	if err != nil {
		return err
	}
	spec = cloneNI(spec)
	a := t.a
	v := a.vrfs[spec.Key.Name]
	if v != nil && v.ni.spec.Key != spec.Key {
		return errf(ErrConflict, ObjNetworkInstance, spec.Key, "metadata.name", "network instance %q is already declared by owner %q as %s", spec.Key.Name, v.ni.spec.Key.Owner, v.ni.spec.Key)
	}
	if v != nil && niEqual(v.ni.spec, spec) {
		return nil
	}
	var o *niObj
	if v == nil {
		v = newVRF(spec.Key.Name)
		o = &niObj{v: v}
		v.ni = o
		a.vrfs[v.name] = v
		t.onUndo(func() { delete(a.vrfs, v.name) })
	} else {
		o = v.ni
	}
	oldSpec, oldAggs := o.spec, o.aggs
	t.onUndo(func() { o.spec, o.aggs = oldSpec, oldAggs })
	want := make(map[netip.Prefix]VRFPrefix, len(spec.Prefixes))
	for _, p := range spec.Prefixes {
		want[p.Prefix] = p
	}
	var aggs []*prefixObj
	for _, agg := range oldAggs {
		if w, ok := want[agg.spec.Prefix]; ok {
			if !maps.Equal(w.Labels, agg.spec.Labels) {
				if err := t.relabelPrefix(agg, Prefix{Key: agg.spec.Key, NetworkInstance: v.name, Kind: KindAggregate, Prefix: w.Prefix, Labels: w.Labels}); err != nil {
					return err
				}
			}
			aggs = append(aggs, agg)
			delete(want, agg.spec.Prefix)
			continue
		}
		if err := t.deletePrefixObj(agg, ObjNetworkInstance, spec.Key); err != nil {
			return err
		}
	}
	for i, p := range spec.Prefixes {
		if _, ok := want[p.Prefix]; !ok {
			continue
		}
		ps := Prefix{Key: spec.Key, NetworkInstance: v.name, Kind: KindAggregate, Prefix: p.Prefix, Labels: p.Labels}
		agg, err := t.addPrefixObj(v, ps, o, ObjNetworkInstance, spec.Key, fmt.Sprintf("spec.prefixes[%d].prefix", i))
		if err != nil {
			return err
		}
		aggs = append(aggs, agg)
	}
	o.spec, o.aggs = spec, aggs
	t.record(Record{Op: OpPutNetworkInstance, Key: spec.Key, NetworkInstance: &spec})
	return nil
}

// putNIOf puts a network instance of the owner os.
func (t *tx) putNIOf(os *ownerState, spec NetworkInstance) error {
	if err := t.authorize(os, spec.Key.Name, ObjNetworkInstance, spec.Key, "metadata.name"); err != nil {
		return err
	}
	if err := t.putNI(spec); err != nil {
		return err
	}
	v := t.a.vrfs[spec.Key.Name]
	old := os.nis[v.name]
	os.nis[v.name] = v.ni
	t.onUndo(func() { setOwnedNI(os.nis, v.name, old) })
	return nil
}

// deleteNIOf deletes a network instance of the owner os.
func (t *tx) deleteNIOf(os *ownerState, key Key) error {
	if err := t.authorize(os, key.Name, ObjNetworkInstance, key, ""); err != nil {
		return err
	}
	if err := t.deleteNI(key); err != nil {
		return err
	}
	old := os.nis[key.Name]
	delete(os.nis, key.Name)
	t.onUndo(func() { setOwnedNI(os.nis, key.Name, old) })
	return nil
}

func setOwnedNI(m map[string]*niObj, k string, o *niObj) {
	if o == nil {
		delete(m, k)
	} else {
		m[k] = o
	}
}

// deleteNI deletes a network instance that holds nothing but its own
// empty aggregates; the caller holds the allocator's exclusive lock.
func (t *tx) deleteNI(key Key) error {
	a := t.a
	v := a.vrfs[key.Name]
	if v == nil || v.ni.spec.Key != key {
		return errf(ErrNotFound, ObjNetworkInstance, key, "", "not found")
	}
	for _, agg := range v.ni.aggs {
		if err := t.deletePrefixObj(agg, ObjNetworkInstance, key); err != nil {
			return err
		}
	}
	if len(v.nodes) > 0 {
		var left []string
		for p, n := range v.nodes {
			left = append(left, p.String()+" ("+n.describe()+")")
		}
		slices.Sort(left)
		return errf(ErrInUse, ObjNetworkInstance, key, "", "network instance %s still holds %d prefix(es): %v", key.Name, len(left), left)
	}
	delete(a.vrfs, key.Name)
	t.onUndo(func() { a.vrfs[key.Name] = v })
	t.record(Record{Op: OpDeleteNetworkInstance, Key: key})
	return nil
}
