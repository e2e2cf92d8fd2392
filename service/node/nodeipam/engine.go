package nodeipam

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/store/file"
)

// Names of the engine's objects in the allocation core.
const (
	// infraNamespace is the namespace of a pool's network prefixes and
	// gateway ranges.
	infraNamespace = "node"
	// labelPrefix starts the labels the engine puts on allocations and
	// ranges.
	labelPrefix = "ipam-node.nephio.org/"
	// labelGatewayOf labels the range of a pool's gateway address (the
	// value is the address, ':' written '-', see addrLabel).
	labelGatewayOf = labelPrefix + "gateway-of"
	labelPodName   = labelPrefix + "pod-name"
	labelPodNS     = labelPrefix + "pod-namespace"
	labelPodUID    = labelPrefix + "pod-uid"
	labelDeviceID  = labelPrefix + "device-id"
	labelCreated   = labelPrefix + "created"
)

// Options configure an Engine.
type Options struct {
	// Logger receives the engine's and the store's messages; nil:
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock (creation times of allocations); nil: time.Now.
	Now func() time.Time
	// SyncFile, when set, replaces the store's fsync of its log: fault
	// injection in tests.
	SyncFile func(*os.File) error
	// OnFsync and OnCommit, when set, receive the duration of each fsync
	// of the store's log and the records and bytes of each group commit
	// (the metrics).
	OnFsync  func(time.Duration)
	OnCommit func(records, bytes int)
}

// Engine hands out the addresses of the node's blocks and persists them
// in the file store under its directory. It is safe for concurrent use.
type Engine struct {
	dir string
	st  *file.Store
	a   *ipam.Allocator
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex // pools and the pools file
	pools map[PoolKey]*pool

	stripes [256]sync.Mutex // serialize the calls of one (container, interface)
}

// pool is the engine's state of one pool.
type pool struct {
	key PoolKey
	vrf string
	// mu: Allocate and Deallocate of addresses in the block take it for
	// reading; block changes and the release of an address outside the
	// block (which changes the exclusions) take it for writing.
	mu      sync.RWMutex
	block   *Block
	invalid error // the pool's spec does not parse: nothing new is handed out
	blocked error // the new block cannot be set up yet: nothing new is handed out
}

// poolsFile is the engine's record of the last known blocks, next to the
// store: the core holds the networks with their exclusions; this file holds
// the rest of each block (gateway, routes) so that a daemon restarted
// while the API server is unreachable serves at once.
type poolsFile struct {
	Version int          `json:"version"`
	Pools   []poolRecord `json:"pools"`
}

type poolRecord struct {
	PoolKey
	Block *Block `json:"block,omitempty"`
}

const (
	storeDirName  = "wal"
	poolsFileName = "pools.json"
)

// Open opens (creating it if needed) the engine's store in dir, restores
// every allocation and the last known blocks, and sets the blocks up
// again, so the engine serves at once.
func Open(dir string, opts Options) (*Engine, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	e := &Engine{dir: dir, log: log, now: opts.Now, pools: map[PoolKey]*pool{}}
	if e.now == nil {
		e.now = time.Now
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	st, err := file.Open(filepath.Join(dir, storeDirName), file.Options{Logger: log, SyncFile: opts.SyncFile, OnFsync: opts.OnFsync, OnCommit: opts.OnCommit})
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	e.st = st
	e.a = ipam.New(ipam.WithJournal(st))
	if err := st.Restore(e.a); err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	if err := e.loadPools(); err != nil {
		_ = st.Close()
		return nil, err
	}
	for _, p := range e.poolList() {
		p.mu.Lock()
		if err := e.syncInfra(context.Background(), p); err != nil {
			log.Warn("pool not set up", "pool", p.key.Name, "type", p.key.Type, "error", err)
		}
		p.mu.Unlock()
	}
	return e, nil
}

// Close flushes and closes the store.
func (e *Engine) Close() error { return e.st.Close() }

// Allocator is the engine's allocation core (read-only uses: tests,
// metrics).
func (e *Engine) Allocator() *ipam.Allocator { return e.a }

func (e *Engine) loadPools() error {
	path := filepath.Join(e.dir, poolsFileName)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pools file: %w", err)
	}
	var f poolsFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("pools file %s: %w", path, err)
	}
	for _, r := range f.Pools {
		if r.Block != nil {
			if err := r.Block.check(); err != nil {
				return fmt.Errorf("pools file %s: %s: %w", path, r.PoolKey, err)
			}
		}
		e.pools[r.PoolKey] = &pool{key: r.PoolKey, vrf: vrfName(r.PoolKey), block: r.Block}
	}
	return nil
}

