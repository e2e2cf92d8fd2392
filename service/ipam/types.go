// Package ipam is the allocation core: network instances (VRFs), nested
// prefixes of kind aggregate, network, pool and loopback, IP ranges,
// exclusions, pre-allocations and label-selector allocation of addresses,
// blocks and sub-prefixes, for IPv4 and IPv6.
//
// The core is pure Go on net/netip (and the shared words of package
// api/vocab, itself the standard library only). It knows nothing of
// Kubernetes, YAML, gRPC or disk: fronts translate their objects into the
// types below and map the sentinel errors once at their boundary. Every committed mutation is
// described by change Records, which a Journal (the durable store) receives in
// commit order and which Apply replays to restore the state.
package ipam

import (
	"fmt"
	"net/netip"

	"github.com/nephio-project/ipam/api/vocab"
)

// Kind is the kind of a prefix or of a requested allocation.
type Kind string

// The prefix kinds of the allocation rules.
const (
	KindAggregate Kind = "aggregate"
	KindNetwork   Kind = "network"
	KindPool      Kind = "pool"
	KindLoopback  Kind = "loopback"
)

// Family is an address family: "ipv4" or "ipv6".
type Family string

// The address families.
const (
	IPv4 Family = "ipv4"
	IPv6 Family = "ipv6"
)

// System labels carried by every selectable prefix; selectors may match
// them. They are the shared vocabulary of package vocab.
const (
	LabelNetworkInstance = vocab.LabelNetworkInstance
	LabelNetworkName     = vocab.LabelNetworkName
	LabelPrefixKind      = vocab.LabelPrefixKind
	LabelAddressFamily   = vocab.LabelAddressFamily
	LabelPrefixLength    = vocab.LabelPrefixLength
	LabelGateway         = vocab.LabelGateway
)

// Key identifies an object of the core: the owner that declared it (a kpt
// package, a controller, a user), its namespace and its name. Idempotence of
// allocations is keyed by it.
type Key struct {
	Owner     string
	Namespace string
	Name      string
}

// String renders the key as "namespace/name", or "name" when the namespace is
// empty; the owner is left out because messages name the object as its user
// knows it.
func (k Key) String() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// Labels are string key/value pairs attached to prefixes and allocations.
type Labels map[string]string

// NetworkInstance is a VRF: an independent address space. Its name
// (Key.Name) is unique in the allocator. Prefixes are aggregates the VRF
// owns directly.
type NetworkInstance struct {
	Key      Key
	Prefixes []VRFPrefix
	Labels   Labels
}

// VRFPrefix is an aggregate declared inside a NetworkInstance.
type VRFPrefix struct {
	Prefix netip.Prefix
	Labels Labels
}

// Prefix is an IPPrefix: a prefix of a kind inside a network instance.
//
// For kind network the prefix may carry a host part: 10.0.1.1/24 records the
// subnet 10.0.1.0/24 and the static address 10.0.1.1, which becomes the
// subnet's gateway when Labels[LabelGateway] is "true". The other kinds must
// be canonical (no host bits).
type Prefix struct {
	Key             Key
	NetworkInstance string
	Kind            Kind // empty means KindNetwork
	Prefix          netip.Prefix
	Network         string // network name, the nephio.org/network-name label
	Labels          Labels
	// Exclusions are address ranges of a network prefix that are never
	// handed out dynamically.
	Exclusions []AddrRange
	// AllocateReserved opts a network in to allocating its first and last
	// addresses, which rule 3 otherwise reserves (Cluster API in-cluster
	// pools' allocateReservedIPAddresses); the gateway stays unallocated.
	// It holds while any prefix of the network sets it.
	AllocateReserved bool
	// GatewayInBlocks lets blocks (Count > 1) of a network contain its
	// gateway, as NVIDIA's per-node blocks do: the block is returned with
	// the gateway inside, and the gateway stays the gateway (never a
	// single address). It holds while any prefix of the network sets it.
	GatewayInBlocks bool
}

// AddrRange is an inclusive range of addresses of one family.
type AddrRange struct {
	Start netip.Addr
	End   netip.Addr
}

// IPRange is a named range of addresses inside one network (or loopback)
// prefix, selectable by its labels: requests that select it get addresses
// between Start and End only, and subnet-wide dynamic allocation leaves it
// alone. It models Metal3 IPPool ranges and NVIDIA pool exclusions.
type IPRange struct {
	Key             Key
	NetworkInstance string
	Start           netip.Addr
	End             netip.Addr
	Labels          Labels
	// Exclusions are addresses of the range never handed out.
	Exclusions []AddrRange
	// PreAllocations reserve an address for the allocation of that name
	// (Key.Name), as Metal3's preAllocations do.
	PreAllocations map[string]netip.Addr
	// PrefixLength, when set, is the length addresses of the range are
	// written with (Metal3 pools[].prefix); 0 means the network's.
	PrefixLength int
	// Gateway, when valid, is the gateway returned with addresses of the
	// range (Metal3 pools[].gateway) instead of the network's; inside the
	// range it is never allocated.
	Gateway netip.Addr
	// AllocateReserved lets the range hand out the addresses of its
	// network that rule 3 reserves (first and last) when it holds them,
	// to the requests that select the range (Cluster API
	// allocateReservedIPAddresses).
	AllocateReserved bool
}

