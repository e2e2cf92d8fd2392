package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kptdev/krm-functions-sdk/go/fn"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capiv1beta2 "github.com/nephio-project/ipam/api/capi/ipam/v1beta2"
	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	metal3v1alpha1 "github.com/nephio-project/ipam/api/metal3/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
	"github.com/nephio-project/ipam/api/vocab"
)

// DefaultTimeout bounds one run's call to ipam-server when Options sets
// no Timeout.
const DefaultTimeout = 10 * time.Second

// ErrFailed is wrapped by the error of a run that produced error results;
// when it is returned, no item was changed.
var ErrFailed = errors.New("ipam-fn failed")

// Options are what one run needs besides the package.
type Options struct {
	// Server is the ipam-server address, for messages.
	Server string
	// ServerHint says how the caller sets the server address, for the
	// message of an unreachable server (e.g. "set data.server in the
	// functionConfig").
	ServerHint string
	// Owner is the owner of every object the package declares. Empty means
	// the name of the package's root Kptfile.
	Owner string
	// Prune releases the owner's objects that the package no longer
	// declares.
	Prune bool
	// Timeout bounds the call to ipam-server. Zero means DefaultTimeout.
	Timeout time.Duration
	// NoIdentity sends no package identity and no owner generation and
	// writes neither: for callers whose owner already names one package
	// (the Porch injector's <repository>/<package>, whose revisions share
	// the owner by design); ipam-server then checks neither. Otherwise the
	// run sends the root Kptfile's ipam.nephio.org/package-id, writing one
	// derived from the package when it has none, and its
	// ipam.nephio.org/generation (none: 0), writing the one ipam-server
	// answers.
	NoIdentity bool
	// Source says where the package lives (a URL of its directory in Git,
	// porch:<namespace>/<repository>/<package>), sent with the Sync for
	// people: the web view links the owner to it. Empty: the root
	// Kptfile's ipam.nephio.org/source annotation, if any.
	Source string
}

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return DefaultTimeout
	}
	return o.Timeout
}

// object is one IPAM resource of the package.
type object struct {
	item *fn.KubeObject
	kind string
	ns   string
	name string
	// index is the position of the object's entry in the SyncRequest list
	// of its kind (a pool's: of its first network prefix).
	index int
	// aliases are the other keys the object answers for in errors.
	aliases []alias
	// prefix is an IPPrefix read, for claims that name it as their pool.
	prefix *ipamv1alpha1.IPPrefix
	// pool is a Cluster API pool read.
	pool *translate.PoolSpec
	// m3pool is a Metal3 IPPool read.
	m3pool *translate.Metal3Pool
	// claim is an IPAddressClaim read.
	claim *claimPart
	// nres is a resource of Nephio's resource API read.
	nres *nephioPart
}

// id names o in messages: Kind namespace/name.
func (o *object) id() string { return o.kind + " " + translate.ID(o.ns, o.name) }

// HasIPAMObjects reports whether items hold any object of the
// ipam.nephio.org group (a NetworkInstance, IPPrefix, IPAllocation or
// Cluster API pool, or an object the function must refuse) or a Cluster
// API IPAddressClaim or IPAddress; without one a run needs no server.
func HasIPAMObjects(items fn.KubeObjects) bool {
	for _, it := range items {
		if KindOf(it) != "" || nephioKindOf(it) != "" || inGroup(it) && !IsConfig(it) ||
			isCAPI(it, capiv1beta2.KindIPAddressClaim) || isCAPI(it, capiv1beta2.KindIPAddress) ||
			isMetal3(it, metal3v1alpha1.KindIPPool) || isMetal3(it, metal3v1alpha1.KindIPClaim) || isMetal3(it, metal3v1alpha1.KindIPAddress) {
			return true
		}
	}
	return false
}

// poolKindOf returns the Cluster API pool kind of it (InClusterIPPool or
// GlobalInClusterIPPool of ipam.nephio.org/v1alpha1), or "".
func poolKindOf(it *fn.KubeObject) string {
	for _, k := range []string{ipamv1alpha1.KindInClusterIPPool, ipamv1alpha1.KindGlobalInClusterIPPool} {
		if it.IsGVK(ipamv1alpha1.Group, ipamv1alpha1.Version, k) {
			return k
		}
	}
	return ""
}

