package ctl

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	flag "github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

// command is one "RESOURCE VERB" (or "tree") of ipamctl.
type command struct {
	name  string // "vrf list", "tree", ...
	args  string // positional arguments, for usage
	short string // one line of help
	nargs int    // -1: one or more
	flags func(fs *flag.FlagSet) any
	run   func(ctx context.Context, c ipamv1.IPAMClient, out *printer, pos []string, opts any) error
}

// Default owner and namespace of objects created by ipamctl.
const (
	DefaultOwner     = "ipamctl"
	DefaultNamespace = "default"
)

// labelFlag collects repeated key=value flags.
type labelFlag map[string]string

// Type names the value in help.
func (l labelFlag) Type() string { return "key=value" }

// String renders the labels as k=v,k=v in key order.
func (l labelFlag) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+l[k])
	}
	return strings.Join(parts, ",")
}

// Set adds one or more comma-separated key=value pairs.
func (l labelFlag) Set(s string) error {
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q is not key=value", kv)
		}
		l[k] = v
	}
	return nil
}

// listFlag collects repeated string flags.
type listFlag []string

// Type names the value in help.
func (l *listFlag) Type() string { return "string" }

// String joins the values with commas.
func (l *listFlag) String() string { return strings.Join(*l, ",") }

// Set appends a value.
func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// keyOpts name an object.
type keyOpts struct {
	owner, namespace string
}

func (k *keyOpts) register(fs *flag.FlagSet, ownerDefault string) {
	help := "owner of the object (empty: any owner)"
	if ownerDefault != "" {
		help = "owner of the object"
	}
	fs.StringVar(&k.owner, "owner", ownerDefault, help)
	fs.StringVarP(&k.namespace, "namespace", "n", DefaultNamespace, "namespace of the object")
}

func (k *keyOpts) key(name string) *ipamv1.Key {
	return &ipamv1.Key{Owner: k.owner, Namespace: k.namespace, Name: name}
}

// listOpts filter a list.
type listOpts struct {
	vrf    string
	owner  string
	labels labelFlag
}

func listFlags(withVRF bool) func(fs *flag.FlagSet) any {
	return func(fs *flag.FlagSet) any {
		o := &listOpts{labels: labelFlag{}}
		if withVRF {
			fs.StringVar(&o.vrf, "vrf", "", "only objects of this network instance")
		}
		fs.StringVar(&o.owner, "owner", "", "only objects of this owner")
		fs.VarP(o.labels, "label", "l", "only objects with this label key=value (repeatable)")
		return o
	}
}

func getFlags(fs *flag.FlagSet) any {
	o := &keyOpts{}
	o.register(fs, "")
	return o
}

