package injector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
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
	nipamv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/ipam/v1alpha1"
	vlanv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/vlan/v1alpha1"
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
	// EventOverwritten: Porch accepted a write of the injector on a
	// version that someone else's write had already replaced (see
	// versionLog); the message names the versions that write replaced.
	EventOverwritten = "IPAllocationOverwroteEdit"
)

// Injector allocates the IPAM resources of Porch Draft PackageRevisions.
// Reconcile handles one revision; CollectGarbage releases the allocations
// of packages that are gone.
//
// It remembers, per Draft, the resourceVersion it last processed (read
// and, when something changed, wrote). Porch gives every write of a
// revision's resources a new resourceVersion (the commit of its draft
// branch) and sends a PackageRevision event with it, so an event or a
// resync that shows the version already processed costs nothing: no read,
// no Sync.
type Injector struct {
	// Client writes PackageRevisionResources.
	Client ctrl.Client
	// Reader reads PackageRevisions and PackageRevisionResources without a
	// cache (Porch serves them from Git).
	Reader ctrl.Reader
	// Revisions reads PackageRevisions from the watch's cache; nil reads
	// them with Reader.
	Revisions ctrl.Reader
	// IPAM is the ipam-server client.
	IPAM ipamv1.IPAMClient
	// Sync are the options of the package engine (server address for
	// messages, timeout); Owner, Prune and NoIdentity are set per package.
	Sync engine.Options
	// Namespace limits garbage collection to one namespace; empty means all.
	Namespace string
	// Recorder records Events on PackageRevisions; nil records none.
	Recorder recorder.EventRecorder
	// Log receives what the injector finds outside a reconcile (an edit
	// that Porch let a write of the injector replace); the zero Logger
	// discards it.
	Log logr.Logger

	// beforeWrite, when set (tests), runs between reading a revision and
	// writing it back.
	beforeWrite func(ctx context.Context, in *Injector, key types.NamespacedName, attempt int)

	// gcDue is set when a garbage collection is due (a deletion was seen).
	gcDue atomic.Bool
	// activity receives a signal (dropped when one is pending) for every
	// event that passes; nil: none is sent.
	activity chan struct{}
	// packages serializes the work on one package: its Drafts share an
	// owner, whose Sync prunes.
	packages keyedMutex

	mu       sync.Mutex
	owners   map[string]string                   // owner -> namespace, every owner synced by this process
	warned   map[string]string                   // revision -> resourceVersion of its last parse-error Event
	done     map[types.NamespacedName]draftState // Draft -> what was found at the resourceVersion last processed
	suspects map[string]time.Time                // owners without a revision at the last collection: since when
	listed   map[types.NamespacedName]bool       // Drafts the resync's list showed at a version not processed, or to verify

	versions versionLog
}

// draftState is what the injector found of a Draft at the resourceVersion
// it last processed.
type draftState struct {
	version string
	// ipam: the Draft holds IPAM objects; its condition is True.
	ipam bool
	// verify: the version was processed once; the next list that shows it
	// checks it once more. Porch was seen to serve, at one version, a
	// PackageRevision without the condition its resources were written
	// with, and a read of a Draft's resources to miss their content: a
	// Draft with IPAM objects whose listed revision lacks the condition,
	// and a Draft found without IPAM objects, are read once more.
	verify bool
}

// upToDate reports whether the Draft was processed at this resourceVersion.
func (in *Injector) upToDate(key types.NamespacedName, version string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return version != "" && in.done[key].version == version
}

// toVerify reports whether the Draft, listed as pr at the version it was
// processed at, is to be read once more (see draftState.verify); when the
// list shows it as expected, it is verified without a read.
func (in *Injector) toVerify(key types.NamespacedName, pr *unstructured.Unstructured) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	st, ok := in.done[key]
	if !ok || !st.verify || st.version != pr.GetResourceVersion() {
		return false
	}
	if st.ipam && conditionTrue(pr) {
		st.verify = false
		in.done[key] = st
		return false
	}
	return true
}