// Allocation is a request for an address, a block of consecutive addresses
// or a sub-prefix.
type Allocation struct {
	Key Key
	// NetworkInstance names the VRF; when empty the selector's
	// nephio.org/network-instance label does.
	NetworkInstance string
	// Kind is the kind of the result: network (an address from a network,
	// or a network sub-prefix when PrefixLength is set), pool (a sub-prefix)
	// or loopback (an address from a loopback prefix). Empty means network.
	Kind Kind
	// PrefixLength asks for a sub-prefix of that length; 0 means unset.
	PrefixLength int
	// Prefix asks for exactly this address (10.0.1.20/24) or prefix.
	Prefix netip.Prefix
	// AddressFamily restricts selection to one family; empty means any.
	AddressFamily Family
	// Selector must be a subset of the labels of the prefix to allocate from.
	Selector Labels
	// Labels are the allocation's own labels; a sub-prefix result carries
	// them so later requests can select it.
	Labels Labels
	// Count asks for a block of Count consecutive addresses (per-node
	// blocks); 0 and 1 mean a single address.
	Count int
}

// Result is what an allocation or a prefix resolved to.
type Result struct {
	// NetworkInstance is the VRF the result lives in.
	NetworkInstance string
	// Prefix is the result: an address written with its network's length
	// (10.0.1.2/24), a loopback address (/32, /128), or a sub-prefix.
	Prefix netip.Prefix
	// Gateway is the gateway of the network the address came from, if any.
	Gateway netip.Addr
	// Last is the last address of a block (Count > 1), else invalid.
	Last netip.Addr
}

// AllocationRecord is a stored allocation: the request and its result.
type AllocationRecord struct {
	Allocation Allocation
	Result     Result
}

// PrefixRecord is a stored prefix and what it resolved to.
type PrefixRecord struct {
	Prefix Prefix
	Result Result
}

// Op is the operation of a change Record.
type Op uint8

// The change operations. Put records carry the whole object (allocations
// with their result, so replay never re-decides); Delete records carry the
// key only.
const (
	OpPutNetworkInstance Op = iota + 1
	OpDeleteNetworkInstance
	OpPutPrefix
	OpDeletePrefix
	OpPutRange
	OpDeleteRange
	OpPutAllocation
	OpDeleteAllocation
	// OpPutOwner records what the allocator keeps about an owner itself
	// (Record.Owner); OpDeleteOwner forgets it.
	OpPutOwner
	OpDeleteOwner
)

var opNames = [...]string{"", "PutNetworkInstance", "DeleteNetworkInstance", "PutPrefix", "DeletePrefix",
	"PutRange", "DeleteRange", "PutAllocation", "DeleteAllocation", "PutOwner", "DeleteOwner"}