// savePools writes the pools file atomically: a temporary file, fsynced,
// renamed over the old one, and the directory fsynced. e.mu is held.
func (e *Engine) savePools() error {
	f := poolsFile{Version: 1}
	for _, k := range slices.SortedFunc(maps.Keys(e.pools), func(a, b PoolKey) int {
		return strings.Compare(string(a.Type)+"/"+a.Name, string(b.Type)+"/"+b.Name)
	}) {
		f.Pools = append(f.Pools, poolRecord{PoolKey: k, Block: e.pools[k].block})
	}
	data, err := json.Marshal(&f)
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(e.dir, poolsFileName), data, 0o600)
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory, fsynced and renamed, then fsyncs the directory.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer func() { _ = os.Remove(name) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(name, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}

// vrfName is the network instance (and the owner of the objects) of a
// pool.
func vrfName(k PoolKey) string {
	s := string(k.Type) + "." + k.Name
	if len(s) <= ipam.MaxNameLength {
		return s
	}
	h := sha256.Sum256([]byte(k.Name))
	return string(k.Type) + "." + hex.EncodeToString(h[:16])
}

// netNameReplacer writes a prefix as a name: ':' as '-', '/' as '_'.
var netNameReplacer = strings.NewReplacer(":", "-", "/", "_")

// netName is the name of the network of prefix n.
func netName(n netip.Prefix) string { return "net-" + netNameReplacer.Replace(n.String()) }

func addrName(a netip.Addr) string { return strings.ReplaceAll(a.String(), ":", "-") }

// addrLabel is addrName as a label value, which begins and ends with a
// letter or digit: "fd00::" is "fd00--0", "::1" is "0--1" (the same
// address written with a zero group).
func addrLabel(a netip.Addr) string {
	s := addrName(a)
	if strings.HasPrefix(s, "-") {
		s = "0" + s
	}
	if strings.HasSuffix(s, "-") {
		s += "0"
	}
	return s
}

func (e *Engine) poolList() []*pool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Collect(maps.Values(e.pools))
}

func (e *Engine) pool(k PoolKey) *pool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pools[k]
}

// Held is an allocation of a container's interface.
type Held struct {
	// Pool is the pool the address belongs to.
	Pool PoolKey
	// ContainerID and IfName are the container's interface.
	ContainerID string
	IfName      string
	// IP is the address, written with its network's length.
	IP netip.Prefix
	// Pod is the pod the allocation was made for.
	Pod Pod
	// Created is when the allocation was made (to the second).
	Created time.Time
}

// PoolChange reports what setting a block did.
type PoolChange struct {
	// Changed is false when the block was already set.
	Changed bool
	// Outside lists the allocations that the new block no longer holds:
	// they stay until released, and nothing new is handed out of their
	// addresses.
	Outside []Held
	// Blocked, when set, says why the pool hands out nothing new for now.
	Blocked error
}

// SetPool sets the node's block of a pool; nil says the pool gives the
// node no block (or is gone): the pool then answers NotFound to new
// allocations, and the ones it holds stay until released. A block that
// no longer holds some allocations keeps them (the pods still use them)
// and reports them; nothing outside the current block is ever handed
// out.
func (e *Engine) SetPool(ctx context.Context, k PoolKey, b *Block) (PoolChange, error) {
	if b != nil {
		if err := b.check(); err != nil {
			return PoolChange{}, fmt.Errorf("%s: %w: %w", k, ipam.ErrInvalid, err)
		}
	}
	e.mu.Lock()
	p := e.pools[k]
	if p == nil {
		if b == nil {
			e.mu.Unlock()
			return PoolChange{}, nil
		}
		p = &pool{key: k, vrf: vrfName(k)}
		e.pools[k] = p
	}
	e.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.block.Equal(b) && p.blocked == nil && p.invalid == nil {
		return PoolChange{}, nil
	}
	e.mu.Lock()
	old := p.block
	p.block = b
	err := e.savePools()
	if err != nil {
		p.block = old
	}
	e.mu.Unlock()
	if err != nil {
		return PoolChange{}, fmt.Errorf("%s: pools file: %w: %w", k, ipam.ErrUnavailable, err)
	}
	p.invalid = nil
	before := e.outside(p, old)
	if err := e.syncInfra(ctx, p); err != nil {
		return PoolChange{Changed: true}, err
	}
	ch := PoolChange{Changed: true, Blocked: p.blocked}
	seen := map[string]bool{}
	for _, h := range before {
		seen[h.IP.String()+h.ContainerID+h.IfName] = true
	}
	for _, h := range e.outside(p, p.block) {
		if !seen[h.IP.String()+h.ContainerID+h.IfName] {
			ch.Outside = append(ch.Outside, h)
		}
	}
	return ch, nil
}