var commands = []command{
	{name: "vrf list", short: "list network instances", flags: listFlags(false), run: runList(ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE)},
	{name: "vrf get", short: "show a network instance", args: "NAME", nargs: 1, flags: getFlags, run: runGet(ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE)},
	{name: "vrf create", short: "create a network instance", args: "NAME [--prefix P]... [--label k=v]...", nargs: 1, flags: vrfCreateFlags, run: runVRFCreate},
	{name: "vrf delete", short: "delete a network instance", args: "NAME", nargs: 1, flags: getFlags, run: runDelete(ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE)},

	{name: "prefix list", short: "list prefixes", flags: listFlags(true), run: runList(ipamv1.ObjectKind_OBJECT_KIND_PREFIX)},
	{name: "prefix get", short: "show a prefix", args: "NAME", nargs: 1, flags: getFlags, run: runGet(ipamv1.ObjectKind_OBJECT_KIND_PREFIX)},
	{name: "prefix create", short: "create a prefix", args: "NAME --vrf VRF --prefix P [--kind K] [--network N] [--label k=v]...", nargs: 1, flags: prefixCreateFlags, run: runPrefixCreate},
	{name: "prefix delete", short: "delete a prefix", args: "NAME", nargs: 1, flags: getFlags, run: runDelete(ipamv1.ObjectKind_OBJECT_KIND_PREFIX)},

	{name: "range list", short: "list ranges", flags: listFlags(true), run: runList(ipamv1.ObjectKind_OBJECT_KIND_RANGE)},
	{name: "range get", short: "show a range", args: "NAME", nargs: 1, flags: getFlags, run: runGet(ipamv1.ObjectKind_OBJECT_KIND_RANGE)},
	{name: "range create", short: "create a range", args: "NAME --vrf VRF --start A --end B [--label k=v]... [--prefix-length N] [--gateway G]", nargs: 1, flags: rangeCreateFlags, run: runRangeCreate},
	{name: "range delete", short: "delete a range", args: "NAME", nargs: 1, flags: getFlags, run: runDelete(ipamv1.ObjectKind_OBJECT_KIND_RANGE)},

	{name: "alloc list", short: "list allocations", flags: listFlags(true), run: runList(ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION)},
	{name: "alloc get", short: "show an allocation", args: "NAME", nargs: 1, flags: getFlags, run: runGet(ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION)},
	{name: "alloc create", short: "create an allocation", args: "NAME --selector k=v... [--vrf VRF] [--kind K] [--prefix-length N] [--prefix P] [--family F] [--count N]", nargs: 1, flags: allocCreateFlags, run: runAllocCreate},
	{name: "alloc delete", short: "release an allocation", args: "NAME", nargs: 1, flags: getFlags, run: runDelete(ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION)},

	{name: "tree", short: "print a network instance's prefix tree with utilization", args: "VRF", nargs: 1, flags: func(*flag.FlagSet) any { return nil }, run: runTree},
	{name: "audit", short: "compare the kpt packages under directories (a Git checkout) with ipam-server", args: "DIR...", nargs: -1, flags: auditFlags, run: runAudit},
}

// resources are the command groups, with their other names.
var resources = []struct {
	name, short string
	aliases     []string
}{
	{"vrf", "network instances (VRFs)", []string{"vrfs", "networkinstance", "networkinstances", "ni"}},
	{"prefix", "IPPrefixes: aggregates, networks, pools, loopbacks and static addresses", []string{"prefixes", "ipprefix", "ipprefixes"}},
	{"range", "IP ranges with exclusions and pre-allocations", []string{"ranges", "iprange", "ipranges"}},
	{"alloc", "IPAllocations: addresses, blocks and sub-prefixes", []string{"allocs", "allocation", "allocations", "ipallocation", "ipallocations"}},
}

// verbAliases are other names of the verbs.
var verbAliases = map[string][]string{
	"list": {"ls"}, "get": {"show"}, "create": {"add"}, "delete": {"rm", "del", "release"},
}

func runList(kind ipamv1.ObjectKind) func(context.Context, ipamv1.IPAMClient, *printer, []string, any) error {
	return func(ctx context.Context, c ipamv1.IPAMClient, out *printer, _ []string, opts any) error {
		o := opts.(*listOpts)
		var objs []*ipamv1.Object
		token := ""
		for {
			resp, err := c.List(ctx, &ipamv1.ListRequest{Kind: kind, NetworkInstance: o.vrf, Owner: o.owner, Labels: o.labels, PageToken: token})
			if err != nil {
				return err
			}
			objs = append(objs, resp.GetObjects()...)
			if token = resp.GetNextPageToken(); token == "" {
				break
			}
		}
		if kind == ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE && (out.format == "table" || out.format == "wide") {
			if err := countPrefixes(ctx, c, out); err != nil {
				return err
			}
		}
		return out.objects(kind, objs, true)
	}
}

// countPrefixes counts the prefixes of each network instance for the
// PREFIXES column, in one scan of the prefixes.
func countPrefixes(ctx context.Context, c ipamv1.IPAMClient, out *printer) error {
	out.prefixes = map[string]int{}
	token := ""
	for {
		resp, err := c.List(ctx, &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_PREFIX, PageToken: token})
		if err != nil {
			return err
		}
		for _, o := range resp.GetObjects() {
			out.prefixes[o.GetPrefix().GetPrefix().GetNetworkInstance()]++
		}
		if token = resp.GetNextPageToken(); token == "" {
			return nil
		}
	}
}