// String names the operation.
func (o Op) String() string {
	if int(o) < len(opNames) && o != 0 {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Record is one committed change. Exactly one of the object fields is set
// for Put operations; Delete operations set Key (and NetworkInstance for
// context). Owner records name the owner in Key.Owner only.
type Record struct {
	Op              Op
	Key             Key
	NetworkInstance *NetworkInstance
	Prefix          *Prefix
	Range           *IPRange
	Allocation      *AllocationRecord
	Owner           *OwnerInfo
}

// OwnerInfo is what the allocator keeps about an owner itself.
type OwnerInfo struct {
	// Identity is the id of the package whose objects the owner holds
	// (see SyncRequest.Identity).
	Identity string
	// Source is where that package lives (see SyncRequest.Source).
	Source string
	// Generation counts the Syncs that changed the owner's objects since
	// a checking Sync first did (see SyncRequest.Generation); 0: not
	// counted.
	Generation uint64
}

// Journal receives the records of every committed mutation in commit order.
// Append is called while the mutated VRFs are locked, so it must only queue
// the records (no I/O); the returned wait function is called after the locks
// are released and blocks until the records are durable. A nil Journal makes
// the allocator purely in-memory.
type Journal interface {
	Append(recs []Record) (wait func() error)
}

// PendingJournal is a Journal that also takes the records of a change
// whose commit is not known yet, from a Committer that queues (see
// Committer): AppendPending is called where Append would be, with the
// commit's wait function committed, and the wait function it returns
// calls committed, returns its error if it fails (the records must then
// be dropped: the change is undone), and otherwise waits as Append's
// would. A journal that shows records to readers (watchers) so shows
// only committed ones.
type PendingJournal interface {
	Journal
	AppendPending(recs []Record, committed func() error) (wait func() error)
}

// SettlingJournal is a Journal whose Append returns before the records
// are durable while the allocator already shows them to reads (a log with
// group commit: they wait for the next fsync). Settled returns nil when
// every batch appended so far is durable, and otherwise a function that
// blocks until they are, or returns the error that keeps one of them from
// ever being so (wrapping ErrUnavailable). Settled may be called with the
// mutated VRFs locked: it does no I/O and, with nothing pending, costs no
// more than an atomic load. Allocator.Settle waits for it before a read
// answers, and a mutation that changed nothing before it returns.
type SettlingJournal interface {
	Journal
	Settled() (wait func() error)
}

// Committer commits the records of a mutation to a store shared with
// other allocators (several replicas on etcd) and may refuse them. Commit
// is called while the mutated VRFs are locked, after the mutation succeeded
// in memory and before the Journal sees it; an error rolls the mutation
// back, so the allocator never holds a change the store refused. An error
// wrapping ErrStale says the store moved on since this allocator last
// caught up: the allocator calls CatchUp with that error, with no lock
// held, and runs the mutation again (at most MaxStaleRetries times).
//
// Commit may instead only queue the records (a replica that is the only
// writer) and return a wait function, called after the locks are
// released, that blocks until they are committed. A committer whose wait
// fails must take the change out of the allocator itself (it reloads the
// state); a wait error wrapping ErrStale is retried as above, CatchUp
// then returning once that is done. Commit is also called, with no
// records, after a mutation that changed nothing (an idempotent repeat):
// its answer may rest on queued changes, so a committer that queues
// returns a wait that ends when those are committed (or fails as they
// do); one that does not queue returns nil, nil. Settle makes the same
// call, with no lock held, before a read answers.
type Committer interface {
	Commit(recs []Record) (wait func() error, err error)
	// CatchUp returns once the allocator has applied the changes that
	// made a Commit fail with err, or an error if it cannot.
	CatchUp(err error) error
}

// SyncRequest is the whole desired set of one owner (a kpt package): the
// allocator creates what is new, keeps what is unchanged, re-allocates what
// changed and, when Prune is set, deletes the owner's objects that are no
// longer desired, all in one atomic step. Every key's Owner is forced to
// Owner.
//
// Identity, when set, is the stable id of the package that sends the
// request. The owner is bound to the identity of the Sync that last
// changed it; a Sync from another identity is refused with ErrInUse
// while the owner holds objects, unless Adopt is set: two packages that
// share an owner by mistake (a copied package keeps its Kptfile name)
// would otherwise prune each other's objects. A Sync without Identity is
// not checked and leaves the binding as it is.
//
// Source, when set, says where the package lives (a URL of its directory
// in a Git repository, or porch:<namespace>/<repository>/<package>); the
// owner keeps the last one it was sent, for people (the web view links
// an owner to it). It is text, never fetched.
//
// Generation, with CheckGeneration, is the owner generation the package
// was last rendered at (0: never; at most MaxGeneration). The owner's generation counts the
// Syncs that changed its objects; it only starts counting (above 0) at
// the first changing Sync with CheckGeneration, so owners of callers that
// never check (controllers, the Porch injector) keep 0 and no record of
// it. A checking Sync that would change the owner's objects while its
// Generation is below the owner's is refused with ErrInUse (field
// "generation") and changes nothing: another copy of the package changed
// the owner since this one was rendered, and pruning from the stale copy
// would release the other copy's objects (optimistic concurrency, as the
// Kubernetes API server does with resourceVersion). A stale request that
// changes nothing is accepted: the owner already holds what it declares.
// Adopt skips the check. A changing Sync moves the owner to
// max(owner's+1, Generation): a package ahead of the owner (a server that
// lost it, restored by rendering the package again) keeps its generation.
// SyncResult.Generation is the owner's generation afterwards, for the
// package to keep.
type SyncRequest struct {
	Owner            string
	Identity         string
	Source           string
	Adopt            bool
	Generation       uint64
	CheckGeneration  bool
	NetworkInstances []NetworkInstance
	Prefixes         []Prefix
	Ranges           []IPRange
	Allocations      []Allocation
	Prune            bool
}

// SyncResult reports a successful Sync: one result per desired prefix and
// allocation, in request order, and the keys deleted by pruning.
// Adopted is the identity the owner was bound to before an adopting Sync
// took it over, else empty. Generation is the owner's generation after
// the Sync (see SyncRequest.Generation).
type SyncResult struct {
	Prefixes    []Result
	Allocations []Result
	Released    []Released
	Adopted     string
	Generation  uint64
}

// Released names an object deleted by a Sync because it was no longer
// desired.
type Released struct {
	Op  Op // the Delete operation that removed it
	Key Key
}

// Filter narrows List calls; zero fields match everything.
type Filter struct {
	NetworkInstance string
	Owner           string
	Labels          Labels
}

// TreeNode is one line of a VRF's prefix hierarchy with its utilization.
type TreeNode struct {
	Depth  int
	Prefix netip.Prefix
	Kind   Kind
	// Name and Owner name the object that declared the prefix; a subnet
	// made by network prefixes with host parts (10.0.1.1/24 with the
	// gateway label) names the first of them. A subnet that only static
	// addresses keep (its gateway prefix was deleted, the static prefixes
	// of other owners remain) is StaticOnly.
	Name       string
	Owner      string
	StaticOnly bool
	Network    string // the network name of a network prefix
	// Used and Total count addresses (saturating at 2^64-1).
	Used  uint64
	Total uint64
}
