package ipamfn

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"

	"github.com/kptdev/krm-functions-sdk/go/fn"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

// The resources the function reads, as they appear in a package.
const (
	// Group is the API group of the IPAM resources.
	Group = "ipam.nephio.org"
	// Version is the API version of the IPAM resources the function reads.
	Version = "v1alpha1"
	// APIVersion is Group/Version, as written in apiVersion.
	APIVersion = Group + "/" + Version
	// KindNetworkInstance is a VRF declared by the package.
	KindNetworkInstance = "NetworkInstance"
	// KindIPPrefix is a prefix or static address declared by the package.
	KindIPPrefix = "IPPrefix"
	// KindIPAllocation is an address or prefix the package requests.
	KindIPAllocation = "IPAllocation"
)

// ErrFailed is wrapped by the error of a run that produced error results;
// when it is returned, no item was changed.
var ErrFailed = errors.New("ipam-fn failed")

// object is one IPAM resource of the package.
type object struct {
	item *fn.KubeObject
	kind string
	ns   string
	name string
	// index is the position of the object's entry in the SyncRequest list
	// of its kind.
	index int
}

// HasIPAMObjects reports whether items hold any object of the
// ipam.nephio.org group (a NetworkInstance, IPPrefix or IPAllocation, or
// an object the function must refuse); without one a run needs no server.
func HasIPAMObjects(items fn.KubeObjects) bool {
	for _, it := range items {
		if kindOf(it) != "" || inGroup(it) && !isConfig(it) {
			return true
		}
	}
	return false
}

// isConfig reports whether it is an IPAMConfig, the function's typed
// functionConfig, which a package may hold among its resources.
func isConfig(it *fn.KubeObject) bool { return it.IsGVK(Group, Version, KindIPAMConfig) }

// inGroup reports whether it is of the ipam.nephio.org group, any version.
func inGroup(it *fn.KubeObject) bool {
	return strings.HasPrefix(it.GetAPIVersion(), Group+"/")
}

// unknownResult is the error result for an object of the ipam.nephio.org
// group that the function does not know: an unknown version, or an
// unknown kind of the known version. Passing it through untouched would
// leave a claim unallocated without a word.
func unknownResult(it *fn.KubeObject) *fn.Result {
	o := &object{item: it, kind: it.GetKind(), ns: it.GetNamespace(), name: it.GetName()}
	if v := it.GetAPIVersion(); v != APIVersion {
		return objectResult(o, "apiVersion", fmt.Sprintf("%s is not served by ipam-fn: use %s", quoteBounded(v), APIVersion), "InvalidArgument")
	}
	return objectResult(o, "kind", fmt.Sprintf("%s is not a kind of %s: use %s, %s, %s or (for the functionConfig) %s",
		quoteBounded(it.GetKind()), APIVersion, KindNetworkInstance, KindIPPrefix, KindIPAllocation, KindIPAMConfig), "InvalidArgument")
}