func runGet(kind ipamv1.ObjectKind) func(context.Context, ipamv1.IPAMClient, *printer, []string, any) error {
	return func(ctx context.Context, c ipamv1.IPAMClient, out *printer, pos []string, opts any) error {
		key := opts.(*keyOpts).key(pos[0])
		obj, err := get(ctx, c, kind, key)
		if status.Code(err) == codes.NotFound && key.GetOwner() != "" {
			if owners := otherOwners(ctx, c, kind, key); len(owners) > 0 {
				return status.Errorf(codes.NotFound, "%s %s not found under owner %s; it exists under owner %s (use --owner %s)",
					ipamv1.KindName(kind), keyString(&ipamv1.Key{Namespace: key.GetNamespace(), Name: key.GetName()}), key.GetOwner(),
					strings.Join(owners, ", "), owners[0])
			}
		}
		if err != nil {
			return err
		}
		return out.objects(kind, []*ipamv1.Object{obj}, false)
	}
}

// otherOwners lists the owners under which an object of kind with key's
// namespace and name exists (at most 10 pages are read).
func otherOwners(ctx context.Context, c ipamv1.IPAMClient, kind ipamv1.ObjectKind, key *ipamv1.Key) []string {
	var owners []string
	token := ""
	for range 10 {
		resp, err := c.List(ctx, &ipamv1.ListRequest{Kind: kind, PageToken: token})
		if err != nil {
			return owners
		}
		for _, o := range resp.GetObjects() {
			if k := objectKey(o); k.GetName() == key.GetName() && k.GetNamespace() == key.GetNamespace() {
				owners = append(owners, k.GetOwner())
			}
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	return owners
}

func get(ctx context.Context, c ipamv1.IPAMClient, kind ipamv1.ObjectKind, key *ipamv1.Key) (*ipamv1.Object, error) {
	resp, err := c.Get(ctx, &ipamv1.GetRequest{Kind: kind, Key: key})
	if err != nil {
		return nil, err
	}
	return resp.GetObject(), nil
}

// runDelete deletes (or releases) an object. Without --owner the object is
// looked up first so that its owner's copy is the one deleted.
func runDelete(kind ipamv1.ObjectKind) func(context.Context, ipamv1.IPAMClient, *printer, []string, any) error {
	return func(ctx context.Context, c ipamv1.IPAMClient, out *printer, pos []string, opts any) error {
		key := opts.(*keyOpts).key(pos[0])
		if key.Owner == "" || kind == ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE {
			obj, err := get(ctx, c, kind, key)
			if err != nil {
				return err
			}
			key = objectKey(obj)
		}
		req := &ipamv1.DeleteRequest{Key: key}
		var err error
		verb := "deleted"
		switch kind {
		case ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE:
			_, err = c.DeleteNetworkInstance(ctx, req)
		case ipamv1.ObjectKind_OBJECT_KIND_PREFIX:
			_, err = c.DeletePrefix(ctx, req)
		case ipamv1.ObjectKind_OBJECT_KIND_RANGE:
			_, err = c.DeleteRange(ctx, req)
		case ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION:
			_, err = c.Release(ctx, req)
			verb = "released"
		}
		if err != nil {
			return err
		}
		return out.message(fmt.Sprintf("%s %s %s", ipamv1.KindName(kind), keyString(key), verb))
	}
}

// show prints an object as the server stores it (after a create).
func show(ctx context.Context, c ipamv1.IPAMClient, out *printer, kind ipamv1.ObjectKind, key *ipamv1.Key) error {
	obj, err := get(ctx, c, kind, key)
	if err != nil {
		return err
	}
	return out.objects(kind, []*ipamv1.Object{obj}, false)
}

// --- create ------------------------------------------------------------------

type vrfCreateOpts struct {
	keyOpts
	prefixes listFlag
	labels   labelFlag
}

func vrfCreateFlags(fs *flag.FlagSet) any {
	o := &vrfCreateOpts{labels: labelFlag{}}
	o.register(fs, DefaultOwner)
	fs.Var(&o.prefixes, "prefix", "an aggregate prefix the network instance owns (repeatable)")
	fs.VarP(o.labels, "label", "l", "a label key=value (repeatable)")
	return o
}

func runVRFCreate(ctx context.Context, c ipamv1.IPAMClient, out *printer, pos []string, opts any) error {
	o := opts.(*vrfCreateOpts)
	ni := &ipamv1.NetworkInstance{Key: o.key(pos[0]), Labels: o.labels}
	for _, p := range o.prefixes {
		ni.Prefixes = append(ni.Prefixes, &ipamv1.VRFPrefix{Prefix: p})
	}
	if _, err := c.CreateNetworkInstance(ctx, &ipamv1.CreateNetworkInstanceRequest{NetworkInstance: ni}); err != nil {
		return err
	}
	return show(ctx, c, out, ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE, ni.GetKey())
}

type prefixCreateOpts struct {
	keyOpts
	vrf, prefix, kind, network string
	allocateReserved, gwBlocks bool
	labels                     labelFlag
	exclude                    listFlag
}

func prefixCreateFlags(fs *flag.FlagSet) any {
	o := &prefixCreateOpts{labels: labelFlag{}}
	o.register(fs, DefaultOwner)
	fs.StringVar(&o.vrf, "vrf", "", "network instance (required)")
	fs.StringVar(&o.prefix, "prefix", "", "the prefix, e.g. 10.0.1.1/24 (required)")
	fs.StringVar(&o.kind, "kind", "network", "aggregate, network, pool or loopback")
	fs.StringVar(&o.network, "network", "", "network name (nephio.org/network-name)")
	fs.VarP(o.labels, "label", "l", "a label key=value (repeatable)")
	fs.Var(&o.exclude, "exclude", "an excluded address range START-END of a network prefix (repeatable)")
	fs.BoolVar(&o.allocateReserved, "allocate-reserved", false, "let a network hand out its first and last addresses")
	fs.BoolVar(&o.gwBlocks, "gateway-in-blocks", false, "let blocks (--count) of a network contain its gateway, as NVIDIA's per-node blocks do")
	return o
}

func runPrefixCreate(ctx context.Context, c ipamv1.IPAMClient, out *printer, pos []string, opts any) error {
	o := opts.(*prefixCreateOpts)
	if o.vrf == "" || o.prefix == "" {
		return usagef("prefix create: --vrf and --prefix are required")
	}
	excl, err := ranges("--exclude", o.exclude)
	if err != nil {
		return err
	}
	p := &ipamv1.Prefix{Key: o.key(pos[0]), NetworkInstance: o.vrf, Kind: o.kind, Prefix: o.prefix, Network: o.network,
		Labels: o.labels, Exclusions: excl, AllocateReserved: o.allocateReserved, GatewayInBlocks: o.gwBlocks}
	if _, err := c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: p}); err != nil {
		return err
	}
	return show(ctx, c, out, ipamv1.ObjectKind_OBJECT_KIND_PREFIX, p.GetKey())
}

