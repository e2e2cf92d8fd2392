package injector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	porchv1alpha1 "github.com/nephio-project/porch/api/porch/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/functions/engine"
)

// A fleet: one blueprint with allocs IPAllocations spread over networks
// networks, published in the "blueprints" repository, and n Drafts
// cloned from it into a repository of their own, as a PackageVariantSet
// makes them (one package per site). The networks are an infrastructure
// owner's, synced to ipam-server directly, as a controller would.
type fleet struct {
	x         *e2e
	n         int
	allocs    int
	networks  int
	creators  int    // Drafts created at once
	blueprint string // the published blueprint's PackageRevision
	// createdAt is when the create of each Draft returned.
	createdAt map[string]time.Time
}

// fleetVRF is the network instance of the fleet's networks.
const fleetVRF = "vpc-fleet"

// infraYAML is the fleet's network instance and its networks, one /16
// each.
func (f *fleet) infraYAML() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: ipam.nephio.org/v1alpha1\nkind: NetworkInstance\nmetadata:\n  name: %s\nspec:\n  prefixes:\n  - prefix: 10.0.0.0/8\n", fleetVRF)
	for i := range f.networks {
		fmt.Fprintf(&b, "---\napiVersion: ipam.nephio.org/v1alpha1\nkind: IPPrefix\nmetadata:\n  name: net-%d\nspec:\n  prefix: 10.%d.0.0/16\n  network: net-%d\n  networkInstance: %s\n", i, 16+i, i, fleetVRF)
	}
	return b.String()
}

// fleetAlloc is one IPAllocation of a fleet package.
func fleetAlloc(name string, network int) string {
	return "apiVersion: ipam.nephio.org/v1alpha1\nkind: IPAllocation\nmetadata:\n  name: " + name +
		"\nspec:\n  kind: network\n  selector:\n    matchLabels:\n      nephio.org/network-instance: " + fleetVRF +
		"\n      nephio.org/network-name: net-" + strconv.Itoa(network) + "\n"
}

// allocsYAML is the blueprint's allocs.yaml.
func (f *fleet) allocsYAML() string {
	docs := make([]string, f.allocs)
	for i := range f.allocs {
		docs[i] = fleetAlloc(fmt.Sprintf("if-%02d", i), i%f.networks)
	}
	return strings.Join(docs, "---\n")
}

// setUp syncs the networks to ipam-server and publishes the blueprint.
func (f *fleet) setUp() {
	x := f.x
	x.t.Helper()
	p, err := parseFiles(map[string]string{"infra.yaml": f.infraYAML()})
	must(x.t, err)
	_, _, err = engine.Process(x.ctx, x.ipam, engine.Options{Owner: "infra", Prune: true, NoIdentity: true}, &p.items)
	must(x.t, err)
	bp := x.createDraft("site-blueprint", "v1", porchv1alpha1.Task{Type: porchv1alpha1.TaskTypeInit,
		Init: &porchv1alpha1.PackageInitTaskSpec{Description: "one site"}})
	x.edit(bp, func(r map[string]string) { r["allocs.yaml"] = f.allocsYAML() })
	x.setLifecycle(bp, "Proposed", "")
	x.setLifecycle(bp, "Published", "approval")
	f.blueprint = bp
}

// siteName is the package of the i-th site.
func siteName(i int) string { return fmt.Sprintf("site-%04d", i) }

