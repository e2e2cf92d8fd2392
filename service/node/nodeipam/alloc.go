package nodeipam

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nephio-project/ipam/service/ipam"
)

// Limits of a request, checked before anything else.
const (
	// MaxPools is the number of pools one call may name (dual stack).
	MaxPools = 2
	// MaxContainerIDLength bounds a container id (runtimes use 64).
	MaxContainerIDLength = 200
	// MaxIfNameLength is Linux's limit on an interface name (IFNAMSIZ-1).
	MaxIfNameLength = 15
	// MaxPodNameLength bounds a pod name (a DNS-1123 subdomain).
	MaxPodNameLength = 253
	// MaxMetaLength bounds a pod namespace, UID and device id.
	MaxMetaLength = 63
	// MaxIPWithIndex bounds allocate_ip_with_index.
	MaxIPWithIndex = 1<<31 - 1
)

// Pod names the pod of an allocation: its name, namespace and UID, and
// the PCI device of the interface when there is one.
type Pod struct {
	Name, Namespace, UID, DeviceID string
}

// Request is one call of the node API.
type Request struct {
	// Type says whether Pools name IPPools or CIDRPools.
	Type PoolType
	// Pools are one or two pool names.
	Pools []string
	// ContainerID and IfName are the container's interface.
	ContainerID string
	IfName      string
	// Pod is kept with the allocation (the cleanup reads it).
	Pod Pod
	// RequestedIPs are addresses asked for exactly, one per pool at most.
	RequestedIPs []string
	// AllocateDefaultGateway asks for the pool's gateway itself.
	AllocateDefaultGateway bool
	// IPWithIndex asks for the address at that offset from the block's
	// first address.
	IPWithIndex *int32
}

// Result is one address handed out.
type Result struct {
	// Pool and Type name the pool.
	Pool string
	Type PoolType
	// IP is the address with the length of its network.
	IP netip.Prefix
	// Gateway is the block's gateway; invalid for the gateway itself or a
	// pool without one.
	Gateway netip.Addr
	// Routes are given with a gateway only.
	Routes []netip.Prefix
}

// invalid is the error of a malformed field.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", field, fmt.Sprintf(format, args...), ipam.ErrInvalid)
}

// checkText bounds and checks a string field; empty passes.
func checkText(field, s string, max int) error {
	if len(s) > max {
		return invalid(field, "%d bytes exceed the limit of %d", len(s), max)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return invalid(field, "%s holds a control or invalid character", ipam.Quote(s))
		}
	}
	return nil
}

// Validate checks every field of a request as an attacker could send it:
// each error wraps ipam.ErrInvalid and names the field.
func (r *Request) Validate() error {
	if err := checkPools("parameters.", r.Type, r.Pools); err != nil {
		return err
	}
	if err := checkContainerID("parameters.cni_containerid", r.ContainerID); err != nil {
		return err
	}
	if err := checkIfName("parameters.cni_ifname", r.IfName); err != nil {
		return err
	}
	for _, c := range []struct {
		f, s string
		max  int
	}{{"parameters.metadata.k8s_pod_name", r.Pod.Name, MaxPodNameLength}, {"parameters.metadata.k8s_pod_namespace", r.Pod.Namespace, MaxMetaLength},
		{"parameters.metadata.k8s_pod_uid", r.Pod.UID, MaxMetaLength}, {"parameters.metadata.device_id", r.Pod.DeviceID, MaxMetaLength}} {
		if err := checkText(c.f, c.s, c.max); err != nil {
			return err
		}
	}
	if len(r.RequestedIPs) > len(r.Pools) {
		return invalid("parameters.requested_ips", "%d addresses for %d pools", len(r.RequestedIPs), len(r.Pools))
	}
	for i, s := range r.RequestedIPs {
		f := "parameters.requested_ips[" + strconv.Itoa(i) + "]"
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return invalid(f, "%s is not an IP address", ipam.Quote(s))
		}
		for _, o := range r.RequestedIPs[:i] {
			if b, _ := netip.ParseAddr(o); b.Unmap() == a.Unmap() {
				return invalid(f, "%s is requested twice", a)
			}
		}
	}
	if r.IPWithIndex != nil && *r.IPWithIndex < 0 {
		return invalid("parameters.features.allocate_ip_with_index", "%d is negative", *r.IPWithIndex)
	}
	return nil
}

