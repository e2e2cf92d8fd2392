package ctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

var plural = map[ipamv1.ObjectKind]string{
	ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE: "network instances",
	ipamv1.ObjectKind_OBJECT_KIND_PREFIX:           "prefixes",
	ipamv1.ObjectKind_OBJECT_KIND_RANGE:            "ranges",
	ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION:       "allocations",
}

// formats are the output formats of -o.
var formats = []string{"table", "wide", "yaml", "json", "name"}

// resourceName is how -o name names a kind: the command group.
var resourceName = map[ipamv1.ObjectKind]string{
	ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE: "vrf",
	ipamv1.ObjectKind_OBJECT_KIND_PREFIX:           "prefix",
	ipamv1.ObjectKind_OBJECT_KIND_RANGE:            "range",
	ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION:       "alloc",
}

// printer writes results as an aligned table (wide: with more columns),
// YAML, JSON, or one resource/name per line.
type printer struct {
	format string
	w      io.Writer
	// prefixes counts the prefixes of each network instance (vrf list).
	prefixes map[string]int
}

func newPrinter(format string, w io.Writer) (*printer, error) {
	if slices.Contains(formats, format) {
		return &printer{format: format, w: w}, nil
	}
	return nil, fmt.Errorf("-o %s: unknown output format (%s)", format, strings.Join(formats, ", "))
}