// Invalidate marks a pool whose spec does not parse: it hands out nothing
// new until SetPool is called again; what it holds stays.
func (e *Engine) Invalidate(k PoolKey, reason error) {
	p := e.pool(k)
	if p == nil {
		return
	}
	p.mu.Lock()
	p.invalid = reason
	p.mu.Unlock()
}

// Pools lists the pools the engine knows (with a block, or holding
// allocations).
func (e *Engine) Pools() []PoolKey {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Collect(maps.Keys(e.pools))
}

// outside lists the allocations of p that block b does not hold (b nil:
// all of them). The gateway itself, handed out on request, is not
// outside.
func (e *Engine) outside(p *pool, b *Block) []Held {
	var out []Held
	for _, r := range e.a.ListAllocations(ipam.Filter{NetworkInstance: p.vrf}) {
		h, ok := heldOf(p.key, r)
		if !ok {
			continue
		}
		a := h.IP.Addr()
		if b == nil || !b.Network.Contains(a) || (!b.Contains(a) && a != b.Gateway) {
			out = append(out, h)
		}
	}
	return out
}

// syncInfra makes the core hold p's network instance, the network of the
// current block with exclusions over everything but the block (and the
// addresses still held), the networks of earlier blocks while they hold
// allocations, and the gateway's range. p.mu is held for writing.
func (e *Engine) syncInfra(ctx context.Context, p *pool) error {
	recs := e.a.ListAllocations(ipam.Filter{NetworkInstance: p.vrf})
	held := make([]netip.Addr, 0, len(recs))
	for _, r := range recs {
		held = append(held, r.Result.Prefix.Addr())
	}
	slices.SortFunc(held, netip.Addr.Compare)
	req := ipam.SyncRequest{Owner: p.vrf, Prune: true}
	var cur netip.Prefix
	if b := p.block; b != nil {
		cur = b.Network
		req.Prefixes = append(req.Prefixes, e.network(p, cur, currentAllowed(b, held)))
		if b.Gateway.IsValid() && cur.Contains(b.Gateway) {
			req.Ranges = append(req.Ranges, gatewayRange(p, b.Gateway))
		}
	}
	for _, x := range e.a.ListPrefixes(ipam.Filter{NetworkInstance: p.vrf, Owner: p.vrf}) {
		n := x.Prefix.Prefix.Masked()
		if n == cur {
			continue
		}
		if in := heldIn(held, n); len(in) > 0 {
			req.Prefixes = append(req.Prefixes, e.network(p, n, spansOf(in)))
		}
	}
	for _, r := range e.a.ListRanges(ipam.Filter{NetworkInstance: p.vrf, Owner: p.vrf}) {
		if p.block != nil && r.Start == p.block.Gateway {
			continue
		}
		if _, ok := slices.BinarySearchFunc(held, r.Start, netip.Addr.Compare); ok {
			req.Ranges = append(req.Ranges, gatewayRange(p, r.Start))
		}
	}
	if len(req.Prefixes) > 0 {
		req.NetworkInstances = []ipam.NetworkInstance{{Key: ipam.Key{Owner: p.vrf, Name: p.vrf},
			Prefixes: []ipam.VRFPrefix{{Prefix: netip.MustParsePrefix("0.0.0.0/0")}, {Prefix: netip.MustParsePrefix("::/0")}}}}
	}
	_, err := e.a.Sync(ctx, req)
	p.blocked = nil
	switch {
	case err == nil:
	case errors.Is(err, ipam.ErrConflict) || errors.Is(err, ipam.ErrInUse) || errors.Is(err, ipam.ErrInvalid):
		// The new network overlaps one that still holds allocations:
		// nothing new until they are released.
		p.blocked = fmt.Errorf("%s: the block %s cannot be set up while earlier allocations remain: %w", p.key, cur, err)
		e.log.Warn("block not set up", "pool", p.key.Name, "type", p.key.Type, "error", err)
		return nil
	default:
		return fmt.Errorf("%s: %w", p.key, err)
	}
	if p.block == nil && len(req.Prefixes) == 0 {
		e.mu.Lock()
		delete(e.pools, p.key)
		err := e.savePools()
		e.mu.Unlock()
		if err != nil {
			return fmt.Errorf("%s: pools file: %w: %w", p.key, ipam.ErrUnavailable, err)
		}
	}
	return nil
}