// checkPools checks a pool type and one or two pool names, the fields
// named after prefix ("parameters.").
func checkPools(prefix string, t PoolType, pools []string) error {
	switch t {
	case IPPool, CIDRPool:
	default:
		return invalid(prefix+"pool_type", "%s is not a pool type", ipam.Quote(string(t)))
	}
	if len(pools) == 0 {
		return invalid(prefix+"pools", "at least one pool is required")
	}
	if len(pools) > MaxPools {
		return invalid(prefix+"pools", "%d pools; at most %d", len(pools), MaxPools)
	}
	for i, p := range pools {
		f := prefix + "pools[" + strconv.Itoa(i) + "]"
		if p == "" {
			return invalid(f, "a pool name is required")
		}
		if err := checkText(f, p, ipam.MaxNameLength); err != nil {
			return err
		}
		if slices.Contains(pools[:i], p) {
			return invalid(f, "%s is named twice", ipam.Quote(p))
		}
	}
	return nil
}

// checkContainerID checks container id s of field f.
func checkContainerID(f, s string) error {
	if s == "" {
		return invalid(f, "a container id is required")
	}
	if len(s) > MaxContainerIDLength {
		return invalid(f, "%d bytes exceed the limit of %d", len(s), MaxContainerIDLength)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '-' && c != '_' && c != '.') {
			return invalid(f, "%s: letters, digits, '-', '_' and '.' only, starting with a letter or digit", ipam.Quote(s))
		}
	}
	return nil
}

