package injector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kptdev/krm-functions-sdk/go/fn"
	porchv1alpha1 "github.com/nephio-project/porch/api/porch/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/functions/engine"
)

// MaxAttempts is how many times one reconcile reads, processes and writes
// a revision when its writes keep losing optimistic-concurrency conflicts.
const MaxAttempts = 10

// Event reasons recorded on a PackageRevision.
const (
	// EventAllocated: the injector wrote allocations into the revision.
	EventAllocated = "IPAllocated"
	// EventFailed: allocation failed; the message says why.
	EventFailed = "IPAllocationFailed"
)

// Injector allocates the IPAM resources of Porch Draft PackageRevisions.
// Reconcile handles one revision; CollectGarbage releases the allocations
// of packages that are gone.
type Injector struct {
	// Client writes PackageRevisionResources.
	Client ctrl.Client
	// Reader reads PackageRevisions and PackageRevisionResources without a
	// cache (Porch serves them from Git).
	Reader ctrl.Reader
	// IPAM is the ipam-server client.
	IPAM ipamv1.IPAMClient
	// Sync are the options of the package engine (server address for
	// messages, timeout); Owner, Prune and NoIdentity are set per package.
	Sync engine.Options
	// Namespace limits garbage collection to one namespace; empty means all.
	Namespace string
	// Recorder records Events on PackageRevisions; nil records none.
	Recorder recorder.EventRecorder

	// beforeWrite, when set (tests), runs between reading a revision and
	// writing it back.
	beforeWrite func(ctx context.Context, attempt int)

	mu     sync.Mutex
	owners map[string]string // owner -> namespace, every owner synced by this process
	warned map[string]string // revision -> resourceVersion of its last parse-error Event
}

// firstWarning reports whether no parse-error Event was recorded yet for
// this version of the revision, and records one.
func (in *Injector) firstWarning(revision, version string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.warned == nil {
		in.warned = map[string]string{}
	}
	if in.warned[revision] == version {
		return false
	}
	in.warned[revision] = version
	return true
}

// Owner is the ipam-server owner of every IPAM resource of a package: its
// repository and package name, shared by all revisions of the package.
func Owner(repository, packageName string) string {
	return repository + "/" + packageName
}

// Reconcile processes the PackageRevision req names when it is a Draft.
func (in *Injector) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	for attempt := 1; attempt <= MaxAttempts; attempt++ {
		err := in.process(ctx, req.NamespacedName, attempt)
		if err == nil {
			return reconcile.Result{}, nil
		}
		if !errors.As(err, new(errConflict)) {
			return reconcile.Result{}, err
		}
		logger.Info("revision changed while being processed; reading it again", "attempt", attempt, "error", err.Error())
		select {
		case <-ctx.Done():
			return reconcile.Result{}, ctx.Err()
		case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
		}
	}
	return reconcile.Result{}, fmt.Errorf("PackageRevision %s: still conflicting after %d attempts", req.NamespacedName, MaxAttempts)
}

// process reads, processes and (when changed) writes one revision once.
func (in *Injector) process(ctx context.Context, key types.NamespacedName, attempt int) error {
	pr := newRevision()
	if err := in.Reader.Get(ctx, key, pr); err != nil {
		return ctrl.IgnoreNotFound(err)
	}
	if lifecycle(pr) != string(porchv1alpha1.PackageRevisionLifecycleDraft) {
		return nil
	}
	var prr porchv1alpha1.PackageRevisionResources
	if err := in.Reader.Get(ctx, key, &prr); err != nil {
		return ctrl.IgnoreNotFound(err)
	}
	files, err := parseFiles(prr.Spec.Resources)
	if err != nil {
		// Not parseable: nothing the injector can do until someone edits
		// it; one Event per version, not one per resync.
		if in.firstWarning(key.String(), prr.ResourceVersion) {
			in.event(pr, corev1.EventTypeWarning, EventFailed, err.Error())
		}
		return nil
	}
	if !engine.HasIPAMObjects(files.items) {
		return nil
	}
	owner := ownerOf(pr)
	in.track(owner, pr.GetNamespace())
	opts := in.Sync
	// The owner names one Porch package, whose revisions share it by
	// design: no package identity is needed, and drafts edited apart must
	// not refuse each other.
	opts.Owner, opts.Prune, opts.NoIdentity = owner, true, true
	opts.Source = sourceOf(pr)
	changed, results, perr := engine.Process(ctx, in.IPAM, opts, &files.items)
	cond := engine.Condition{Type: ConditionType, Status: "True", Reason: ReasonAllocated, Message: summary(files.items)}
	if perr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		cond = engine.Condition{Type: ConditionType, Status: "False", Reason: ReasonFailed, Message: errorMessage(results, perr)}
	}
	kf := files.kptfile()
	if kf != nil {
		c, err := engine.SetKptfileCondition(kf, cond)
		if err != nil {
			return fmt.Errorf("PackageRevision %s: Kptfile: %w", key, err)
		}
		changed = changed || c
	}
	if !changed {
		return nil
	}
	if in.beforeWrite != nil {
		in.beforeWrite(ctx, attempt)
	}
	out, removed := files.changedFiles()
	if len(out)+len(removed) == 0 {
		return nil
	}
	maps.Copy(prr.Spec.Resources, out)
	for _, name := range removed {
		delete(prr.Spec.Resources, name)
	}
	log.FromContext(ctx).Info("writing revision", "owner", owner, "files", slices.Sorted(maps.Keys(out)), "removed", removed, "condition", cond.Status, "attempt", attempt)
	if err := in.Client.Update(ctx, &prr); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		if isConflict(err) {
			return errConflict{err}
		}
		return fmt.Errorf("PackageRevision %s: update resources: %w", key, err)
	}
	if perr != nil {
		in.event(pr, corev1.EventTypeWarning, EventFailed, cond.Message)
	} else {
		in.event(pr, corev1.EventTypeNormal, EventAllocated, cond.Message+"; wrote "+strings.Join(slices.Sorted(maps.Keys(out)), ", "))
	}
	return nil
}