// pendingVerify reports whether the Draft waits for its one verifying
// read at this resourceVersion.
func (in *Injector) pendingVerify(key types.NamespacedName, version string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	st := in.done[key]
	return st.verify && st.version == version
}

// conditionTrue reports whether the PackageRevision shows the injector's
// condition True (Porch copies the Kptfile's conditions into its status).
func conditionTrue(pr *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(pr.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == ConditionType {
			return m["status"] == "True"
		}
	}
	return false
}

// sawListed records that the resync's list showed the Draft at a version
// not processed, or at one to verify: it is to be read from Porch.
func (in *Injector) sawListed(key types.NamespacedName) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.listed == nil {
		in.listed = map[types.NamespacedName]bool{}
	}
	in.listed[key] = true
}

// takeListed reports, once, whether the resync's list showed the Draft at
// a version not processed or to verify.
func (in *Injector) takeListed(key types.NamespacedName) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	listed := in.listed[key]
	delete(in.listed, key)
	return listed
}

// processed records that the Draft was processed at this resourceVersion
// and whether it holds IPAM objects. The first time at a version it is to
// be verified once (see draftState.verify); processed again at the same
// version, it is verified.
func (in *Injector) processed(key types.NamespacedName, version string, ipam bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.done == nil {
		in.done = map[types.NamespacedName]draftState{}
	}
	in.done[key] = draftState{version: version, ipam: ipam, verify: in.done[key].version != version}
}

// forget drops what is remembered of a revision that is gone or no longer
// a Draft.
func (in *Injector) forget(key types.NamespacedName) {
	in.versions.forget(key)
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.done, key)
	delete(in.listed, key)
	delete(in.warned, key.String())
}

// forgetAllBut drops what is remembered of revisions not in live.
func (in *Injector) forgetAllBut(live map[types.NamespacedName]bool) {
	in.versions.forgetAllBut(live)
	in.mu.Lock()
	defer in.mu.Unlock()
	for key := range in.done {
		if !live[key] {
			delete(in.done, key)
		}
	}
	for name := range in.warned {
		ns, n, _ := strings.Cut(name, "/")
		if !live[types.NamespacedName{Namespace: ns, Name: n}] {
			delete(in.warned, name)
		}
	}
}

// watched is told of a version of a Draft that the watch showed. When it
// is the answer to a write of the injector that replaced versions it never
// read, it records a Warning Event and logs them.
func (in *Injector) watched(pr *unstructured.Unstructured) {
	key := types.NamespacedName{Namespace: pr.GetNamespace(), Name: pr.GetName()}
	lost := in.versions.observe(key, pr.GetResourceVersion())
	if len(lost) == 0 {
		return
	}
	msg := fmt.Sprintf("Porch accepted the injector's write (version %s) on a version its cache had put back, "+
		"replacing version(s) %s written by someone else meanwhile; what they changed is in the history of the Draft's branch",
		pr.GetResourceVersion(), strings.Join(lost, ", "))
	in.Log.Info("a concurrent edit was overwritten", "revision", key.String(), "message", msg)
	in.event(pr, corev1.EventTypeWarning, EventOverwritten, msg)
}

// active is told of an event that passes.
func (in *Injector) active() {
	select {
	case in.activity <- struct{}{}:
	default:
	}
}