// KindIPAMConfig is the kind of ipam-fn's typed functionConfig, which a
// package may hold among its resources.
const KindIPAMConfig = "IPAMConfig"

// IsConfig reports whether it is an IPAMConfig.
func IsConfig(it *fn.KubeObject) bool {
	return it.IsGVK(ipamv1alpha1.Group, ipamv1alpha1.Version, KindIPAMConfig)
}

// inGroup reports whether it is of the ipam.nephio.org group, any version.
func inGroup(it *fn.KubeObject) bool {
	return strings.HasPrefix(it.GetAPIVersion(), ipamv1alpha1.Group+"/")
}

// unknownResult is the error result for an object of the ipam.nephio.org
// group that the function does not know: an unknown version, or an
// unknown kind of the known version. Passing it through untouched would
// leave a claim unallocated without a word.
func unknownResult(it *fn.KubeObject) *fn.Result {
	o := &object{item: it, kind: it.GetKind(), ns: it.GetNamespace(), name: it.GetName()}
	if v := it.GetAPIVersion(); v != ipamv1alpha1.APIVersion {
		return objectResult(o, "apiVersion", fmt.Sprintf("%s is not served by ipam-fn: use %s", vocab.Quote(v), ipamv1alpha1.APIVersion), "InvalidArgument")
	}
	return objectResult(o, "kind", fmt.Sprintf("%s is not a kind of %s: use %s, %s, %s, %s, %s or (for the functionConfig) %s",
		vocab.Quote(it.GetKind()), ipamv1alpha1.APIVersion, ipamv1alpha1.KindNetworkInstance, ipamv1alpha1.KindIPPrefix,
		ipamv1alpha1.KindIPAllocation, ipamv1alpha1.KindInClusterIPPool, ipamv1alpha1.KindGlobalInClusterIPPool, KindIPAMConfig), "InvalidArgument")
}

// KindOf returns the IPAM kind of it (NetworkInstance, IPPrefix or
// IPAllocation of ipam.nephio.org/v1alpha1), or "" when it is something
// else.
func KindOf(it *fn.KubeObject) string {
	for _, k := range []string{ipamv1alpha1.KindIPAllocation, ipamv1alpha1.KindIPPrefix, ipamv1alpha1.KindNetworkInstance} {
		if it.IsGVK(ipamv1alpha1.Group, ipamv1alpha1.Version, k) {
			return k
		}
	}
	return ""
}

