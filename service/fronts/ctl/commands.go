package ctl

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

// command is one "RESOURCE VERB" (or "tree") of ipamctl.
type command struct {
	name  string // "vrf list", "tree", ...
	args  string // positional arguments, for usage
	nargs int
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
	fs.StringVar(&k.namespace, "namespace", DefaultNamespace, "namespace of the object")
	fs.StringVar(&k.namespace, "n", DefaultNamespace, "namespace of the object (short)")
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
		fs.Var(o.labels, "label", "only objects with this label key=value (repeatable)")
		fs.Var(o.labels, "l", "short for --label")
		return o
	}
}

func getFlags(fs *flag.FlagSet) any {
	o := &keyOpts{}
	o.register(fs, "")
	return o
}

var commands = []command{
	{name: "vrf list", flags: listFlags(false), run: runList(ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE)},
	{name: "vrf get", args: "NAME", nargs: 1, flags: getFlags, run: runGet(ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE)},
	{name: "vrf create", args: "NAME [--prefix P]... [--label k=v]...", nargs: 1, flags: vrfCreateFlags, run: runVRFCreate},
	{name: "vrf delete", args: "NAME", nargs: 1, flags: getFlags, run: runDelete(ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE)},

	{name: "prefix list", flags: listFlags(true), run: runList(ipamv1.ObjectKind_OBJECT_KIND_PREFIX)},
	{name: "prefix get", args: "NAME", nargs: 1, flags: getFlags, run: runGet(ipamv1.ObjectKind_OBJECT_KIND_PREFIX)},
	{name: "prefix create", args: "NAME --vrf VRF --prefix P [--kind K] [--network N] [--label k=v]...", nargs: 1, flags: prefixCreateFlags, run: runPrefixCreate},
	{name: "prefix delete", args: "NAME", nargs: 1, flags: getFlags, run: runDelete(ipamv1.ObjectKind_OBJECT_KIND_PREFIX)},

	{name: "range list", flags: listFlags(true), run: runList(ipamv1.ObjectKind_OBJECT_KIND_RANGE)},
	{name: "range get", args: "NAME", nargs: 1, flags: getFlags, run: runGet(ipamv1.ObjectKind_OBJECT_KIND_RANGE)},
	{name: "range create", args: "NAME --vrf VRF --start A --end B [--label k=v]...", nargs: 1, flags: rangeCreateFlags, run: runRangeCreate},
	{name: "range delete", args: "NAME", nargs: 1, flags: getFlags, run: runDelete(ipamv1.ObjectKind_OBJECT_KIND_RANGE)},

	{name: "alloc list", flags: listFlags(true), run: runList(ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION)},
	{name: "alloc get", args: "NAME", nargs: 1, flags: getFlags, run: runGet(ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION)},
	{name: "alloc create", args: "NAME --selector k=v... [--vrf VRF] [--kind K] [--prefix-length N] [--prefix P] [--family F] [--count N]", nargs: 1, flags: allocCreateFlags, run: runAllocCreate},
	{name: "alloc delete", args: "NAME", nargs: 1, flags: getFlags, run: runDelete(ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION)},

	{name: "tree", args: "VRF", nargs: 1, flags: func(*flag.FlagSet) any { return nil }, run: runTree},
}

// aliases are other names of the resources.
var aliases = map[string]string{
	"vrfs": "vrf", "networkinstance": "vrf", "networkinstances": "vrf", "ni": "vrf",
	"prefixes": "prefix", "ipprefix": "prefix", "ipprefixes": "prefix",
	"ranges": "range", "iprange": "range", "ipranges": "range",
	"allocs": "alloc", "allocation": "alloc", "allocations": "alloc", "ipallocation": "alloc", "ipallocations": "alloc",
	"ls": "list", "show": "get", "add": "create", "rm": "delete", "del": "delete", "release": "delete",
}

func canonical(w string) string {
	if a, ok := aliases[strings.ToLower(w)]; ok {
		return a
	}
	return strings.ToLower(w)
}

// lookup finds the command named by the first words of args.
func lookup(args []string) (*command, error) {
	if canonical(args[0]) == "tree" {
		return &commands[len(commands)-1], nil
	}
	if len(args) < 2 {
		return nil, fmt.Errorf("%s: missing verb (list, get, create or delete)", args[0])
	}
	name := canonical(args[0]) + " " + canonical(args[1])
	for i := range commands {
		if commands[i].name == name {
			return &commands[i], nil
		}
	}
	return nil, fmt.Errorf("unknown command %q", args[0]+" "+args[1])
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
		return out.objects(kind, objs, true)
	}
}

func runGet(kind ipamv1.ObjectKind) func(context.Context, ipamv1.IPAMClient, *printer, []string, any) error {
	return func(ctx context.Context, c ipamv1.IPAMClient, out *printer, pos []string, opts any) error {
		obj, err := get(ctx, c, kind, opts.(*keyOpts).key(pos[0]))
		if err != nil {
			return err
		}
		return out.objects(kind, []*ipamv1.Object{obj}, false)
	}
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
		return out.message(fmt.Sprintf("%s %s %s", kindName[kind], keyString(key), verb))
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
	fs.Var(o.labels, "label", "a label key=value (repeatable)")
	fs.Var(o.labels, "l", "short for --label")
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
	fs.Var(o.labels, "label", "a label key=value (repeatable)")
	fs.Var(o.labels, "l", "short for --label")
	fs.Var(&o.exclude, "exclude", "an excluded address range START-END of a network prefix (repeatable)")
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
		Labels: o.labels, Exclusions: excl}
	if _, err := c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: p}); err != nil {
		return err
	}
	return show(ctx, c, out, ipamv1.ObjectKind_OBJECT_KIND_PREFIX, p.GetKey())
}

type rangeCreateOpts struct {
	keyOpts
	vrf, start, end string
	labels          labelFlag
	pre             labelFlag
	exclude         listFlag
}

func rangeCreateFlags(fs *flag.FlagSet) any {
	o := &rangeCreateOpts{labels: labelFlag{}, pre: labelFlag{}}
	o.register(fs, DefaultOwner)
	fs.StringVar(&o.vrf, "vrf", "", "network instance (required)")
	fs.StringVar(&o.start, "start", "", "first address (required)")
	fs.StringVar(&o.end, "end", "", "last address (required)")
	fs.Var(o.labels, "label", "a label key=value (repeatable)")
	fs.Var(o.labels, "l", "short for --label")
	fs.Var(o.pre, "pre-alloc", "reserve an address for the allocation of a name: NAME=ADDRESS (repeatable)")
	fs.Var(&o.exclude, "exclude", "an excluded address range START-END (repeatable)")
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
		PreAllocations: o.pre, Exclusions: excl}
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
	fs.Var(o.selector, "selector", "a label key=value the prefix to allocate from must carry (repeatable)")
	fs.Var(o.selector, "s", "short for --selector")
	fs.StringVar(&o.vrf, "vrf", "", "network instance (or the selector nephio.org/network-instance=VRF)")
	fs.StringVar(&o.kind, "kind", "", "network (default), pool or loopback")
	fs.IntVar(&o.prefixLength, "prefix-length", 0, "allocate a sub-prefix of this length")
	fs.StringVar(&o.prefix, "prefix", "", "allocate exactly this address or prefix, e.g. 10.0.1.20/24")
	fs.StringVar(&o.family, "family", "", "address family: ipv4 or ipv6")
	fs.IntVar(&o.count, "count", 0, "allocate a block of this many consecutive addresses")
	fs.Var(o.labels, "label", "a label of the allocation key=value (repeatable)")
	fs.Var(o.labels, "l", "short for --label")
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