// deleted is told of a PackageRevision deletion: a garbage collection is
// due.
func (in *Injector) deleted(key types.NamespacedName) {
	in.forget(key)
	in.gcDue.Store(true)
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

// errAllocation is a revision whose IPAM resources could not all be
// allocated: its False condition is written, and it is tried again later
// (with backoff) without waiting for an edit.
type errAllocation struct{ msg string }

func (e errAllocation) Error() string { return "allocation failed: " + e.msg }

// Reconcile processes the PackageRevision req names when it is a Draft not
// yet processed at its current version.
func (in *Injector) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	key := req.NamespacedName
	revisions := in.Revisions
	if revisions == nil {
		revisions = in.Reader
	}
	listed := in.takeListed(key)
	if listed {
		// The resync's list of Porch showed this Draft at a version not
		// processed, or one to verify: the watch's cache may be behind (a
		// dropped event), so the revision is read from Porch.
		revisions = in.Reader
	}
	pr := newRevision()
	err := revisions.Get(ctx, key, pr)
	if apierrors.IsNotFound(err) && in.Revisions != nil && revisions != in.Reader {
		// The watch's cache can miss a revision that lives: Porch was seen
		// to send a new Draft's deletion when a repository refresh raced
		// its creation. The resync, which lists Porch itself, found it.
		if err = in.Reader.Get(ctx, key, pr); err == nil {
			logger.Info("revision missing from the watch's cache; read from Porch")
		}
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			in.forget(key)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("PackageRevision %s: %w", key, err)
	}
	if lifecycle(pr) != string(porchv1alpha1.PackageRevisionLifecycleDraft) {
		in.forget(key)
		return reconcile.Result{}, nil
	}
	if in.upToDate(key, pr.GetResourceVersion()) && !(listed && in.pendingVerify(key, pr.GetResourceVersion())) {
		return reconcile.Result{}, nil
	}
	started := time.Now()
	unlock := in.packages.lock(ownerOf(pr))
	defer unlock()
	for attempt := 1; attempt <= MaxAttempts; attempt++ {
		out, err := in.process(ctx, key, pr, attempt)
		if err == nil {
			if out.version != "" {
				in.processed(key, out.version, out.ipam)
			}
			logger.V(1).Info("processed", "version", out.version, "ipam", out.ipam, "wrote", out.wrote,
				"read", out.read, "sync", out.sync, "write", out.write, "took", time.Since(started))
			return reconcile.Result{}, nil
		}
		if stale := (errStaleRead{}); errors.As(err, &stale) {
			logger.Info("reading the revision again soon", "reason", err.Error(), "after", stale.retry)
			return reconcile.Result{RequeueAfter: stale.retry}, nil
		}
		if errors.As(err, new(errStaleAnswer)) {
			logger.Info("reading the revision again soon", "reason", err.Error())
			return reconcile.Result{RequeueAfter: staleAnswerRetry}, nil
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
	return reconcile.Result{}, fmt.Errorf("PackageRevision %s: still conflicting after %d attempts", key, MaxAttempts)
}

// PorchTimeout bounds each read and write of a revision's resources. They
// are not cancelled when the injector stops: Porch v1.5.8 was seen to
// keep a package locked for good when a client went away in the middle
// of a write.
const PorchTimeout = time.Minute

// porchContext is the context of one call to Porch: ctx's values, not its
// cancellation, and PorchTimeout.
func porchContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), PorchTimeout)
}

// outcome is what processing a Draft once found and did.
type outcome struct {
	// version is the resourceVersion of its resources after that; ""
	// when it is gone.
	version string
	// ipam: it holds IPAM objects; wrote: they or the Kptfile were
	// written.
	ipam, wrote bool
	timings
}

// timings are how long processing a Draft once spent reading its
// resources, allocating (the package engine's calls to ipam-server) and
// writing them.
type timings struct{ read, sync, write time.Duration }