// checkIfName checks interface name s of field f.
func checkIfName(f, s string) error {
	switch {
	case s == "":
		return invalid(f, "an interface name is required")
	case len(s) > MaxIfNameLength:
		return invalid(f, "%s: %d bytes exceed the limit of %d", ipam.Quote(s), len(s), MaxIfNameLength)
	case s == "." || s == "..":
		return invalid(f, "%s is not an interface name", ipam.Quote(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == '/' || c == ':' || c >= 0x7f {
			return invalid(f, "%s holds a character an interface name may not", ipam.Quote(s))
		}
	}
	return nil
}

// ownerOf is the core's owner of a container's interface: the interface
// name first (it holds no '/'), so the owner splits back unambiguously.
func ownerOf(cid, ifname string) string { return ifname + "/" + cid }

func splitOwner(o string) (cid, ifname string, ok bool) {
	ifname, cid, ok = strings.Cut(o, "/")
	return cid, ifname, ok
}

func allocKey(owner string, k PoolKey) ipam.Key {
	return ipam.Key{Owner: owner, Namespace: string(k.Type), Name: k.Name}
}

var seed = maphash.MakeSeed()

func (e *Engine) lockOwner(owner string) func() {
	m := &e.stripes[maphash.String(seed, owner)%uint64(len(e.stripes))]
	m.Lock()
	return m.Unlock
}

// lockPools looks the pools of r up and locks them in name order (for
// writing when write says so). A pool the engine does not know is nil.
func (e *Engine) lockPools(r *Request, write func(*pool) bool) ([]*pool, func()) {
	ps := make([]*pool, len(r.Pools))
	for i, name := range r.Pools {
		ps[i] = e.pool(PoolKey{Type: r.Type, Name: name})
	}
	order := slices.Clone(ps)
	order = slices.DeleteFunc(order, func(p *pool) bool { return p == nil })
	slices.SortFunc(order, func(a, b *pool) int { return cmp.Compare(a.key.Name, b.key.Name) })
	excl := make([]bool, len(order))
	for i, p := range order {
		// write reads the pool's state: under the read lock, then the
		// write lock is taken instead when it asks for it.
		p.mu.RLock()
		if write != nil && write(p) {
			p.mu.RUnlock()
			p.mu.Lock()
			excl[i] = true
		}
	}
	return ps, func() {
		for i, p := range order {
			if excl[i] {
				p.mu.Unlock()
			} else {
				p.mu.RUnlock()
			}
		}
	}
}

// Allocate hands out an address of the node's block in every pool named,
// durably (the answer comes after the fsync), all or nothing. The same
// call again answers the same addresses.
func (e *Engine) Allocate(ctx context.Context, r *Request) ([]Result, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	owner := ownerOf(r.ContainerID, r.IfName)
	defer e.lockOwner(owner)()
	ps, unlock := e.lockPools(r, nil)
	defer unlock()
	for i, p := range ps {
		switch {
		case p == nil || p.block == nil:
			return nil, fmt.Errorf("%s: this node holds no block of the pool: %w", PoolKey{r.Type, r.Pools[i]}, ipam.ErrNotFound)
		case p.invalid != nil:
			return nil, fmt.Errorf("%s: the pool is not usable: %w: %w", p.key, p.invalid, ipam.ErrNotFound)
		case p.blocked != nil:
			return nil, fmt.Errorf("%w: %w", p.blocked, ipam.ErrUnavailable)
		}
	}
	// Each requested address goes to the pool whose network holds it.
	reqIP := make([]netip.Addr, len(ps))
	for i, s := range r.RequestedIPs {
		a := netip.MustParseAddr(s).Unmap() // validated
		found := false
		for j, p := range ps {
			if p.block.Network.Contains(a) && !reqIP[j].IsValid() {
				reqIP[j], found = a, true
				break
			}
		}
		if !found {
			return nil, invalid("parameters.requested_ips["+strconv.Itoa(i)+"]", "%s is in none of the pools' networks on this node", a)
		}
	}
	allocs := make([]ipam.Allocation, len(ps))
	for i, p := range ps {
		a, err := e.request(p, owner, r, reqIP[i])
		if err != nil {
			return nil, err
		}
		allocs[i] = a
	}
	var res []ipam.Result
	if len(allocs) == 1 {
		x, err := e.a.Allocate(ctx, allocs[0])
		if err != nil {
			return nil, allocError(ps[0].key, err)
		}
		res = []ipam.Result{x}
	} else {
		sr, err := e.a.Sync(ctx, ipam.SyncRequest{Owner: owner, Allocations: allocs})
		if err != nil {
			return nil, syncError(r, ps, err)
		}
		res = sr.Allocations
	}
	out := make([]Result, len(ps))
	for i, p := range ps {
		out[i] = resultOf(p, res[i])
	}
	return out, nil
}

// request builds the core's request of one pool: the container's current
// allocation again when it exists and matches (the same answer), else a
// new one from the current block.
func (e *Engine) request(p *pool, owner string, r *Request, want netip.Addr) (ipam.Allocation, error) {
	b := p.block
	sel := ipam.Labels{ipam.LabelNetworkInstance: p.vrf, ipam.LabelNetworkName: netName(b.Network)}
	switch {
	case r.IPWithIndex != nil:
		f := "parameters.features.allocate_ip_with_index"
		a, ok := addOffset(b.Start, uint64(*r.IPWithIndex))
		if !ok || b.End.Less(a) {
			return ipam.Allocation{}, invalid(f, "%d is past the node's block %s-%s of %s", *r.IPWithIndex, b.Start, b.End, p.key)
		}
		if a == b.Gateway {
			return ipam.Allocation{}, invalid(f, "%d is the gateway %s of %s; use allocate_default_gateway", *r.IPWithIndex, a, p.key)
		}
		if !b.Contains(a) {
			return ipam.Allocation{}, invalid(f, "%d is the excluded address %s of %s", *r.IPWithIndex, a, p.key)
		}
		want = a
	case r.AllocateDefaultGateway:
		if !b.Gateway.IsValid() || !b.Network.Contains(b.Gateway) {
			return ipam.Allocation{}, invalid("parameters.features.allocate_default_gateway", "%s has no gateway", p.key)
		}
		want = b.Gateway
		sel[labelGatewayOf] = addrLabel(b.Gateway)
	case want.IsValid() && !b.Contains(want):
		return ipam.Allocation{}, invalid("parameters.requested_ips", "%s is not an address of the node's block %s-%s of %s (or is excluded, or the gateway)",
			want, b.Start, b.End, p.key)
	}
	key := allocKey(owner, p.key)
	if old, err := e.a.GetAllocation(key); err == nil && (!want.IsValid() || old.Result.Prefix.Addr() == want) {
		return old.Allocation, nil
	}
	a := ipam.Allocation{Key: key, NetworkInstance: p.vrf, Kind: ipam.KindNetwork, Selector: sel, Labels: podLabels(r.Pod, e.now())}
	if want.IsValid() {
		a.Prefix = netip.PrefixFrom(want, b.Network.Bits())
	}
	return a, nil
}

// resultOf is the answer for one pool: routes only with a gateway, and
// the default route through it when the pool says so; the gateway itself
// comes with neither.
func resultOf(p *pool, x ipam.Result) Result {
	res := Result{Pool: p.key.Name, Type: p.key.Type, IP: x.Prefix}
	b := p.block
	if b == nil || !b.Gateway.IsValid() || x.Prefix.Addr() == b.Gateway {
		return res
	}
	res.Gateway = b.Gateway
	res.Routes = slices.Clone(b.Routes)
	if b.DefaultGateway {
		res.Routes = append(res.Routes, netip.PrefixFrom(zeroOf(b.Gateway), 0))
	}
	slices.SortFunc(res.Routes, func(a, b netip.Prefix) int {
		return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
	})
	res.Routes = slices.Compact(res.Routes)
	return res
}

func zeroOf(a netip.Addr) netip.Addr {
	if a.Is4() {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}

// addOffset returns a+n, false past the family's end.
func addOffset(a netip.Addr, n uint64) (netip.Addr, bool) {
	b := a.AsSlice()
	carry := n
	for i := len(b) - 1; i >= 0 && carry > 0; i-- {
		s := uint64(b[i]) + carry&0xff
		b[i] = byte(s)
		carry = carry>>8 + s>>8
	}
	if carry > 0 {
		return netip.Addr{}, false
	}
	out, _ := netip.AddrFromSlice(b)
	return out, true
}

// podLabels are the labels of an allocation: the pod's metadata (see
// setMeta) and the creation time.
func podLabels(p Pod, now time.Time) ipam.Labels {
	l := ipam.Labels{labelCreated: strconv.FormatInt(now.Unix(), 10)}
	setMeta(l, labelPodNS, p.Namespace)
	setMeta(l, labelPodUID, p.UID)
	setMeta(l, labelDeviceID, p.DeviceID)
	setMeta(l, labelPodName, p.Name)
	return l
}

// hexPiece is the suffix of the labels that hold a hex-encoded value.
const hexPiece = ".hex."

// setMeta keeps v under key in l, as the allocation core takes labels
// (Kubernetes label syntax): as it is when it is a label value, else
// hex-encoded in pieces of at most a label value's length under key.hex.0,
// key.hex.1, ... (a device id "0000:3b:00.2", a pod name longer than 63
// bytes). An empty v is not kept.
func setMeta(l ipam.Labels, key, v string) {
	switch {
	case v == "":
	case ipam.IsLabelValue(v):
		l[key] = v
	default:
		h := hex.EncodeToString([]byte(v))
		for i := 0; i*ipam.MaxLabelValueLength < len(h); i++ {
			l[key+hexPiece+strconv.Itoa(i)] = h[i*ipam.MaxLabelValueLength : min(len(h), (i+1)*ipam.MaxLabelValueLength)]
		}
	}
}

// getMeta reads setMeta's value back, and the form older versions
// stored: a pod name longer than a label value cut into key.0, key.1, ...
func getMeta(l ipam.Labels, key string) string {
	if v, ok := l[key]; ok {
		return v
	}
	var b strings.Builder
	for i := 0; ; i++ {
		v, ok := l[key+"."+strconv.Itoa(i)]
		if !ok {
			break
		}
		b.WriteString(v)
	}
	if b.Len() > 0 {
		return b.String()
	}
	for i := 0; ; i++ {
		v, ok := l[key+hexPiece+strconv.Itoa(i)]
		if !ok {
			break
		}
		b.WriteString(v)
	}
	v, err := hex.DecodeString(b.String())
	if err != nil {
		return ""
	}
	return string(v)
}

// podOf reads podLabels back.
func podOf(l ipam.Labels) (Pod, time.Time) {
	p := Pod{Name: getMeta(l, labelPodName), Namespace: getMeta(l, labelPodNS), UID: getMeta(l, labelPodUID), DeviceID: getMeta(l, labelDeviceID)}
	sec, _ := strconv.ParseInt(l[labelCreated], 10, 64)
	return p, time.Unix(sec, 0)
}

func heldOf(k PoolKey, r ipam.AllocationRecord) (Held, bool) {
	cid, ifname, ok := splitOwner(r.Allocation.Key.Owner)
	if !ok {
		return Held{}, false
	}
	pod, created := podOf(r.Allocation.Labels)
	return Held{Pool: k, ContainerID: cid, IfName: ifname, IP: r.Result.Prefix, Pod: pod, Created: created}, true
}

// allocError words an error of the core about pool k's allocation.
func allocError(k PoolKey, err error) error {
	var ie *ipam.Error
	if errors.As(err, &ie) {
		msg := ie.Msg
		if ie.Field != "" && ie.Field != "spec.selector" {
			msg = ie.Field + ": " + msg
		}
		return fmt.Errorf("%s: %s: %w", k, capMsg(msg), ie.Err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%s: %w", k, err)
}

func syncError(r *Request, ps []*pool, err error) error {
	var se *ipam.SyncError
	if errors.As(err, &se) && len(se.Errs) > 0 {
		first := se.Errs[0]
		var ie *ipam.Error
		if errors.As(first, &ie) {
			for _, p := range ps {
				if ie.Key.Name == p.key.Name && ie.Key.Namespace == string(r.Type) {
					return allocError(p.key, first)
				}
			}
		}
		return allocError(ps[0].key, first)
	}
	return allocError(ps[0].key, err)
}

// maxMsg caps what an error repeats of the core's message.
const maxMsg = 512

func capMsg(s string) string {
	if len(s) <= maxMsg {
		return s
	}
	return s[:maxMsg] + "..."
}

// IsAllocated returns nil when the container's interface holds an address
// in every pool named, an error wrapping ipam.ErrNotFound otherwise: the
// node API's IsAllocated, as NVIDIA's daemon answers it (Check verifies
// more).
func (e *Engine) IsAllocated(_ context.Context, r *Request) error {
	if err := r.Validate(); err != nil {
		return err
	}
	_, err := e.held(r)
	return err
}

// held returns the address the container's interface holds in each pool
// named, or an error wrapping ipam.ErrNotFound when it holds none in one.
func (e *Engine) held(r *Request) ([]netip.Prefix, error) {
	owner := ownerOf(r.ContainerID, r.IfName)
	held := make([]netip.Prefix, len(r.Pools))
	var missing error
	err := e.a.ReadSettled(func() {
		missing = nil
		for i, name := range r.Pools {
			k := PoolKey{Type: r.Type, Name: name}
			rec, err := e.a.GetAllocation(allocKey(owner, k))
			if err != nil {
				missing = fmt.Errorf("%s: container %s interface %s holds no address: %w", k, ipam.Quote(r.ContainerID), ipam.Quote(r.IfName), ipam.ErrNotFound)
				return
			}
			held[i] = rec.Result.Prefix
		}
	})
	if err != nil {
		return nil, err
	}
	return held, missing
}

// Check is CNI CHECK: nil when the container's interface holds an address
// in every pool named, each still an address of the node's block of its
// pool and, when the request names addresses (RequestedIPs: the CNI
// result's), one of them. Otherwise an error wrapping ipam.ErrNotFound
// (none held, or another address) or ErrOutsideBlock.
func (e *Engine) Check(_ context.Context, r *Request) error {
	if err := r.Validate(); err != nil {
		return err
	}
	held, err := e.held(r)
	if err != nil {
		return err
	}
	want := make([]netip.Addr, len(r.RequestedIPs))
	for i, s := range r.RequestedIPs {
		want[i] = netip.MustParseAddr(s).Unmap() // validated
	}
	for i, name := range r.Pools {
		if err := e.checkHeld(PoolKey{Type: r.Type, Name: name}, r, held[i], want); err != nil {
			return err
		}
	}
	return nil
}

// Deallocate releases what the container's interface holds in every pool
// named, all or nothing; releasing what is not held succeeds.
func (e *Engine) Deallocate(ctx context.Context, r *Request) error {
	if err := r.Validate(); err != nil {
		return err
	}
	return e.release(ctx, r, nil)
}

// release releases the allocations of r's container in r's pools that
// match (nil: all).
func (e *Engine) release(ctx context.Context, r *Request, match func(Held) bool) error {
	owner := ownerOf(r.ContainerID, r.IfName)
	defer e.lockOwner(owner)()
	var keys []ipam.Key
	addrs := map[string]netip.Addr{}
	for _, name := range r.Pools {
		k := PoolKey{Type: r.Type, Name: name}
		rec, err := e.a.GetAllocation(allocKey(owner, k))
		if err != nil {
			continue
		}
		if h, ok := heldOf(k, rec); !ok || match != nil && !match(h) {
			continue
		}
		keys = append(keys, rec.Allocation.Key)
		addrs[name] = rec.Result.Prefix.Addr()
	}
	if len(keys) == 0 {
		return nil
	}
	// Releasing an address outside the current block changes the
	// exclusions: that pool is locked for writing and set up again.
	outside := func(p *pool) bool {
		a, ok := addrs[p.key.Name]
		return ok && (p.block == nil || p.blocked != nil || !p.block.Contains(a))
	}
	ps, unlock := e.lockPools(r, outside)
	defer unlock()
	var err error
	if len(keys) == 1 {
		if err = e.a.Release(ctx, keys[0]); errors.Is(err, ipam.ErrNotFound) {
			err = nil
		}
	} else {
		var keep []ipam.Allocation
		for _, x := range e.a.ListAllocations(ipam.Filter{Owner: owner}) {
			if !slices.Contains(keys, x.Allocation.Key) {
				keep = append(keep, x.Allocation)
			}
		}
		_, err = e.a.Sync(ctx, ipam.SyncRequest{Owner: owner, Allocations: keep, Prune: true})
	}
	if err != nil {
		return allocError(PoolKey{Type: r.Type, Name: r.Pools[0]}, err)
	}
	for _, p := range ps {
		if p != nil && outside(p) {
			if err := e.syncInfra(ctx, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// List returns every allocation of the node's containers.
func (e *Engine) List() []Held {
	var out []Held
	for _, p := range e.poolList() {
		for _, r := range e.a.ListAllocations(ipam.Filter{NetworkInstance: p.vrf}) {
			if h, ok := heldOf(p.key, r); ok {
				out = append(out, h)
			}
		}
	}
	return out
}

// Release releases h if the container's interface still holds that very
// allocation (the same address, created at the same time): the cleanup's
// release, which never races a new allocation of the same container.
func (e *Engine) Release(ctx context.Context, h Held) error {
	r := &Request{Type: h.Pool.Type, Pools: []string{h.Pool.Name}, ContainerID: h.ContainerID, IfName: h.IfName}
	return e.release(ctx, r, func(x Held) bool { return x.IP == h.IP && x.Created.Equal(h.Created) })
}

// PoolStats describes a pool for the metrics.
type PoolStats struct {
	Pool        PoolKey
	HasBlock    bool
	Allocations int
	// Outside counts the allocations the current block does not hold.
	Outside int
	// Free counts the addresses of the block left to hand out.
	Free uint64
}

// Stats describes every pool.
func (e *Engine) Stats() []PoolStats {
	var out []PoolStats
	for _, p := range e.poolList() {
		p.mu.RLock()
		s := PoolStats{Pool: p.key, HasBlock: p.block != nil && p.invalid == nil && p.blocked == nil}
		recs := e.a.ListAllocations(ipam.Filter{NetworkInstance: p.vrf})
		s.Allocations = len(recs)
		s.Outside = len(e.outside(p, p.block))
		if b := p.block; s.HasBlock {
			if n, err := e.a.Node(p.vrf, b.Network); err == nil {
				s.Free = n.Total - n.Used
				if b.Gateway.IsValid() && b.Network.Contains(b.Gateway) && s.Free > 0 &&
					!slices.ContainsFunc(recs, func(r ipam.AllocationRecord) bool { return r.Result.Prefix.Addr() == b.Gateway }) {
					s.Free--
				}
			}
		}
		p.mu.RUnlock()
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b PoolStats) int {
		return cmp.Or(cmp.Compare(a.Pool.Type, b.Pool.Type), cmp.Compare(a.Pool.Name, b.Pool.Name))
	})
	return out
}