// create creates the Drafts of sites from to to-1 in repo, f.creators at
// once, calling after (when set) with the count created so far after each
// one, and returns their names in order and when the last create
// returned.
func (f *fleet) create(repo string, from, to int, after func(created int)) ([]string, time.Time) {
	x := f.x
	x.t.Helper()
	names := make([]string, to-from)
	next := make(chan int)
	var mu sync.Mutex
	var errs []error
	created := 0
	var wg sync.WaitGroup
	for range max(f.creators, 1) {
		wg.Go(func() {
			for i := range next {
				task := porchv1alpha1.Task{Type: porchv1alpha1.TaskTypeClone, Clone: &porchv1alpha1.PackageCloneTaskSpec{
					Upstream: porchv1alpha1.UpstreamPackage{UpstreamRef: &porchv1alpha1.PackageRevisionRef{Name: f.blueprint}}}}
				name, err := x.createDraftIn(repo, siteName(i), "v1", task)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				names[i-from] = name
				if f.createdAt == nil {
					f.createdAt = map[string]time.Time{}
				}
				f.createdAt[name] = time.Now()
				created++
				n := created
				mu.Unlock()
				if after != nil {
					after(n)
				}
			}
		})
	}
	for i := from; i < to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	last := time.Now()
	must(x.t, errors.Join(errs...))
	f.ensureServed(repo, names)
	return names, last
}

// ensureServed returns once Porch serves every Draft just created in repo.
// Porch v1.5.8 can drop a Draft from its cache for good when a refresh of
// the repository races the Draft's creation (it logs "deleting PackageRev
// ... because PackageRevision was removed from SoT" though the draft
// branch is in Git), and serves it again only after a refresh that finds
// the repository changed from outside Porch. The fleet checks the list
// twice, a repository refresh apart; while Drafts are missing it pushes a
// ref to the repository, as any Git user could, and waits for the refresh.
func (f *fleet) ensureServed(repo string, names []string) {
	x := f.x
	x.t.Helper()
	const refresh = 12 * time.Second // Porch's --repo-sync-frequency is 10s
	deadline := time.Now().Add(5 * time.Minute)
	time.Sleep(refresh)
	for nudge := 1; ; nudge++ {
		prs := newRevisionList()
		must(x.t, x.env.k8s.List(x.ctx, prs, client.InNamespace(testNamespace)))
		listed := map[string]bool{}
		for _, pr := range prs.Items {
			listed[pr.GetName()] = true
		}
		var missing []string
		for _, n := range names {
			if !listed[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			x.t.Fatalf("Porch still does not serve %d of the %d Drafts created in %s: %v", len(missing), len(names), repo, missing)
		}
		x.t.Logf("Porch does not serve %d of the %d Drafts created in %s (%v): pushing a ref to the repository for its next refresh",
			len(missing), len(names), repo, missing)
		gitRun(x.t, "", "--git-dir", filepath.Join(x.env.dir, repo+".git"), "update-ref", "refs/heads/refresh-"+strconv.Itoa(nudge), "main")
		time.Sleep(refresh)
	}
}

// conditionWatch follows the ConditionType condition of every
// PackageRevision of the namespace, as Porch serves it on the
// PackageRevision (from the Kptfile), through a watch.
type conditionWatch struct {
	c       client.WithWatch
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every change
	conds   map[string]engine.Condition
	seen    map[string]time.Time // when the condition was last seen to change
	// logDir, when set, holds the injector's logs: a failed wait prints
	// their lines about the revisions still waiting.
	logDir string
}

// watchConditions starts a conditionWatch that runs until the test ends.
func watchConditions(t testing.TB, cfg *rest.Config) *conditionWatch {
	t.Helper()
	c, err := client.NewWithWatch(cfg, client.Options{})
	must(t, err)
	w := &conditionWatch{c: c, changed: make(chan struct{}), conds: map[string]engine.Condition{}, seen: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			wi, err := c.Watch(ctx, newRevisionList(), client.InNamespace(testNamespace))
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range wi.ResultChan() {
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok || u.GetName() == "" {
					continue
				}
				w.observe(u)
			}
			wi.Stop()
		}
	}()
	return w
}