type rangeCreateOpts struct {
	keyOpts
	vrf, start, end, gateway string
	prefixLength             int
	allocateReserved         bool
	labels                   labelFlag
	pre                      labelFlag
	exclude                  listFlag
}

func rangeCreateFlags(fs *flag.FlagSet) any {
	o := &rangeCreateOpts{labels: labelFlag{}, pre: labelFlag{}}
	o.register(fs, DefaultOwner)
	fs.StringVar(&o.vrf, "vrf", "", "network instance (required)")
	fs.StringVar(&o.start, "start", "", "first address (required)")
	fs.StringVar(&o.end, "end", "", "last address (required)")
	fs.VarP(o.labels, "label", "l", "a label key=value (repeatable)")
	fs.Var(o.pre, "pre-alloc", "reserve an address for the allocation of a name: NAME=ADDRESS (repeatable)")
	fs.Var(&o.exclude, "exclude", "an excluded address range START-END (repeatable)")
	fs.IntVar(&o.prefixLength, "prefix-length", 0, "write the range's addresses with this length instead of the network's")
	fs.StringVar(&o.gateway, "gateway", "", "return this gateway with the range's addresses instead of the network's")
	fs.BoolVar(&o.allocateReserved, "allocate-reserved", false, "let the range hand out the reserved first and last addresses of its network")
	return o
}