// Process allocates what the IPAM resources among items ask for with one
// Sync call on client and writes the results into the status of every
// IPAllocation and IPPrefix, one condition per IPAllocation into the root
// Kptfile, and for every IPAddressClaim of this front its status and its
// IPAddress (added to items when new; IPAddresses whose claim left the
// package are removed from items). It changes nothing else: other items,
// comments and field order stay as they are, and an object whose status is
// already right is not touched, so processing an unchanged package again
// changes nothing. changed reports whether any item was modified.
//
// When anything fails (a malformed field, an item the server rejects, an
// unreachable server) no item is changed, results has one error result per
// failure naming the file, the resource and the field, and err wraps
// ErrFailed. Items without IPAM resources make no call (client may be nil).
func Process(ctx context.Context, client ipamv1.IPAMClient, opts Options, items *fn.KubeObjects) (changed bool, results fn.Results, err error) {
	req, objs, idn, results := buildRequest(opts, *items)
	if failed(results) != nil {
		return false, results, failed(results)
	}
	if len(objs) == 0 {
		// Only IPAddresses whose claims are gone, perhaps: they go too.
		stale := staleAddresses(*items, nil)
		*items = slices.DeleteFunc(*items, func(it *fn.KubeObject) bool { return slices.Contains(stale, it) })
		return len(stale) > 0, results, nil
	}
	if client == nil {
		results = append(results, &fn.Result{Severity: fn.Error, Message: "ipam-fn: no ipam-server client: " + opts.ServerHint})
		return false, results, failed(results)
	}
	cctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	if err := pinClaims(cctx, client, req, objs); err != nil {
		results = append(results, syncErrorResults(err, opts, objs, idn)...)
		return false, results, failed(results)
	}
	if r := resolveNephio(cctx, client, req, objs); len(r) > 0 {
		results = append(results, r...)
		return false, results, failed(results)
	}
	resp, err := client.Sync(cctx, req)
	if err != nil {
		results = append(results, syncErrorResults(err, opts, objs, idn)...)
		return false, results, failed(results)
	}
	if len(resp.GetPrefixes()) != len(req.GetPrefixes()) || len(resp.GetAllocations()) != len(req.GetAllocations()) {
		results = append(results, &fn.Result{Severity: fn.Error, Message: fmt.Sprintf(
			"ipam-fn: ipam-server at %s answered %d prefix and %d allocation results for %d and %d requests",
			opts.Server, len(resp.GetPrefixes()), len(resp.GetAllocations()), len(req.GetPrefixes()), len(req.GetAllocations()))})
		return false, results, failed(results)
	}
	changed, written, err := writeResults(objs, idn, resp, items)
	return changed, append(results, written...), err
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

// buildRequest turns the IPAM resources among items into one SyncRequest
// through the shared translation, with the package identity of the root
// Kptfile. Fields that cannot be read become error results, unknown fields
// warnings.
func buildRequest(opts Options, items fn.KubeObjects) (*ipamv1.SyncRequest, []*object, identity, fn.Results) {
	var objs []*object
	var results fn.Results
	for _, it := range items {
		o := &object{item: it, kind: KindOf(it), ns: it.GetNamespace(), name: it.GetName()}
		if o.kind == "" {
			o.kind = poolKindOf(it)
		}
		switch {
		case o.kind != "":
			objs = append(objs, o)
		case nephioKindOf(it) != "":
			o.kind = nephioKindOf(it)
			objs = append(objs, o)
		case isMetal3(it, metal3v1alpha1.KindIPPool):
			o.kind = metal3v1alpha1.KindIPPool
			objs = append(objs, o)
		case isMetal3(it, metal3v1alpha1.KindIPClaim):
			o.kind = metal3v1alpha1.KindIPClaim
			if err := o.readMetal3Claim(); err != nil {
				results = append(results, fieldResult(o, err))
			}
			objs = append(objs, o)
		case isCAPI(it, capiv1beta2.KindIPAddressClaim):
			o.kind = capiv1beta2.KindIPAddressClaim
			ours, err := o.readClaim()
			if err != nil {
				results = append(results, fieldResult(o, err))
			}
			if ours {
				objs = append(objs, o)
			}
		case inGroup(it) && !IsConfig(it):
			results = append(results, unknownResult(it))
		}
	}
	if len(objs) == 0 {
		return nil, nil, identity{}, results
	}
	kptfile := rootKptfile(items)
	idn, r := readIdentity(kptfile, opts.NoIdentity)
	results = append(results, r...)
	owner := opts.Owner
	if owner == "" && kptfile != nil {
		owner = kptfile.GetName()
	}
	if owner == "" {
		results = append(results, &fn.Result{Severity: fn.Error, Message: "ipam-fn: no owner for the package's IPAM resources: " +
			"set data.owner in the functionConfig or metadata.name in the root Kptfile"})
	}
	req := &ipamv1.SyncRequest{Owner: owner, Prune: opts.Prune, Source: opts.Source}
	if req.Source == "" && kptfile != nil {
		req.Source = strings.TrimSpace(kptfile.GetAnnotation(AnnotationSource))
	}
	for _, o := range objs {
		if o.claim != nil {
			continue // after the pools they name
		}
		var warnings []*translate.FieldError
		var err error
		switch {
		case nephioKindOf(o.item) != "":
			warnings, err = o.addNephio(req, owner)
		case o.kind == metal3v1alpha1.KindIPPool:
			warnings, err = o.addMetal3Pool(req, owner, items)
		default:
			warnings, err = o.add(req, owner)
		}
		for _, w := range warnings {
			r := objectResult(o, w.Field, w.Msg, "")
			r.Severity = fn.Warning
			results = append(results, r)
		}
		if err != nil {
			results = append(results, fieldResult(o, err))
		}
	}
	results = append(results, addClaims(req, owner, objs, items)...)
	idn.mint(req)
	req.Identity, req.Adopt = idn.id, idn.adopt
	if !idn.off {
		req.Generation = proto.Uint64(idn.generation)
	}
	return req, objs, idn, results
}

// fieldResult is the error result of err about o: its field when err is
// a *translate.FieldError.
func fieldResult(o *object, err error) *fn.Result {
	var fe *translate.FieldError
	if errors.As(err, &fe) {
		return objectResult(o, fe.Field, fe.Msg, "InvalidArgument")
	}
	return objectResult(o, "", err.Error(), "InvalidArgument")
}

// add reads o into its typed form and appends its translation to req.
func (o *object) add(req *ipamv1.SyncRequest, owner string) ([]*translate.FieldError, error) {
	meta, err := o.meta()
	if err != nil {
		return nil, err
	}
	switch o.kind {
	case ipamv1alpha1.KindInClusterIPPool, ipamv1alpha1.KindGlobalInClusterIPPool:
		return o.addPool(req, owner)
	case ipamv1alpha1.KindNetworkInstance:
		ni := &ipamv1alpha1.NetworkInstance{ObjectMeta: meta}
		w, err := o.spec(&ni.Spec)
		if err != nil {
			return w, err
		}
		o.index = len(req.NetworkInstances)
		req.NetworkInstances = append(req.NetworkInstances, translate.NetworkInstance(owner, ni))
		return w, nil
	case ipamv1alpha1.KindIPPrefix:
		p := &ipamv1alpha1.IPPrefix{ObjectMeta: meta}
		w, err := o.spec(&p.Spec)
		if err == nil {
			err = o.checkStatus()
		}
		if err != nil {
			return w, err
		}
		o.index = len(req.Prefixes)
		req.Prefixes = append(req.Prefixes, translate.Prefix(owner, p))
		o.prefix = p
		return w, nil
	default:
		a := &ipamv1alpha1.IPAllocation{ObjectMeta: meta}
		w, err := o.spec(&a.Spec)
		if err == nil {
			err = o.checkStatus()
		}
		if err != nil {
			return w, err
		}
		want, err := translate.Allocation(owner, a)
		if err != nil {
			return w, err
		}
		o.index = len(req.Allocations)
		req.Allocations = append(req.Allocations, want)
		return w, nil
	}
}

// meta is the metadata the translation reads: namespace, name, labels.
func (o *object) meta() (metav1.ObjectMeta, error) {
	labels, _, err := o.item.NestedStringMap("metadata", "labels")
	if err != nil {
		return metav1.ObjectMeta{}, o.fieldError("metadata.labels", "must map label keys to string values")
	}
	return metav1.ObjectMeta{Namespace: o.ns, Name: o.name, Labels: labels}, nil
}

// spec decodes the object's spec into into, as the API server would.
func (o *object) spec(into any) ([]*translate.FieldError, error) {
	var raw map[string]any
	if _, err := o.item.NestedResource(&raw, "spec"); err != nil {
		return nil, o.fieldError("spec", "must be a map")
	}
	if raw == nil {
		return nil, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, o.fieldError("spec", "cannot be read: "+err.Error())
	}
	return translate.DecodeSpec(o.kind, o.ns, o.name, b, into)
}

// checkStatus makes sure the status can be written: absent or a map whose
// conditions, if any, are a list of maps.
func (o *object) checkStatus() error {
	if _, _, err := o.item.NestedSubObject("status"); err != nil {
		return o.fieldError("status", "must be a map; the function writes status.prefix, status.gateway and status.conditions")
	}
	if _, _, err := o.item.NestedSlice("status", "conditions"); err != nil {
		return o.fieldError("status.conditions", "must be a list of conditions")
	}
	return nil
}

func (o *object) fieldError(field, msg string) *translate.FieldError {
	return &translate.FieldError{Kind: o.kind, Namespace: o.ns, Name: o.name, Field: field, Msg: msg}
}

// rootKptfile is the root Kptfile among items (the one at path Kptfile, or
// the only Kptfile), or nil.
func rootKptfile(items fn.KubeObjects) *fn.KubeObject {
	var kptfiles []*fn.KubeObject
	for _, it := range items {
		if it.IsGVK("kpt.dev", "v1", "Kptfile") {
			if p := pathOf(it); p == "Kptfile" || p == "./Kptfile" {
				return it
			}
			kptfiles = append(kptfiles, it)
		}
	}
	if len(kptfiles) == 1 {
		return kptfiles[0]
	}
	return nil
}