// summary is the message of a True condition.
func summary(items fn.KubeObjects) string {
	var allocs, prefixes int
	for _, it := range items {
		switch {
		case it.IsGVK(ipamv1alpha1.Group, ipamv1alpha1.Version, ipamv1alpha1.KindIPAllocation):
			allocs++
		case it.IsGVK(ipamv1alpha1.Group, ipamv1alpha1.Version, ipamv1alpha1.KindIPPrefix):
			prefixes++
		}
	}
	return fmt.Sprintf("%d IPAllocation(s) and %d IPPrefix(es) allocated by ipam-server", allocs, prefixes)
}

// errorMessage is the message of a False condition: the error results, or
// err when there are none.
func errorMessage(results fn.Results, err error) string {
	var msgs []string
	for _, r := range results {
		if r.Severity == fn.Error {
			msgs = append(msgs, r.Message)
		}
	}
	if len(msgs) == 0 {
		return err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (in *Injector) event(pr *unstructured.Unstructured, typ, reason, msg string) {
	if in.Recorder == nil {
		return
	}
	in.Recorder.Eventf(pr, nil, typ, reason, "Allocate", "%s", msg)
}

func (in *Injector) track(owner, ns string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.owners == nil {
		in.owners = map[string]string{}
	}
	in.owners[owner] = ns
}

// CollectGarbage releases everything ipam-server holds for packages that
// no longer have any PackageRevision, and returns their owners. Candidate
// owners are those this process synced and those ipam-server lists whose
// first segment names a Porch Repository in the watched namespace(s);
// owners of other clients (controllers, kpt fn render) are never touched.
func (in *Injector) CollectGarbage(ctx context.Context) ([]string, error) {
	var opts []ctrl.ListOption
	if in.Namespace != "" {
		opts = append(opts, ctrl.InNamespace(in.Namespace))
	}
	// Repositories first, then revisions: a package created in between is
	// seen as alive.
	repos, err := in.repositories(ctx, opts)
	if err != nil {
		return nil, err
	}
	prs := newRevisionList()
	if err := in.Reader.List(ctx, prs, opts...); err != nil {
		return nil, fmt.Errorf("list PackageRevisions: %w", err)
	}
	alive := map[string]bool{}
	for i := range prs.Items {
		alive[ownerOf(&prs.Items[i])] = true
	}
	candidates := map[string]bool{}
	in.mu.Lock()
	for o := range in.owners {
		candidates[o] = true
	}
	in.mu.Unlock()
	listed, err := in.serverOwners(ctx)
	if err != nil {
		return nil, err
	}
	for o := range listed {
		if repo, _, ok := strings.Cut(o, "/"); ok && repos[repo] {
			candidates[o] = true
		}
	}
	var released []string
	var errs []error
	for _, o := range slices.Sorted(maps.Keys(candidates)) {
		if alive[o] {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, in.timeout())
		_, err := in.IPAM.Sync(cctx, &ipamv1.SyncRequest{Owner: o, Prune: true})
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("release owner %s: %w", o, err))
			continue
		}
		in.mu.Lock()
		delete(in.owners, o)
		in.mu.Unlock()
		if listed[o] {
			released = append(released, o)
		}
	}
	return released, errors.Join(errs...)
}

