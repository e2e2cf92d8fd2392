// Package audit compares the IPAM resources of kpt packages in a Git
// checkout with what ipam-server holds: what the packages say (the status
// ipam-fn wrote) must be what the server holds for their owner, and the
// server must hold nothing an owner's package no longer declares. It is
// ipamctl's audit command as a library.
package audit

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kptdev/krm-functions-sdk/go/fn"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
	"github.com/nephio-project/ipam/functions/engine"
	"github.com/nephio-project/ipam/functions/ipamfn"
)

// The kinds of finding.
const (
	// Leak: the server holds an object of the owner that its package no
	// longer declares (or, with Options.AllOwners, an owner no package
	// has).
	Leak = "leak"
	// Drift: the status in Git differs from what the server holds, or the
	// server holds nothing for a rendered object.
	Drift = "drift"
	// Unrendered: a resource without status: the package was not rendered
	// since it was declared.
	Unrendered = "unrendered"
	// DuplicateOwner: two packages have one owner and prune each other's
	// objects.
	DuplicateOwner = "duplicate-owner"
)

// Finding is one difference between Git and the server.
type Finding struct {
	Kind    string `json:"kind"`
	Owner   string `json:"owner"`
	Package string `json:"package,omitempty"` // the package directory, as found under the audited directories
	Object  string `json:"object,omitempty"`  // Kind namespace/name
	Detail  string `json:"detail"`
}

// Options tune an audit.
type Options struct {
	// AllOwners also reports the owners the server holds objects for that
	// no audited package has. Other clients (controllers, ipamctl) hold
	// owners too, so this suits a checkout that holds every package.
	AllOwners bool
}

// pkg is one kpt package: its directory, owner and IPAM resources.
type pkg struct {
	dir   string
	owner string
	objs  []resource
}

// resource is an IPAM resource of a package and the prefix its status
// records ("" when it has none).
type resource struct {
	kind, ns, name string
	file           string
	status         string
	// addressOnly compares the addresses of status and the server's prefix.
	addressOnly bool
}

func (r resource) id() string { return r.kind + " " + translate.ID(r.ns, r.name) }

// Run audits the packages under dirs against the server behind client.
// Findings come sorted by owner, package and object; err reports what
// kept the audit from completing (an unreadable file, a failed call).
func Run(ctx context.Context, client ipamv1.IPAMClient, dirs []string, opts Options) ([]Finding, error) {
	var pkgs []*pkg
	for _, d := range dirs {
		found, err := readPackages(d)
		if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, found...)
	}
	var findings []Finding
	byOwner := map[string]*pkg{}
	for _, p := range pkgs {
		if first := byOwner[p.owner]; first != nil {
			findings = append(findings, Finding{Kind: DuplicateOwner, Owner: p.owner, Package: p.dir,
				Detail: fmt.Sprintf("%s has the same owner; the two packages share and prune each other's objects", first.dir)})
			continue
		}
		byOwner[p.owner] = p
	}
	for _, owner := range slices.Sorted(maps.Keys(byOwner)) {
		held, err := list(ctx, client, owner)
		if err != nil {
			return nil, err
		}
		findings = append(findings, compare(byOwner[owner], held)...)
	}
	if opts.AllOwners {
		held, err := list(ctx, client, "")
		if err != nil {
			return nil, err
		}
		count := map[string]int{}
		for _, h := range held {
			if byOwner[h.owner] == nil {
				count[h.owner]++
			}
		}
		for _, owner := range slices.Sorted(maps.Keys(count)) {
			findings = append(findings, Finding{Kind: Leak, Owner: owner,
				Detail: fmt.Sprintf("the server holds %d object(s) of this owner and no audited package has it", count[owner])})
		}
	}
	slices.SortStableFunc(findings, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Owner, b.Owner), cmp.Compare(a.Package, b.Package), cmp.Compare(a.Object, b.Object))
	})
	return findings, nil
}

