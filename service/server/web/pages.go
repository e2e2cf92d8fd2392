package web

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/nephio-project/ipam/service/ipam"
)

// page is what every template gets: the title, the change stream the page
// follows, and the page's own data.
type page struct {
	Title  string
	Events string // URL of the page's live-update stream
	Query  string // the search box's text
	Data   any
}

// usage is a utilization bar.
type usage struct {
	Used, Total uint64
}

// Percent is the used share in percent, rounded down to a tenth.
func (u usage) Percent() string {
	if u.Total == 0 {
		return "0"
	}
	p := float64(u.Used) / float64(u.Total) * 100
	return strconv.FormatFloat(float64(int(p*10))/10, 'f', -1, 64)
}

// owner is an owner with the link to its package, when known.
type owner struct {
	Name   string
	Source string       // as sent
	Link   template.URL // set only for http(s) sources
}

// ownerCache looks up the source of each owner once per page.
type ownerCache struct {
	a     *ipam.Allocator
	known map[string]owner
}

func (c *ownerCache) get(name string) owner {
	if o, ok := c.known[name]; ok {
		return o
	}
	o := owner{Name: name, Source: c.a.OwnerOf(name).Source}
	if u, err := url.Parse(o.Source); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" {
		o.Link = template.URL(u.String())
	}
	if c.known == nil {
		c.known = map[string]owner{}
	}
	c.known[name] = o
	return o
}