// objects prints objects of one kind; list says whether the user asked for
// a list (YAML and JSON then print a sequence even of one object).
func (p *printer) objects(kind ipamv1.ObjectKind, objs []*ipamv1.Object, list bool) error {
	if p.format == "name" {
		for _, o := range objs {
			if _, err := fmt.Fprintf(p.w, "%s/%s\n", resourceName[kind], objectKey(o).GetName()); err != nil {
				return err
			}
		}
		return nil
	}
	wide := p.format == "wide"
	if !wide && p.format != "table" {
		msgs := make([]proto.Message, len(objs))
		for i, o := range objs {
			msgs[i] = inner(o)
		}
		return p.structured(list, msgs...)
	}
	if len(objs) == 0 {
		_, err := fmt.Fprintf(p.w, "No %s found.\n", plural[kind])
		return err
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	switch kind {
	case ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE:
		row(tw, "NAME", "OWNER", "NAMESPACE", "AGGREGATES", "PREFIXES", "LABELS")
		for _, o := range objs {
			ni := o.GetNetworkInstance()
			var ps []string
			for _, vp := range ni.GetPrefixes() {
				ps = append(ps, vp.GetPrefix())
			}
			n := "-"
			if p.prefixes != nil {
				n = strconv.Itoa(p.prefixes[ni.GetKey().GetName()])
			}
			row(tw, ni.GetKey().GetName(), ni.GetKey().GetOwner(), ni.GetKey().GetNamespace(), strings.Join(ps, ","), n, labels(ni.GetLabels()))
		}
	case ipamv1.ObjectKind_OBJECT_KIND_PREFIX:
		row(tw, "NAMESPACE", "NAME", "VRF", "KIND", "PREFIX", "NETWORK", "GATEWAY", "OWNER", "LABELS")
		for _, o := range objs {
			pr := o.GetPrefix()
			x := pr.GetPrefix()
			row(tw, x.GetKey().GetNamespace(), x.GetKey().GetName(), x.GetNetworkInstance(), x.GetKind(), x.GetPrefix(), x.GetNetwork(),
				pr.GetResult().GetGateway(), x.GetKey().GetOwner(), labels(x.GetLabels()))
		}
	case ipamv1.ObjectKind_OBJECT_KIND_RANGE:
		row(tw, "NAMESPACE", "NAME", "VRF", "START", "END", "OWNER", "LABELS")
		for _, o := range objs {
			r := o.GetRange()
			row(tw, r.GetKey().GetNamespace(), r.GetKey().GetName(), r.GetNetworkInstance(), r.GetStart(), r.GetEnd(), r.GetKey().GetOwner(), labels(r.GetLabels()))
		}
	case ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION:
		head := []string{"NAMESPACE", "NAME", "VRF", "KIND", "PREFIX", "GATEWAY", "OWNER", "SELECTOR"}
		if wide {
			head = append(head, "LABELS", "REQUESTED")
		}
		row(tw, head...)
		for _, o := range objs {
			ar := o.GetAllocation()
			a, res := ar.GetAllocation(), ar.GetResult()
			prefix := res.GetPrefix()
			if res.GetLast() != "" {
				prefix += " - " + res.GetLast()
			}
			cells := []string{a.GetKey().GetNamespace(), a.GetKey().GetName(), res.GetNetworkInstance(), a.GetKind(), prefix, res.GetGateway(),
				a.GetKey().GetOwner(), labels(a.GetSelector())}
			if wide {
				cells = append(cells, labels(a.GetLabels()), requested(a))
			}
			row(tw, cells...)
		}
	}
	return tw.Flush()
}

// requested renders what an allocation asked for beyond its selector.
func requested(a *ipamv1.Allocation) string {
	var parts []string
	if a.GetPrefix() != "" {
		parts = append(parts, "prefix="+a.GetPrefix())
	}
	if a.GetPrefixLength() != 0 {
		parts = append(parts, fmt.Sprintf("length=%d", a.GetPrefixLength()))
	}
	if a.GetCount() != 0 {
		parts = append(parts, fmt.Sprintf("count=%d", a.GetCount()))
	}
	if a.GetAddressFamily() != "" {
		parts = append(parts, "family="+a.GetAddressFamily())
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// tree prints a network instance's hierarchy, indented by depth.
func (p *printer) tree(resp *ipamv1.TreeResponse) error {
	if p.format == "name" {
		return fmt.Errorf("-o name: a tree has no names; use table, wide, yaml or json")
	}
	if p.format != "table" && p.format != "wide" {
		return p.structured(false, resp)
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	row(tw, "PREFIX", "KIND", "NAME", "OWNER", "USED/TOTAL", "UTIL")
	for _, n := range resp.GetNodes() {
		util := "-"
		if n.GetTotal() > 0 {
			util = fmt.Sprintf("%.1f%%", 100*float64(n.GetUsed())/float64(n.GetTotal()))
		}
		name := n.GetName()
		if n.GetStaticOnly() {
			name += " (static addresses only)"
		}
		row(tw, strings.Repeat("  ", int(n.GetDepth()))+n.GetPrefix(), n.GetKind(), name, n.GetOwner(),
			count(n.GetUsed(), n.GetPrefix())+"/"+count(n.GetTotal(), n.GetPrefix()), util)
	}
	return tw.Flush()
}

// count renders an address count; the server saturates counts at 2^64-1,
// which for a prefix bigger than that is shown as a power of two.
func count(n uint64, prefix string) string {
	if n == math.MaxUint64 {
		if p, err := netip.ParsePrefix(prefix); err == nil && p.Addr().BitLen()-p.Bits() >= 64 {
			return fmt.Sprintf("2^%d", p.Addr().BitLen()-p.Bits())
		}
	}
	return strconv.FormatUint(n, 10)
}

// message prints a one-line outcome.
func (p *printer) message(s string) error {
	_, err := fmt.Fprintln(p.w, s)
	return err
}

// structured prints one message as a YAML/JSON document, or a list as a
// sequence. protojson's output is re-indented so that it is stable.
func (p *printer) structured(list bool, msgs ...proto.Message) error {
	var buf bytes.Buffer
	if list {
		buf.WriteByte('[')
	}
	for i, m := range msgs {
		if i > 0 {
			buf.WriteByte(',')
		}
		b, err := protojson.Marshal(m)
		if err != nil {
			return err
		}
		buf.Write(b)
	}
	if list {
		buf.WriteByte(']')
	}
	var compact, out bytes.Buffer
	if err := json.Compact(&compact, buf.Bytes()); err != nil {
		return err
	}
	if p.format == "yaml" {
		y, err := yaml.JSONToYAML(compact.Bytes())
		if err != nil {
			return err
		}
		_, err = p.w.Write(y)
		return err
	}
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err := p.w.Write(out.Bytes())
	return err
}

// inner returns the object inside the oneof.
func inner(o *ipamv1.Object) proto.Message {
	switch x := o.GetObject().(type) {
	case *ipamv1.Object_NetworkInstance:
		return x.NetworkInstance
	case *ipamv1.Object_Prefix:
		return x.Prefix
	case *ipamv1.Object_Range:
		return x.Range
	case *ipamv1.Object_Allocation:
		return x.Allocation
	}
	return o
}

func row(w io.Writer, cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
	}
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

func labels(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

// objectKey returns the key of any object.
func objectKey(o *ipamv1.Object) *ipamv1.Key {
	switch x := o.GetObject().(type) {
	case *ipamv1.Object_NetworkInstance:
		return x.NetworkInstance.GetKey()
	case *ipamv1.Object_Prefix:
		return x.Prefix.GetPrefix().GetKey()
	case *ipamv1.Object_Range:
		return x.Range.GetKey()
	case *ipamv1.Object_Allocation:
		return x.Allocation.GetAllocation().GetKey()
	}
	return nil
}

func keyString(k *ipamv1.Key) string {
	if k.GetNamespace() == "" {
		return k.GetName()
	}
	return k.GetNamespace() + "/" + k.GetName()
}