// compare reports the differences of one package and what the server
// holds for its owner.
func compare(p *pkg, held map[string]heldObject) []Finding {
	var out []Finding
	declared := map[string]bool{}
	for _, r := range p.objs {
		declared[r.id()] = true
		f := Finding{Owner: p.owner, Package: p.dir, Object: r.id()}
		h, ok := held[r.id()]
		switch {
		case r.kind == ipamv1alpha1.KindNetworkInstance:
			if !ok {
				f.Kind, f.Detail = Drift, "the server holds no such network instance of this owner (render the package)"
				out = append(out, f)
			}
			continue
		case r.status == "":
			f.Kind, f.Detail = Unrendered, "no status.prefix: render the package ("+r.file+")"
		case !ok:
			f.Kind, f.Detail = Drift, fmt.Sprintf("Git says %s, the server holds nothing (%s)", r.status, r.file)
		case r.addressOnly && addressOf(h.prefix) != addressOf(r.status):
			f.Kind, f.Detail = Drift, fmt.Sprintf("Git says %s, the server holds %s (%s)", addressOf(r.status), addressOf(h.prefix), r.file)
		case !r.addressOnly && h.prefix != r.status:
			f.Kind, f.Detail = Drift, fmt.Sprintf("Git says %s, the server holds %s (%s)", r.status, h.prefix, r.file)
		default:
			continue
		}
		out = append(out, f)
	}
	for _, id := range slices.Sorted(maps.Keys(held)) {
		if !declared[id] {
			out = append(out, Finding{Kind: Leak, Owner: p.owner, Package: p.dir, Object: id,
				Detail: fmt.Sprintf("the server holds %s; the package no longer declares it (render it to release)", held[id].prefix)})
		}
	}
	for i := range out { // Nephio's claims in their own words
		out[i].Object, out[i].Detail = translate.NephioMessage(out[i].Object), translate.NephioMessage(out[i].Detail)
	}
	return out
}

// addressOf is the address of a prefix written addr/len.
func addressOf(prefix string) string {
	addr, _, _ := strings.Cut(prefix, "/")
	return addr
}

// heldObject is what the server holds for one object.
type heldObject struct {
	owner  string
	prefix string
}

// list returns the objects the server holds for owner (every owner when
// empty), keyed by Kind namespace/name.
func list(ctx context.Context, client ipamv1.IPAMClient, owner string) (map[string]heldObject, error) {
	out := map[string]heldObject{}
	for _, kind := range []ipamv1.ObjectKind{ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE, ipamv1.ObjectKind_OBJECT_KIND_PREFIX,
		ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION} {
		token := ""
		for {
			resp, err := client.List(ctx, &ipamv1.ListRequest{Kind: kind, Owner: owner, PageToken: token})
			if err != nil {
				return nil, fmt.Errorf("listing the %s objects of owner %q: %w", ipamv1.KindName(kind), owner, err)
			}
			for _, o := range resp.GetObjects() {
				var k *ipamv1.Key
				var prefix string
				switch x := o.GetObject().(type) {
				case *ipamv1.Object_NetworkInstance:
					k = x.NetworkInstance.GetKey()
				case *ipamv1.Object_Prefix:
					k, prefix = x.Prefix.GetPrefix().GetKey(), x.Prefix.GetResult().GetPrefix()
				case *ipamv1.Object_Allocation:
					k, prefix = x.Allocation.GetAllocation().GetKey(), x.Allocation.GetResult().GetPrefix()
				default:
					continue
				}
				id := ipamv1.KindName(kind) + " " + translate.ID(k.GetNamespace(), k.GetName())
				if owner == "" {
					id = k.GetOwner() + "\x00" + id
				}
				out[id] = heldObject{owner: k.GetOwner(), prefix: prefix}
			}
			if token = resp.GetNextPageToken(); token == "" {
				break
			}
		}
	}
	return out, nil
}