// render writes template name with p, or a 500.
func (h *handler) render(w http.ResponseWriter, name string, p page) {
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		h.cfg.Log.Error("web view template", "page", name, "err", err)
		http.Error(w, "rendering failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

// fail answers a request the view cannot serve with its status and a
// message naming what is wrong.
func (h *handler) fail(w http.ResponseWriter, err error) {
	code := http.StatusBadRequest
	if errors.Is(err, ipam.ErrNotFound) {
		code = http.StatusNotFound
	}
	http.Error(w, capText(err.Error(), 512), code)
}

// pageNumber reads the page parameter (0 when absent).
func pageNumber(r *http.Request) (int, error) {
	s, err := param(r, "page")
	if err != nil || s == "" {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 1<<24 {
		return 0, fmt.Errorf("parameter page: %q is not a page number", s)
	}
	return n, nil
}

// vrfRow is a network instance of the list.
type vrfRow struct {
	Name     string
	Owner    owner
	Prefixes int
	Families []familyUsage
}

type familyUsage struct {
	Family string
	Usage  usage
}

type vrfListData struct {
	Rows       []vrfRow
	Page, Next int
	More       bool
	Total      int
}

func (h *handler) vrfList(w http.ResponseWriter, r *http.Request) {
	n, err := pageNumber(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	a := h.cfg.Allocator
	nis := a.ListNetworkInstances(ipam.Filter{})
	d := vrfListData{Page: n, Next: n + 1, Total: len(nis)}
	from := min(n*VRFPageSize, len(nis))
	to := min(from+VRFPageSize, len(nis))
	d.More = to < len(nis)
	owners := &ownerCache{a: a}
	for _, ni := range nis[from:to] {
		row := vrfRow{Name: ni.Key.Name, Owner: owners.get(ni.Key.Owner)}
		sum, err := a.Summarize(ni.Key.Name)
		if err != nil {
			continue // deleted since the list was read
		}
		row.Prefixes = sum.Prefixes
		for f, name := range []string{"IPv4", "IPv6"} {
			if sum.Total[f] > 0 {
				row.Families = append(row.Families, familyUsage{Family: name, Usage: usage{sum.Used[f], sum.Total[f]}})
			}
		}
		d.Rows = append(d.Rows, row)
	}
	h.render(w, "vrfs", page{Title: "Network instances", Events: "/events", Data: d})
}

// treeRow is a prefix of the tree.
type treeRow struct {
	ipam.TreeNode
	Indent    int
	Usage     usage
	Owner     owner
	Free      []string
	MoreFree  bool
	FreeCount uint64
	Link      string
}

type treeData struct {
	VRF        string
	Owner      owner
	Rows       []treeRow
	Page, Next int
	More       bool
	Total      int
}

func (h *handler) tree(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	n, err := pageNumber(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	a := h.cfg.Allocator
	ni, err := a.GetNetworkInstance(name)
	if err != nil {
		h.fail(w, err)
		return
	}
	nodes, err := a.Tree(name)
	if err != nil {
		h.fail(w, err)
		return
	}
	owners := &ownerCache{a: a}
	d := treeData{VRF: name, Owner: owners.get(ni.Key.Owner), Page: n, Next: n + 1, Total: len(nodes)}
	from := min(n*TreePageSize, len(nodes))
	to := min(from+TreePageSize, len(nodes))
	d.More = to < len(nodes)
	for _, tn := range nodes[from:to] {
		row := treeRow{TreeNode: tn, Indent: tn.Depth * 16, Usage: usage{tn.Used, tn.Total}, Owner: owners.get(tn.Owner),
			Link: prefixURL(name, tn.Prefix, nil), FreeCount: tn.Total - min(tn.Used, tn.Total)}
		if tn.Kind == ipam.KindAggregate || tn.Kind == ipam.KindPool {
			free, more, err := a.FreeBlocks(name, tn.Prefix, FreeBlocksShown)
			if err == nil {
				row.Free, row.MoreFree = rangeStrings(free), more
			}
		}
		d.Rows = append(d.Rows, row)
	}
	h.render(w, "tree", page{Title: name, Events: "/events?vrf=" + url.QueryEscape(name), Data: d})
}

// prefixURL is the page of prefix p of network instance vrf, from after
// (nil: the first page).
func prefixURL(vrf string, p netip.Prefix, after *ipam.Cursor) string {
	q := url.Values{"p": {p.String()}}
	if after != nil {
		q.Set("after", after.Addr.String())
		q.Set("owner", after.Key.Owner)
		q.Set("ns", after.Key.Namespace)
		q.Set("name", after.Key.Name)
	}
	return "/vrf/" + url.PathEscape(vrf) + "/prefix?" + q.Encode()
}

// cursorOf reads the page cursor of a prefix page: parameters after (an
// address), owner, ns and name; nil without after.
func cursorOf(r *http.Request) (*ipam.Cursor, error) {
	var c ipam.Cursor
	q := r.URL.Query()
	for k, dst := range map[string]*string{"owner": &c.Key.Owner, "ns": &c.Key.Namespace, "name": &c.Key.Name} {
		// Not trimmed: a name may end in a space.
		if *dst = q.Get(k); len(*dst) > MaxQuery {
			return nil, errors.New("parameter " + k + " exceeds " + strconv.Itoa(MaxQuery) + " bytes")
		}
	}
	s, err := param(r, "after")
	if err != nil || s == "" {
		return nil, err
	}
	if c.Addr, err = netip.ParseAddr(s); err != nil {
		return nil, fmt.Errorf("parameter after: %q is not an address", capText(s, 64))
	}
	return &c, nil
}

// allocRow is an allocation of a prefix's page.
type allocRow struct {
	Address  string
	Owner    owner
	Key      string
	Selector string
	Labels   string
	Gateway  string
}

type prefixData struct {
	VRF      string
	Node     ipam.TreeNode
	Usage    usage
	Owner    owner
	Free     []string
	MoreFree bool
	Rows     []allocRow
	Next     string
	First    string
}

func (h *handler) prefix(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ps, err := param(r, "p")
	if err != nil {
		h.fail(w, err)
		return
	}
	p, err := netip.ParsePrefix(ps)
	if err != nil {
		h.fail(w, fmt.Errorf("parameter p: %q is not a prefix such as 10.0.1.0/24", capText(ps, 64)))
		return
	}
	p = p.Masked()
	after, err := cursorOf(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	a := h.cfg.Allocator
	node, err := a.Node(name, p)
	if err != nil {
		h.fail(w, err)
		return
	}
	owners := &ownerCache{a: a}
	d := prefixData{VRF: name, Node: node, Usage: usage{node.Used, node.Total}, Owner: owners.get(node.Owner)}
	free, more, err := a.FreeBlocks(name, p, FreeBlocksOnPage)
	if err == nil {
		d.Free, d.MoreFree = rangeStrings(free), more
	}
	recs, more, err := a.PrefixAllocations(name, p, after, AllocationPageSize)
	if err != nil {
		h.fail(w, err)
		return
	}
	for _, rec := range recs {
		d.Rows = append(d.Rows, allocRowOf(rec, owners))
	}
	if more && len(recs) > 0 {
		last := recs[len(recs)-1]
		d.Next = prefixURL(name, p, &ipam.Cursor{Addr: last.Result.Prefix.Addr(), Key: last.Allocation.Key})
	}
	if after != nil {
		d.First = prefixURL(name, p, nil)
	}
	h.render(w, "prefix", page{Title: p.String() + " in " + name, Events: "/events?vrf=" + url.QueryEscape(name), Data: d})
}

func allocRowOf(rec ipam.AllocationRecord, owners *ownerCache) allocRow {
	res := rec.Result
	row := allocRow{Address: res.Prefix.String(), Owner: owners.get(rec.Allocation.Key.Owner),
		Key: rec.Allocation.Key.Namespace + "/" + rec.Allocation.Key.Name, Selector: labelText(rec.Allocation.Selector),
		Labels: labelText(rec.Allocation.Labels)}
	if res.Last.IsValid() {
		row.Address = res.Prefix.Addr().String() + " – " + res.Last.String()
	}
	if res.Gateway.IsValid() {
		row.Gateway = res.Gateway.String()
	}
	return row
}

// labelText is a label map as k=v pairs in key order.
func labelText(l ipam.Labels) string {
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(l)) {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k + "=" + l[k])
	}
	return b.String()
}

// rangeStrings writes ranges as CIDRs when they are one, else first – last.
func rangeStrings(rs []ipam.AddrRange) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, rangeString(r))
	}
	return out
}

func rangeString(r ipam.AddrRange) string {
	if r.Start == r.End {
		return r.Start.String()
	}
	for bits := r.Start.BitLen(); bits >= 0; bits-- {
		p := netip.PrefixFrom(r.Start, bits)
		if p.Masked().Addr() != r.Start {
			break
		}
		if last := lastOf(p); last == r.End {
			return p.String()
		}
	}
	return r.Start.String() + " – " + r.End.String()
}

// lastOf is the last address of p.
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Addr().As16()
	off := 0
	if p.Addr().Is4() {
		off = 12
	}
	for i := p.Bits(); i < p.Addr().BitLen(); i++ {
		b[off+i/8] |= 0x80 >> (i % 8)
	}
	a := netip.AddrFrom16(b)
	if p.Addr().Is4() {
		a = a.Unmap()
	}
	return a
}