// process reads, processes and (when changed) writes one Draft once.
func (in *Injector) process(ctx context.Context, key types.NamespacedName, pr *unstructured.Unstructured, attempt int) (outcome, error) {
	var prr porchv1alpha1.PackageRevisionResources
	var took timings
	started := time.Now()
	rctx, cancel := porchContext(ctx)
	err := in.Reader.Get(rctx, key, &prr)
	cancel()
	took.read = time.Since(started)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return outcome{}, nil
		}
		return outcome{}, fmt.Errorf("PackageRevision %s: read resources: %w", key, err)
	}
	if retry, ok := in.versions.refuse(key, prr.ResourceVersion, time.Now()); ok {
		// Porch serves a version the watch showed replaced: its cache went
		// back (see versionLog). Building on it would replace the newer
		// version; Porch's next refresh brings it back.
		return outcome{}, errStaleRead{version: prr.ResourceVersion, retry: retry}
	}
	files, err := parseFiles(prr.Spec.Resources)
	if err != nil {
		// Not parseable: nothing the injector can do until someone edits
		// it; one Event per version.
		if in.firstWarning(key.String(), prr.ResourceVersion) {
			in.event(pr, corev1.EventTypeWarning, EventFailed, err.Error())
		}
		return outcome{version: prr.ResourceVersion, timings: took}, nil
	}
	if !engine.HasIPAMObjects(files.items) {
		return outcome{version: prr.ResourceVersion, timings: took}, nil
	}
	owner := ownerOf(pr)
	in.track(owner, pr.GetNamespace())
	opts := in.Sync
	// The owner names one Porch package, whose revisions share it by
	// design: no package identity is needed, and drafts edited apart must
	// not refuse each other.
	opts.Owner, opts.Prune, opts.NoIdentity = owner, true, true
	opts.Source = sourceOf(pr)
	started = time.Now()
	changed, results, perr := engine.Process(ctx, in.IPAM, opts, &files.items)
	took.sync = time.Since(started)
	cond := engine.Condition{Type: ConditionType, Status: "True", Reason: ReasonAllocated, Message: summary(files.items)}
	if perr != nil {
		if ctx.Err() != nil {
			return outcome{}, ctx.Err()
		}
		cond = engine.Condition{Type: ConditionType, Status: "False", Reason: ReasonFailed, Message: errorMessage(results, perr)}
	}
	// A failure is tried again with backoff, written or not.
	failed := func(version string, wrote bool) (outcome, error) {
		if perr != nil {
			return outcome{}, errAllocation{cond.Message}
		}
		return outcome{version: version, ipam: true, wrote: wrote, timings: took}, nil
	}
	kf := files.kptfile()
	if kf != nil {
		conds := []engine.Condition{cond}
		if perr != nil {
			// Nephio's claims that failed get their own condition False
			// with the error, as Nephio's specializers write it.
			conds = append(conds, engine.NephioFailedConditions(kf, results)...)
		}
		for _, cond := range conds {
			c, err := engine.SetKptfileCondition(kf, cond)
			if err != nil {
				return outcome{}, fmt.Errorf("PackageRevision %s: Kptfile: %w", key, err)
			}
			changed = changed || c
		}
	}
	if !changed {
		return failed(prr.ResourceVersion, false)
	}
	if in.beforeWrite != nil {
		in.beforeWrite(ctx, in, key, attempt)
	}
	out, removed := files.changedFiles()
	if len(out)+len(removed) == 0 {
		return failed(prr.ResourceVersion, false)
	}
	read := prr.ResourceVersion
	if in.versions.superseded(key, read) {
		// The watch showed a newer version while this one was processed.
		return outcome{}, errConflict{fmt.Errorf("version %s was replaced while it was processed", read)}
	}
	maps.Copy(prr.Spec.Resources, out)
	for _, name := range removed {
		delete(prr.Spec.Resources, name)
	}
	log.FromContext(ctx).Info("writing revision", "owner", owner, "files", slices.Sorted(maps.Keys(out)), "removed", removed, "condition", cond.Status, "attempt", attempt)
	started = time.Now()
	wctx, cancel := porchContext(ctx)
	err = in.Client.Update(wctx, &prr)
	cancel()
	took.write = time.Since(started)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return outcome{}, nil
		}
		if isConflict(err) {
			return outcome{}, errConflict{err}
		}
		return outcome{}, fmt.Errorf("PackageRevision %s: update resources: %w", key, err)
	}
	if perr != nil {
		in.event(pr, corev1.EventTypeWarning, EventFailed, cond.Message)
	} else {
		in.event(pr, corev1.EventTypeNormal, EventAllocated, cond.Message+"; wrote "+strings.Join(slices.Sorted(maps.Keys(out)), ", "))
	}
	if prr.ResourceVersion == read {
		// Porch committed the write but answered with the version it
		// had read, and then kept serving that version: its cache missed
		// its own write. Nothing is recorded as processed; the revision is
		// read again soon (and written again if what Porch serves still
		// lacks the write).
		return outcome{}, errStaleAnswer{version: read}
	}
	in.versions.wrote(key, read, prr.ResourceVersion)
	return failed(prr.ResourceVersion, true)
}