func (w *conditionWatch) observe(pr *unstructured.Unstructured) {
	var c engine.Condition
	conds, _, _ := unstructured.NestedSlice(pr.Object, "status", "conditions")
	for _, sc := range conds {
		m, _ := sc.(map[string]any)
		if m["type"] == ConditionType {
			c.Type = ConditionType
			c.Status, _ = m["status"].(string)
			c.Reason, _ = m["reason"].(string)
			c.Message, _ = m["message"].(string)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, ok := w.conds[pr.GetName()]; ok && old == c {
		return
	}
	w.conds[pr.GetName()] = c
	w.seen[pr.GetName()] = time.Now()
	close(w.changed)
	w.changed = make(chan struct{})
}

// waitTrue waits until the condition of every name is True and returns
// the last of them to be seen turning so, and when. Porch's watch can drop
// events under load, so it also lists the revisions every 5 s while it
// waits (a change seen so is timed at the list).
func (w *conditionWatch) waitTrue(t testing.TB, names []string, timeout time.Duration) (last string, at time.Time) {
	t.Helper()
	deadline := time.After(timeout)
	relist := time.NewTicker(5 * time.Second)
	defer relist.Stop()
	for {
		w.mu.Lock()
		last, at = "", time.Time{}
		pending := 0
		var example string
		for _, n := range names {
			if w.conds[n].Status != "True" {
				pending++
				example = n
				continue
			}
			if s := w.seen[n]; s.After(at) {
				last, at = n, s
			}
		}
		changed := w.changed
		w.mu.Unlock()
		if pending == 0 {
			return last, at
		}
		select {
		case <-changed:
		case <-relist.C:
			prs := newRevisionList()
			if err := w.c.List(context.Background(), prs, client.InNamespace(testNamespace)); err == nil {
				for i := range prs.Items {
					w.observe(&prs.Items[i])
				}
			}
		case <-deadline:
			w.mu.Lock()
			var waiting []string
			for _, n := range names {
				if w.conds[n].Status != "True" {
					waiting = append(waiting, n)
				}
			}
			w.mu.Unlock()
			w.printLogsAbout(t, waiting[:min(len(waiting), 5)])
			t.Fatalf("%d of %d revisions without a True %s condition after %s: %v (e.g. %s: %+v)", pending, len(names), ConditionType, timeout,
				waiting[:min(len(waiting), 20)], example, w.get(example))
		}
	}
}

// printLogsAbout logs the lines of the injector's logs that name one of
// the revisions (at most 60 each).
func (w *conditionWatch) printLogsAbout(t testing.TB, names []string) {
	t.Helper()
	if w.logDir == "" {
		return
	}
	files, _ := filepath.Glob(filepath.Join(w.logDir, "injector*.log"))
	for _, name := range names {
		var lines []string
		for _, f := range files {
			b, _ := os.ReadFile(f)
			for l := range strings.Lines(string(b)) {
				if strings.Contains(l, name) {
					lines = append(lines, filepath.Base(f)+": "+l)
				}
			}
		}
		t.Logf("--- %s in the injector's logs (%d lines) ---\n%s", name, len(lines), strings.Join(lines[max(0, len(lines)-60):], ""))
	}
}

// trueSince reports whether name's condition is True, and since when it
// was seen so.
func (w *conditionWatch) trueSince(name string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[name], w.conds[name].Status == "True"
}

func (w *conditionWatch) get(name string) engine.Condition {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conds[name]
}

// startInjector runs the injector in-process until the returned stop is
// called (or the test ends), logging into the environment's logs.
func startInjector(t testing.TB, env *porchEnv, cfg Config, logName string) (stop func()) {
	t.Helper()
	logf, err := os.Create(filepath.Join(env.logs, logName))
	must(t, err)
	if cfg.RESTConfig == nil {
		cfg.RESTConfig = env.cfg
	}
	cfg.Namespace, cfg.SkipNameValidation = testNamespace, true
	cfg.Logger = logr.FromSlogHandler(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelDebug})) // V(1): every Draft processed
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
			_ = logf.Close()
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			t.Logf("--- tail of %s ---\n%s", logName, b)
		}
	})
	return stop
}