// readPackages finds the kpt packages under root (every directory with a
// Kptfile; a nested package is a package of its own) and reads their IPAM
// resources.
func readPackages(root string) ([]*pkg, error) {
	var roots []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() != "." && strings.HasPrefix(d.Name(), ".") && path != root {
			return filepath.SkipDir // .git, .expected, ...
		}
		if !d.IsDir() && d.Name() == "Kptfile" {
			roots = append(roots, filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", root, err)
	}
	if len(roots) == 0 {
		return nil, fmt.Errorf("%s holds no kpt package (no Kptfile)", root)
	}
	var pkgs []*pkg
	for _, dir := range roots {
		p, err := readPackage(dir, roots)
		if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

// readPackage reads the package in dir; others are the package roots,
// whose files belong to them.
func readPackage(dir string, others []string) (*pkg, error) {
	files := map[string]fn.KubeObjects{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && (strings.HasPrefix(d.Name(), ".") || slices.Contains(others, path)) {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" && d.Name() != "Kptfile" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		objs, err := fn.ParseKubeObjects(b)
		if err != nil {
			return fmt.Errorf("%s: not KRM YAML: %w", path, err)
		}
		rel, _ := filepath.Rel(dir, path)
		files[filepath.ToSlash(rel)] = objs
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading package %s: %w", dir, err)
	}
	kptfiles := files["Kptfile"]
	if len(kptfiles) != 1 {
		return nil, fmt.Errorf("%s: the Kptfile must hold one object", filepath.Join(dir, "Kptfile"))
	}
	kptfile := kptfiles[0]
	owner, err := ownerOf(dir, kptfile, files)
	if err != nil {
		return nil, err
	}
	p := &pkg{dir: dir, owner: owner}
	var all fn.KubeObjects
	fileOf := map[*fn.KubeObject]string{}
	for _, file := range slices.Sorted(maps.Keys(files)) {
		for _, o := range files[file] {
			all = append(all, o)
			fileOf[o] = file
			kind := engine.KindOf(o)
			if kind == "" {
				continue
			}
			status, _, _ := o.NestedString("status", "prefix")
			p.objs = append(p.objs, resource{kind: kind, ns: o.GetNamespace(), name: o.GetName(), file: file, status: status})
		}
	}
	// Cluster API pools and claims declare objects under generated names:
	// the pool's network instance and networks, the claim's allocation
	// with the address its IPAddress records.
	for _, d := range engine.DeclaredByFronts(owner, all) {
		p.objs = append(p.objs, resource{kind: d.Kind, ns: d.Namespace, name: d.Name, file: fileOf[d.Item], status: d.Prefix, addressOnly: d.AddressOnly})
	}
	return p, nil
}

// ownerOf is the owner ipam-fn uses for the package: the owner setting of
// the functionConfig of the Kptfile's ipam-fn step, else the Kptfile's
// name.
func ownerOf(dir string, kptfile *fn.KubeObject, files map[string]fn.KubeObjects) (string, error) {
	steps, _, err := kptfile.NestedSlice("pipeline", "mutators")
	if err != nil {
		return "", fmt.Errorf("%s: pipeline.mutators: %w", filepath.Join(dir, "Kptfile"), err)
	}
	for _, s := range steps {
		image, _, _ := s.NestedString("image")
		exe, _, _ := s.NestedString("exec")
		configPath, _, _ := s.NestedString("configPath")
		if !strings.Contains(image+exe, "ipam-fn") || configPath == "" {
			continue
		}
		objs := files[filepath.ToSlash(filepath.Clean(configPath))]
		if len(objs) != 1 {
			return "", fmt.Errorf("%s: configPath %s of ipam-fn must name a file of the package holding one object", filepath.Join(dir, "Kptfile"), configPath)
		}
		// A setting ipam-fn would refuse (its render fails) does not
		// change the owner.
		if cfg, _ := ipamfn.ParseConfig(objs[0], nil); cfg.Owner != "" {
			return cfg.Owner, nil
		}
	}
	if kptfile.GetName() == "" {
		return "", fmt.Errorf("%s: metadata.name is empty and no functionConfig sets an owner", filepath.Join(dir, "Kptfile"))
	}
	return kptfile.GetName(), nil
}