// searchData is the result of a search.
type searchData struct {
	Query       string
	Holdings    []holdingRow
	Prefixes    []prefixRow
	Allocations []allocRow
	More        bool
	Hint        string
}

type holdingRow struct {
	VRF        string
	Node       ipam.TreeNode
	NodeLink   string
	Allocation *allocRow
	Holder     string
}

type prefixRow struct {
	VRF, Prefix, Kind, Key, Link string
	Owner                        owner
}

func (h *handler) search(w http.ResponseWriter, r *http.Request) {
	q, err := param(r, "q")
	if err != nil {
		h.fail(w, err)
		return
	}
	a := h.cfg.Allocator
	owners := &ownerCache{a: a}
	d := searchData{Query: q}
	switch addr, perr := netip.ParseAddr(q); {
	case q == "":
		d.Hint = "Search by address (10.0.1.7), prefix (10.0.1.0/24) or name."
	case perr == nil:
		for _, hd := range a.Lookup(addr) {
			row := holdingRow{VRF: hd.NetworkInstance, Node: hd.Node, NodeLink: prefixURL(hd.NetworkInstance, hd.Node.Prefix, nil), Holder: hd.Holder}
			if hd.Allocation != nil {
				ar := allocRowOf(*hd.Allocation, owners)
				row.Allocation = &ar
			}
			d.Holdings = append(d.Holdings, row)
		}
	default:
		if p, err := netip.ParsePrefix(q); err == nil {
			for _, ni := range a.ListNetworkInstances(ipam.Filter{}) {
				if tn, err := a.Node(ni.Key.Name, p); err == nil {
					d.Prefixes = append(d.Prefixes, prefixRow{VRF: ni.Key.Name, Prefix: tn.Prefix.String(), Kind: string(tn.Kind),
						Key: tn.Name, Owner: owners.get(tn.Owner), Link: prefixURL(ni.Key.Name, tn.Prefix, nil)})
				}
			}
			break
		}
		allocs, prefixes, more := a.SearchNames(q, SearchLimit)
		d.More = more
		for _, pr := range prefixes {
			d.Prefixes = append(d.Prefixes, prefixRow{VRF: pr.Prefix.NetworkInstance, Prefix: pr.Prefix.Prefix.String(), Kind: string(pr.Prefix.Kind),
				Key: pr.Prefix.Key.Namespace + "/" + pr.Prefix.Key.Name, Owner: owners.get(pr.Prefix.Key.Owner),
				Link: prefixURL(pr.Prefix.NetworkInstance, pr.Prefix.Prefix.Masked(), nil)})
		}
		for _, rec := range allocs {
			d.Allocations = append(d.Allocations, allocRowOf(rec, owners))
		}
	}
	h.render(w, "search", page{Title: "Search", Query: q, Data: d})
}