// startWriter runs the do-nothing writer the fleet benchmark measures
// Porch's own ceiling with: a controller that, for every Draft of repo,
// reads its resources once and writes one Kptfile condition (the
// injector's, True), with workers at once, until the returned stop is
// called.
func startWriter(t testing.TB, cfg *rest.Config, repo string, workers int) (stop func()) {
	t.Helper()
	scheme := k8sruntime.NewScheme()
	must(t, clientgoscheme.AddToScheme(scheme))
	must(t, porchv1alpha1.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Logger:     logr.Discard(),
	})
	must(t, err)
	w := &writer{cache: mgr.GetCache(), api: mgr.GetAPIReader(), client: mgr.GetClient(), repo: repo, done: map[types.NamespacedName]bool{}}
	must(t, ctrl.NewControllerManagedBy(mgr).Named("fleet-writer").
		For(newRevision(), builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(e event.CreateEvent) bool { return isDraft(e.Object) },
			UpdateFunc:  func(e event.UpdateEvent) bool { return isDraft(e.ObjectNew) },
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(w))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("writer: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// writer is startWriter's reconciler.
type writer struct {
	cache, api client.Reader
	client     client.Client
	repo       string
	mu         sync.Mutex
	done       map[types.NamespacedName]bool
}

// Reconcile reads the Draft's resources and writes the condition, once.
func (w *writer) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pr := newRevision()
	if err := w.cache.Get(ctx, req.NamespacedName, pr); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	repo, _, _ := unstructured.NestedString(pr.Object, "spec", "repository")
	w.mu.Lock()
	done := w.done[req.NamespacedName]
	w.mu.Unlock()
	if repo != w.repo || done || lifecycle(pr) != string(porchv1alpha1.PackageRevisionLifecycleDraft) {
		return reconcile.Result{}, nil
	}
	for attempt := 1; ; attempt++ {
		var prr porchv1alpha1.PackageRevisionResources
		if err := w.api.Get(ctx, req.NamespacedName, &prr); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		p, err := parseFiles(map[string]string{"Kptfile": prr.Spec.Resources["Kptfile"]})
		if err != nil {
			return reconcile.Result{}, err
		}
		kf := p.kptfile()
		if kf == nil {
			return reconcile.Result{}, fmt.Errorf("%s has no Kptfile", req.NamespacedName)
		}
		if _, err := engine.SetKptfileCondition(kf, engine.Condition{Type: ConditionType, Status: "True", Reason: ReasonAllocated, Message: "written by the do-nothing writer"}); err != nil {
			return reconcile.Result{}, err
		}
		out, _ := p.changedFiles()
		prr.Spec.Resources["Kptfile"] = out["Kptfile"]
		err = w.client.Update(ctx, &prr)
		if err == nil {
			break
		}
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		if !isConflict(err) || attempt == MaxAttempts {
			return reconcile.Result{}, err
		}
		time.Sleep(time.Duration(attempt) * 50 * time.Millisecond)
	}
	w.mu.Lock()
	w.done[req.NamespacedName] = true
	w.mu.Unlock()
	return reconcile.Result{}, nil
}

// ownerAllocations returns owner -> allocation name -> prefix of every
// allocation ipam-server holds for owners starting with prefix.
func ownerAllocations(t testing.TB, ipam ipamv1.IPAMClient, prefix string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	token := ""
	for {
		resp, err := ipam.List(context.Background(), &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, PageToken: token})
		must(t, err)
		for _, o := range resp.GetObjects() {
			a := o.GetAllocation()
			k := a.GetAllocation().GetKey()
			if !strings.HasPrefix(k.GetOwner(), prefix) {
				continue
			}
			if out[k.GetOwner()] == nil {
				out[k.GetOwner()] = map[string]string{}
			}
			out[k.GetOwner()][k.GetName()] = a.GetResult().GetPrefix()
		}
		if token = resp.GetNextPageToken(); token == "" {
			return out
		}
	}
}

// envInt is the integer environment variable name, or def when unset.
func envInt(t testing.TB, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// envDuration is the duration environment variable name, or def when
// unset.
func envDuration(t testing.TB, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 2m", name, v)
	}
	return d
}