// quoteBounded quotes s, cut to 64 bytes: a message never repeats a
// hostile value in full.
func quoteBounded(s string) string {
	const max = 64
	if len(s) > max {
		return fmt.Sprintf("%q... (%d bytes)", s[:max], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// kindOf returns the IPAM kind of it, or "" when it is something else.
func kindOf(it *fn.KubeObject) string {
	for _, k := range []string{KindIPAllocation, KindIPPrefix, KindNetworkInstance} {
		if it.IsGVK(Group, Version, k) {
			return k
		}
	}
	return ""
}

// Process allocates what the IPAM resources among items ask for with one
// Sync call on client and writes the results into the status of every
// IPAllocation and IPPrefix. It changes nothing else: other items, comments
// and field order stay as they are, and an object whose status is already
// right is not touched, so processing an unchanged package again changes
// nothing. changed reports whether any item was modified.
//
// When anything fails (a malformed field, an item the server rejects, an
// unreachable server) no item is changed, results has one error result per
// failure naming the file, the resource and the field, and err wraps
// ErrFailed. Items without IPAM resources make no call (client may be nil).
func Process(ctx context.Context, client ipamv1.IPAMClient, cfg Config, items fn.KubeObjects) (changed bool, results fn.Results, err error) {
	req, objs, results := buildRequest(cfg, items)
	if len(objs) == 0 || len(results) > 0 {
		return false, results, failed(results)
	}
	if client == nil {
		results = append(results, &fn.Result{Severity: fn.Error, Message: fmt.Sprintf(
			"ipam-fn: no ipam-server client: set data.server (host:port) in the functionConfig or the %s environment variable", EnvServer)})
		return false, results, failed(results)
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.timeout())
	defer cancel()
	resp, err := client.Sync(cctx, req)
	if err != nil {
		results = syncErrorResults(err, cfg, objs)
		return false, results, failed(results)
	}
	if len(resp.GetPrefixes()) != len(req.GetPrefixes()) || len(resp.GetAllocations()) != len(req.GetAllocations()) {
		results = append(results, &fn.Result{Severity: fn.Error, Message: fmt.Sprintf(
			"ipam-fn: ipam-server at %s answered %d prefix and %d allocation results for %d and %d requests",
			cfg.Server, len(resp.GetPrefixes()), len(resp.GetAllocations()), len(req.GetPrefixes()), len(req.GetAllocations()))})
		return false, results, failed(results)
	}
	return writeResults(cfg, objs, resp)
}

// failed returns the run error for results: nil when none is an error.
func failed(results fn.Results) error {
	n := 0
	for _, r := range results {
		if r.Severity == fn.Error {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	if n == 1 {
		return fmt.Errorf("%w: 1 error; no resource was changed", ErrFailed)
	}
	return fmt.Errorf("%w: %d errors; no resource was changed", ErrFailed, n)
}

// buildRequest turns the IPAM resources among items into one SyncRequest.
// Fields that cannot be read become error results.
func buildRequest(cfg Config, items fn.KubeObjects) (*ipamv1.SyncRequest, []*object, fn.Results) {
	var objs []*object
	var results fn.Results
	for _, it := range items {
		if k := kindOf(it); k != "" {
			objs = append(objs, &object{item: it, kind: k, ns: it.GetNamespace(), name: it.GetName()})
		} else if inGroup(it) && !isConfig(it) {
			results = append(results, unknownResult(it))
		}
	}
	if len(objs) == 0 {
		return nil, nil, results
	}
	owner := cfg.Owner
	if owner == "" {
		owner = rootPackageName(items)
	}
	if owner == "" {
		results = append(results, &fn.Result{Severity: fn.Error, Message: "ipam-fn: no owner for the package's IPAM resources: " +
			"set data.owner in the functionConfig or metadata.name in the root Kptfile"})
	}
	req := &ipamv1.SyncRequest{Owner: owner, Prune: cfg.Prune}
	for _, o := range objs {
		r := reader{o: o.item}
		key := &ipamv1.Key{Owner: owner, Namespace: o.ns, Name: o.name}
		userLabels := r.labels("metadata", "labels")
		switch o.kind {
		case KindNetworkInstance:
			ni := &ipamv1.NetworkInstance{Key: key, Labels: userLabels}
			for i, p := range r.slice("spec", "prefixes") {
				pr := reader{o: o.item, sub: p, path: fmt.Sprintf("spec.prefixes[%d]", i)}
				ni.Prefixes = append(ni.Prefixes, &ipamv1.VRFPrefix{Prefix: pr.str("prefix"), Labels: pr.labels("labels")})
				r.errs = append(r.errs, pr.errs...)
			}
			o.index = len(req.NetworkInstances)
			req.NetworkInstances = append(req.NetworkInstances, ni)
		case KindIPPrefix:
			p := &ipamv1.Prefix{
				Key:             key,
				Kind:            r.str("spec", "kind"),
				NetworkInstance: r.str("spec", "networkInstance"),
				Network:         r.str("spec", "network"),
				Prefix:          r.str("spec", "prefix"),
				Labels:          merge(userLabels, r.labels("spec", "labels")),
			}
			o.index = len(req.Prefixes)
			req.Prefixes = append(req.Prefixes, p)
			r.checkStatus()
		case KindIPAllocation:
			a := &ipamv1.Allocation{
				Key:             key,
				Kind:            r.str("spec", "kind"),
				NetworkInstance: r.str("spec", "networkInstance"),
				PrefixLength:    r.int32("spec", "prefixLength"),
				Prefix:          r.str("spec", "prefix"),
				AddressFamily:   r.str("spec", "addressFamily"),
				Selector:        r.labels("spec", "selector", "matchLabels"),
				Labels:          merge(userLabels, r.labels("spec", "labels")),
			}
			o.index = len(req.Allocations)
			req.Allocations = append(req.Allocations, a)
			r.checkStatus()
		}
		for _, e := range r.errs {
			results = append(results, objectResult(o, e.field, e.msg, ""))
		}
	}
	return req, objs, results
}

// rootPackageName is the metadata.name of the root Kptfile among items (the
// one at path Kptfile, or the only Kptfile), or "".
func rootPackageName(items fn.KubeObjects) string {
	var kptfiles []*fn.KubeObject
	for _, it := range items {
		if it.IsGVK("kpt.dev", "v1", "Kptfile") {
			if p := pathOf(it); p == "Kptfile" || p == "./Kptfile" {
				return it.GetName()
			}
			kptfiles = append(kptfiles, it)
		}
	}
	if len(kptfiles) == 1 {
		return kptfiles[0].GetName()
	}
	return ""
}

// merge returns a with b's entries added (b wins), or nil when both are empty.
func merge(a, b map[string]string) map[string]string {
	if len(a) == 0 {
		return b
	}
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// fieldError is a field of an object that cannot be read.
type fieldError struct {
	field, msg string
}

// reader reads the fields of one object (or of a map inside it, sub at
// path) and collects what cannot be read.
type reader struct {
	o    *fn.KubeObject
	sub  *fn.SubObject
	path string
	errs []fieldError
}

func (r *reader) target() *fn.SubObject {
	if r.sub != nil {
		return r.sub
	}
	return &r.o.SubObject
}

func (r *reader) field(fields []string) string {
	f := joinPath(fields)
	if r.path != "" {
		return r.path + "." + f
	}
	return f
}

func (r *reader) fail(fields []string, msg string) {
	r.errs = append(r.errs, fieldError{field: r.field(fields), msg: msg})
}

func (r *reader) str(fields ...string) string {
	s, _, err := r.target().NestedString(fields...)
	if err != nil {
		r.fail(fields, "must be a string")
	}
	return s
}

func (r *reader) int32(fields ...string) int32 {
	v, _, err := r.target().NestedInt64(fields...)
	switch {
	case err != nil:
		r.fail(fields, "must be an integer")
	case v < math.MinInt32 || v > math.MaxInt32:
		r.fail(fields, fmt.Sprintf("%d is out of range", v))
	default:
		return int32(v)
	}
	return 0
}

func (r *reader) labels(fields ...string) map[string]string {
	m, _, err := r.target().NestedStringMap(fields...)
	if err != nil {
		r.fail(fields, "must map label keys to string values")
		return nil
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

func (r *reader) slice(fields ...string) fn.SliceSubObjects {
	s, _, err := r.target().NestedSlice(fields...)
	if err != nil {
		r.fail(fields, "must be a list of maps")
	}
	return s
}

// checkStatus makes sure the status can be written: absent or a map whose
// conditions, if any, are a list of maps.
func (r *reader) checkStatus() {
	if _, _, err := r.o.NestedSubObject("status"); err != nil {
		r.fail([]string{"status"}, "must be a map; the function writes status.prefix, status.gateway and status.conditions")
		return
	}
	if _, _, err := r.o.NestedSlice("status", "conditions"); err != nil {
		r.fail([]string{"status", "conditions"}, "must be a list of conditions")
	}
}

func joinPath(fields []string) string { return strings.Join(fields, ".") }