// staleAnswerRetry is how soon a revision is read again whose write Porch
// answered with the version read before it, or that Porch served, the
// first time, at a version the watch had shown replaced.
const staleAnswerRetry = 3 * time.Second

// errStaleAnswer is a write Porch answered with the resourceVersion the
// revision had before it.
type errStaleAnswer struct{ version string }

func (e errStaleAnswer) Error() string {
	return "Porch answered the write with the version read before it (" + e.version + ")"
}

// errStaleRead is a read of a revision at a version the watch had shown
// replaced; it is read again after retry.
type errStaleRead struct {
	version string
	retry   time.Duration
}

func (e errStaleRead) Error() string {
	return "Porch serves version " + e.version + ", which the watch showed replaced (its cache went back)"
}

// summary is the message of a True condition.
func summary(items fn.KubeObjects) string {
	var allocs, prefixes, ipClaims, vlanClaims int
	for _, it := range items {
		switch {
		case it.IsGVK(ipamv1alpha1.Group, ipamv1alpha1.Version, ipamv1alpha1.KindIPAllocation):
			allocs++
		case it.IsGVK(ipamv1alpha1.Group, ipamv1alpha1.Version, ipamv1alpha1.KindIPPrefix):
			prefixes++
		case it.IsGVK(nipamv1alpha1.Group, nipamv1alpha1.Version, nipamv1alpha1.KindIPClaim):
			ipClaims++
		case it.IsGVK(vlanv1alpha1.Group, vlanv1alpha1.Version, vlanv1alpha1.KindVLANClaim):
			vlanClaims++
		}
	}
	if ipClaims+vlanClaims > 0 { // Nephio's claims are counted when there are some
		return fmt.Sprintf("%d IPAllocation(s), %d IPPrefix(es), %d IPClaim(s) and %d VLANClaim(s) allocated by ipam-server", allocs, prefixes, ipClaims, vlanClaims)
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
// A package is gone when neither a live list of PackageRevisions (prs;
// nil lists them) nor the watch's cache shows a revision of it, in two
// collections in a row: Porch's list can miss revisions while it
// refreshes a repository, and a release cannot be undone.
func (in *Injector) CollectGarbage(ctx context.Context, prs *unstructured.UnstructuredList) ([]string, error) {
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
	if prs == nil {
		prs = newRevisionList()
		if err := in.Reader.List(ctx, prs, opts...); err != nil {
			return nil, fmt.Errorf("list PackageRevisions: %w", err)
		}
	}
	alive := map[string]bool{}
	for i := range prs.Items {
		alive[ownerOf(&prs.Items[i])] = true
	}
	if in.Revisions != nil {
		cached := newRevisionList()
		if err := in.Revisions.List(ctx, cached, opts...); err != nil {
			return nil, fmt.Errorf("list cached PackageRevisions: %w", err)
		}
		for i := range cached.Items {
			alive[ownerOf(&cached.Items[i])] = true
		}
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
	in.mu.Lock()
	suspects := in.suspects
	in.suspects = map[string]time.Time{}
	in.mu.Unlock()
	now := time.Now()
	var released []string
	var errs []error
	for _, o := range slices.Sorted(maps.Keys(candidates)) {
		if alive[o] {
			continue
		}
		since, suspected := suspects[o]
		if !suspected || now.Sub(since) < releaseGrace {
			if !suspected {
				since = now
			}
			in.mu.Lock()
			in.suspects[o] = since // gone if still so at a collection releaseGrace later
			in.mu.Unlock()
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, in.timeout())
		_, err := in.IPAM.Sync(cctx, &ipamv1.SyncRequest{Owner: o, Prune: true})
		cancel()
		if err != nil {
			in.mu.Lock()
			in.suspects[o] = since
			in.mu.Unlock()
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

// releaseGrace is how long a package must have been found gone, by every
// collection in a row, before it is released: Porch's list and watch were
// seen to miss a live revision for a moment while a repository refresh
// raced its creation, and a release cannot be undone.
const releaseGrace = 30 * time.Second

// pendingRelease reports whether some owner waits for a later collection
// to be released.
func (in *Injector) pendingRelease() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.suspects) > 0
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