// network is the network prefix n of p with exclusions over everything but
// the allowed spans.
func (e *Engine) network(p *pool, n netip.Prefix, allowed []ipam.AddrRange) ipam.Prefix {
	return ipam.Prefix{
		Key:              ipam.Key{Owner: p.vrf, Namespace: infraNamespace, Name: netName(n)},
		NetworkInstance:  p.vrf,
		Kind:             ipam.KindNetwork,
		Prefix:           n,
		Network:          netName(n),
		Exclusions:       complement(n, allowed),
		AllocateReserved: true,
	}
}

func gatewayRange(p *pool, gw netip.Addr) ipam.IPRange {
	return ipam.IPRange{
		Key:             ipam.Key{Owner: p.vrf, Namespace: infraNamespace, Name: "gw-" + addrName(gw)},
		NetworkInstance: p.vrf,
		Start:           gw,
		End:             gw,
		Labels:          ipam.Labels{labelGatewayOf: addrLabel(gw)},
	}
}

// currentAllowed is what the current network of b leaves free of
// exclusions: the block minus its exclusions, the gateway (a range of its
// own, handed out on request only) and every held address.
func currentAllowed(b *Block, held []netip.Addr) []ipam.AddrRange {
	spans := []ipam.AddrRange{{Start: b.Start, End: b.End}}
	for _, x := range b.Exclusions {
		spans = subtract(spans, x)
	}
	if b.Gateway.IsValid() && b.Network.Contains(b.Gateway) {
		spans = append(spans, ipam.AddrRange{Start: b.Gateway, End: b.Gateway})
	}
	for _, a := range heldIn(held, b.Network) {
		spans = append(spans, ipam.AddrRange{Start: a, End: a})
	}
	return spans
}

// heldIn returns the addresses of sorted held inside n.
func heldIn(held []netip.Addr, n netip.Prefix) []netip.Addr {
	var out []netip.Addr
	for _, a := range held {
		if n.Contains(a) {
			out = append(out, a)
		}
	}
	return out
}

func spansOf(as []netip.Addr) []ipam.AddrRange {
	out := make([]ipam.AddrRange, len(as))
	for i, a := range as {
		out[i] = ipam.AddrRange{Start: a, End: a}
	}
	return out
}

// subtract removes x from spans.
func subtract(spans []ipam.AddrRange, x ipam.AddrRange) []ipam.AddrRange {
	var out []ipam.AddrRange
	for _, s := range spans {
		if x.End.Less(s.Start) || s.End.Less(x.Start) {
			out = append(out, s)
			continue
		}
		if s.Start.Less(x.Start) {
			out = append(out, ipam.AddrRange{Start: s.Start, End: x.Start.Prev()})
		}
		if x.End.Less(s.End) {
			out = append(out, ipam.AddrRange{Start: x.End.Next(), End: s.End})
		}
	}
	return out
}

// complement returns the spans of n outside allowed, sorted.
func complement(n netip.Prefix, allowed []ipam.AddrRange) []ipam.AddrRange {
	allowed = slices.Clone(allowed)
	slices.SortFunc(allowed, func(a, b ipam.AddrRange) int { return a.Start.Compare(b.Start) })
	var out []ipam.AddrRange
	next, last := n.Addr(), lastAddr(n)
	done := false
	for _, s := range allowed {
		if done || last.Less(s.Start) {
			break
		}
		if next.Less(s.Start) {
			out = append(out, ipam.AddrRange{Start: next, End: s.Start.Prev()})
		}
		if !s.End.Less(next) {
			if s.End == last {
				done = true
				continue
			}
			next = s.End.Next()
		}
	}
	if !done {
		out = append(out, ipam.AddrRange{Start: next, End: last})
	}
	return out
}