// repositories returns the names of the Porch Repositories.
func (in *Injector) repositories(ctx context.Context, opts []ctrl.ListOption) (map[string]bool, error) {
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(RepositoryGVK.GroupVersion().WithKind("RepositoryList"))
	if err := in.Reader.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("list Repositories: %w", err)
	}
	names := map[string]bool{}
	for _, it := range list.Items {
		names[it.GetName()] = true
	}
	return names, nil
}

// serverOwners returns every owner ipam-server holds objects for.
func (in *Injector) serverOwners(ctx context.Context) (map[string]bool, error) {
	owners := map[string]bool{}
	for _, kind := range []ipamv1.ObjectKind{ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, ipamv1.ObjectKind_OBJECT_KIND_PREFIX, ipamv1.ObjectKind_OBJECT_KIND_RANGE, ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE} {
		token := ""
		for {
			cctx, cancel := context.WithTimeout(ctx, in.timeout())
			resp, err := in.IPAM.List(cctx, &ipamv1.ListRequest{Kind: kind, PageToken: token})
			cancel()
			if err != nil {
				return nil, fmt.Errorf("list %s on ipam-server: %w", kind, err)
			}
			for _, o := range resp.GetObjects() {
				if k := objectKey(o); k != nil && k.GetOwner() != "" {
					owners[k.GetOwner()] = true
				}
			}
			if token = resp.GetNextPageToken(); token == "" {
				break
			}
		}
	}
	return owners, nil
}

func (in *Injector) timeout() time.Duration {
	if in.Sync.Timeout > 0 {
		return in.Sync.Timeout
	}
	return engine.DefaultTimeout
}

// RepositoryGVK is Porch's Repository, listed to tell the injector's owners
// from other clients' ones.
var RepositoryGVK = schema.GroupVersionKind{Group: "config.porch.kpt.dev", Version: "v1alpha1", Kind: "Repository"}

// objectKey is the key of a listed object, whatever its kind.
func objectKey(o *ipamv1.Object) *ipamv1.Key {
	switch {
	case o.GetAllocation() != nil:
		return o.GetAllocation().GetAllocation().GetKey()
	case o.GetPrefix() != nil:
		return o.GetPrefix().GetPrefix().GetKey()
	case o.GetRange() != nil:
		return o.GetRange().GetKey()
	case o.GetNetworkInstance() != nil:
		return o.GetNetworkInstance().GetKey()
	}
	return nil
}

// PackageRevisionGVK is Porch's PackageRevision. The injector reads it
// unstructured: Porch servers newer than the porch/api types serve
// spec.revision as a number, which the typed struct cannot decode.
var PackageRevisionGVK = porchv1alpha1.SchemeGroupVersion.WithKind("PackageRevision")

func newRevision() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(PackageRevisionGVK)
	return u
}

func newRevisionList() *unstructured.UnstructuredList {
	u := &unstructured.UnstructuredList{}
	u.SetGroupVersionKind(porchv1alpha1.SchemeGroupVersion.WithKind("PackageRevisionList"))
	return u
}

func lifecycle(pr *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedString(pr.Object, "spec", "lifecycle")
	return s
}

// ownerOf is the Owner of the package of pr.
func ownerOf(pr *unstructured.Unstructured) string {
	repo, _, _ := unstructured.NestedString(pr.Object, "spec", "repository")
	pkg, _, _ := unstructured.NestedString(pr.Object, "spec", "packageName")
	return Owner(repo, pkg)
}

// sourceOf is where the package of pr lives, for people:
// porch:<namespace>/<repository>/<package>.
func sourceOf(pr *unstructured.Unstructured) string {
	repo, _, _ := unstructured.NestedString(pr.Object, "spec", "repository")
	pkg, _, _ := unstructured.NestedString(pr.Object, "spec", "packageName")
	return "porch:" + pr.GetNamespace() + "/" + repo + "/" + pkg
}

// errConflict is a write that lost an optimistic-concurrency race.
type errConflict struct{ err error }

func (e errConflict) Error() string { return "conflict: " + e.err.Error() }
func (e errConflict) Unwrap() error { return e.err }

// isConflict reports a 409, also the one Porch wraps in a 500 when its
// Git draft moved on.
func isConflict(err error) bool {
	return apierrors.IsConflict(err) ||
		(apierrors.IsInternalError(err) && strings.Contains(err.Error(), "the object has been modified"))
}