func runRangeCreate(ctx context.Context, c ipamv1.IPAMClient, out *printer, pos []string, opts any) error {
	o := opts.(*rangeCreateOpts)
	if o.vrf == "" || o.start == "" || o.end == "" {
		return usagef("range create: --vrf, --start and --end are required")
	}
	excl, err := ranges("--exclude", o.exclude)
	if err != nil {
		return err
	}
	r := &ipamv1.IPRange{Key: o.key(pos[0]), NetworkInstance: o.vrf, Start: o.start, End: o.end, Labels: o.labels,
		PreAllocations: o.pre, Exclusions: excl, PrefixLength: int32(o.prefixLength), Gateway: o.gateway,
		AllocateReserved: o.allocateReserved}
	if _, err := c.CreateRange(ctx, &ipamv1.CreateRangeRequest{Range: r}); err != nil {
		return err
	}
	return show(ctx, c, out, ipamv1.ObjectKind_OBJECT_KIND_RANGE, r.GetKey())
}

type allocCreateOpts struct {
	keyOpts
	vrf, kind, prefix, family string
	prefixLength, count       int
	selector, labels          labelFlag
}

func allocCreateFlags(fs *flag.FlagSet) any {
	o := &allocCreateOpts{selector: labelFlag{}, labels: labelFlag{}}
	o.register(fs, DefaultOwner)
	fs.VarP(o.selector, "selector", "s", "a label key=value the prefix to allocate from must carry (repeatable)")
	fs.StringVar(&o.vrf, "vrf", "", "network instance (or the selector nephio.org/network-instance=VRF)")
	fs.StringVar(&o.kind, "kind", "", "network (default), pool or loopback")
	fs.IntVar(&o.prefixLength, "prefix-length", 0, "allocate a sub-prefix of this length")
	fs.StringVar(&o.prefix, "prefix", "", "allocate exactly this address or prefix, e.g. 10.0.1.20/24")
	fs.StringVar(&o.family, "family", "", "address family: ipv4 or ipv6")
	fs.IntVar(&o.count, "count", 0, "allocate a block of this many consecutive addresses")
	fs.VarP(o.labels, "label", "l", "a label of the allocation key=value (repeatable)")
	return o
}

func runAllocCreate(ctx context.Context, c ipamv1.IPAMClient, out *printer, pos []string, opts any) error {
	o := opts.(*allocCreateOpts)
	a := &ipamv1.Allocation{Key: o.key(pos[0]), NetworkInstance: o.vrf, Kind: o.kind, PrefixLength: int32(o.prefixLength),
		Prefix: o.prefix, AddressFamily: o.family, Selector: o.selector, Labels: o.labels, Count: int32(o.count)}
	if _, err := c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: a}); err != nil {
		return err
	}
	return show(ctx, c, out, ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, a.GetKey())
}

// ranges parses START-END flag values.
func ranges(flagName string, vals []string) ([]*ipamv1.AddrRange, error) {
	var out []*ipamv1.AddrRange
	for _, v := range vals {
		start, end, ok := strings.Cut(v, "-")
		if !ok {
			start, end = v, v
		}
		if start == "" || end == "" {
			return nil, usagef("%s %q: want START-END", flagName, v)
		}
		out = append(out, &ipamv1.AddrRange{Start: start, End: end})
	}
	return out, nil
}

func runTree(ctx context.Context, c ipamv1.IPAMClient, out *printer, pos []string, _ any) error {
	resp, err := c.Tree(ctx, &ipamv1.TreeRequest{NetworkInstance: pos[0]})
	if err != nil {
		return err
	}
	return out.tree(resp)
}
