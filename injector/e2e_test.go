package injector

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/kptdev/krm-functions-sdk/go/fn"
	porchv1alpha1 "github.com/nephio-project/porch/api/porch/v1alpha1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// The IPAM resources of the test package: a VRF, a /24 and allocations.
const ipamBase = `apiVersion: ipam.nephio.org/v1alpha1
kind: NetworkInstance
metadata:
  name: vpc-1
spec:
  prefixes:
  - prefix: 10.0.0.0/8
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPPrefix
metadata:
  name: net1
spec:
  prefix: 10.1.1.0/24
  network: net1
  networkInstance: vpc-1
`

func allocYAML(name string) string {
	return `---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPAllocation
metadata:
  name: ` + name + `
spec:
  kind: network
  selector:
    matchLabels:
      nephio.org/network-instance: vpc-1
      nephio.org/network-name: net1
`
}

// readinessGate is added to the Kptfile so that Porch requires the
// injector's condition before approval.
const readinessGate = `  readinessGates:
  - conditionType: ` + ConditionType + `
`

type e2e struct {
	t    testing.TB
	env  *porchEnv
	ipam ipamv1.IPAMClient
	ctx  context.Context
}

func prName(pkg, ws string) string { return testRepo + "." + pkg + "." + ws }

func (x *e2e) key(name string) client.ObjectKey {
	return client.ObjectKey{Namespace: testNamespace, Name: name}
}

// createDraft creates a Draft of pkg in workspace ws with tasks.
func (x *e2e) createDraft(pkg, ws string, task porchv1alpha1.Task) string {
	x.t.Helper()
	name, err := x.createDraftIn(testRepo, pkg, ws, task)
	must(x.t, err)
	return name
}

// createDraftIn creates a Draft of pkg in workspace ws of repository repo
// with task and returns its name.
func (x *e2e) createDraftIn(repo, pkg, ws string, task porchv1alpha1.Task) (string, error) {
	pr := &porchv1alpha1.PackageRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: repo + "." + pkg + "." + ws},
		Spec: porchv1alpha1.PackageRevisionSpec{
			PackageName: pkg, RepositoryName: repo, WorkspaceName: porchv1alpha1.WorkspaceName(ws),
			Lifecycle: porchv1alpha1.PackageRevisionLifecycleDraft, Tasks: []porchv1alpha1.Task{task},
		},
	}
	if err := x.env.k8s.Create(x.ctx, pr); err != nil {
		return "", fmt.Errorf("create PackageRevision %s: %w", pr.Name, err)
	}
	return pr.Name, nil
}

func (x *e2e) resources(name string) map[string]string {
	x.t.Helper()
	var prr porchv1alpha1.PackageRevisionResources
	must(x.t, x.env.k8s.Get(x.ctx, x.key(name), &prr))
	return prr.Spec.Resources
}

// edit applies f to the revision's resources and writes them, retrying
// on conflicts with the injector.
func (x *e2e) edit(name string, f func(map[string]string)) {
	x.t.Helper()
	must(x.t, x.retryConflict(func() error {
		var prr porchv1alpha1.PackageRevisionResources
		if err := x.env.k8s.Get(x.ctx, x.key(name), &prr); err != nil {
			return err
		}
		f(prr.Spec.Resources)
		return x.env.k8s.Update(x.ctx, &prr)
	}))
}

// retryConflict runs a read-modify-write again, with backoff, while it
// loses the race against an injector write that landed between its read
// and its write; Porch reports that as a 409 or wraps it in a 500, which
// isConflict both recognises.
func (x *e2e) retryConflict(write func() error) error {
	return retry.OnError(retry.DefaultBackoff, isConflict, write)
}

// allocations returns name -> status.prefix of the IPAllocations in res.
func allocations(t testing.TB, res map[string]string) map[string]string {
	t.Helper()
	p, err := parseFiles(res)
	must(t, err)
	out := map[string]string{}
	for _, it := range p.items {
		if it.IsGVK(ipamv1alpha1.Group, ipamv1alpha1.Version, ipamv1alpha1.KindIPAllocation) {
			s, _, _ := it.NestedString("status", "prefix")
			out[it.GetName()] = s
		}
	}
	return out
}

// waitAllocated waits until the revision's IPAllocations are exactly
// names, all with an address, and its condition is True.
func (x *e2e) waitAllocated(name string, names ...string) map[string]string {
	x.t.Helper()
	var got map[string]string
	eventually(x.t, 60*time.Second, name+" allocated "+strings.Join(names, ","), func() error {
		res := x.resources(name)
		got = allocations(x.t, res)
		var have []string
		for n, p := range got {
			if p == "" {
				c, _ := getCondition(res)
				return fmt.Errorf("%s has no status.prefix yet: %v; condition %+v", n, got, c)
			}
			have = append(have, n)
		}
		slices.Sort(have)
		if !slices.Equal(have, names) {
			return fmt.Errorf("allocations %v", got)
		}
		c, ok := getCondition(res)
		if !ok || c.Status != "True" {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	return got
}

// serverAllocations lists the allocations ipam-server holds for owner.
func (x *e2e) serverAllocations(owner string) map[string]string {
	x.t.Helper()
	resp, err := x.ipam.List(x.ctx, &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, Owner: owner})
	must(x.t, err)
	out := map[string]string{}
	for _, o := range resp.GetObjects() {
		a := o.GetAllocation()
		out[a.GetAllocation().GetKey().GetName()] = a.GetResult().GetPrefix()
	}
	return out
}

func TestPorchE2E(t *testing.T) {
	start := time.Now()
	env := startPorch(t)
	srv := servertest.Start(t, server.Config{}, false)
	x := &e2e{t: t, env: env, ipam: srv.Client(t), ctx: context.Background()}

	// The injector, in-process, with a short GC period and a resync
	// period longer than the test: every edit is found by the watch. The
	// hook makes one write lose a race when armed.
	var armed atomic.Bool
	var conflicts atomic.Int32
	var gcMu sync.Mutex
	var lastGC time.Time // when the last garbage collection done started
	hook := func(ctx context.Context, _ *Injector, _ types.NamespacedName, attempt int) {
		if !armed.CompareAndSwap(true, false) {
			return
		}
		// Someone else edits the package between the injector's read and
		// its write.
		x.edit(prName("net-pkg", "v1"), func(r map[string]string) {
			r["other.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\ndata:\n  edited-by: someone-else\n"
		})
		conflicts.Add(1)
	}
	logf, err := os.Create(filepath.Join(env.logs, "injector.log"))
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			RESTConfig: env.cfg, Server: srv.Addr, Namespace: testNamespace,
			GCInterval: 500 * time.Millisecond, ResyncInterval: time.Hour, SkipNameValidation: true,
			Logger:      logr.FromSlogHandler(slog.NewTextHandler(logf, nil)),
			beforeWrite: hook,
			afterGC: func(started time.Time) {
				gcMu.Lock()
				lastGC = started
				gcMu.Unlock()
			},
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			t.Logf("--- tail of injector.log ---\n%s", b)
		}
	})
	owner := Owner(testRepo, "net-pkg")

	// 1. A new Draft with two IPAllocations.
	v1 := x.createDraft("net-pkg", "v1", porchv1alpha1.Task{Type: porchv1alpha1.TaskTypeInit,
		Init: &porchv1alpha1.PackageInitTaskSpec{Description: "a package with IPs"}})
	x.edit(v1, func(r map[string]string) {
		r["Kptfile"] = strings.Replace(r["Kptfile"], "info:\n", "info:\n"+readinessGate, 1)
		r["ipam.yaml"] = ipamBase + allocYAML("alloc1") + allocYAML("alloc2")
	})
	got := x.waitAllocated(v1, "alloc1", "alloc2")
	t.Logf("Draft %s: %v (after %s)", v1, got, time.Since(start).Round(100*time.Millisecond))
	if c, _ := getCondition(x.resources(v1)); c.Reason != ReasonAllocated {
		t.Errorf("condition %+v", c)
	}
	t.Logf("Kptfile of %s as the injector left it:\n%s", v1, x.resources(v1)["Kptfile"])

	// 2. One more allocation: only it is new.
	x.edit(v1, func(r map[string]string) { r["ipam.yaml"] += allocYAML("alloc3") })
	got2 := x.waitAllocated(v1, "alloc1", "alloc2", "alloc3")
	for _, n := range []string{"alloc1", "alloc2"} {
		if got2[n] != got[n] {
			t.Errorf("%s changed from %s to %s when alloc3 was added", n, got[n], got2[n])
		}
	}

	// 3. Remove alloc2: ipam-server releases it.
	x.edit(v1, func(r map[string]string) {
		p, err := parseFiles(map[string]string{"ipam.yaml": r["ipam.yaml"]})
		must(t, err)
		var keep fn.KubeObjects
		for _, it := range p.items {
			if it.GetName() != "alloc2" {
				keep = append(keep, it)
			}
		}
		r["ipam.yaml"] = serialize(keep)
	})
	x.waitAllocated(v1, "alloc1", "alloc3")
	eventually(t, 30*time.Second, "alloc2 released", func() error {
		if a := x.serverAllocations(owner); len(a) != 2 || a["alloc2"] != "" {
			return fmt.Errorf("server holds %v", a)
		}
		return nil
	})

	// 4. A concurrent edit makes the injector's write conflict: it reads
	// again, runs again and writes both edits.
	armed.Store(true)
	x.edit(v1, func(r map[string]string) { r["ipam.yaml"] += allocYAML("alloc4") })
	final := x.waitAllocated(v1, "alloc1", "alloc3", "alloc4")
	t.Logf("the injector's write conflicted with the concurrent edit and was retried; other.yaml and alloc4 are both there: %v", final)
	if conflicts.Load() != 1 {
		t.Fatalf("the concurrent edit hook ran %d times, want 1", conflicts.Load())
	}
	if !strings.Contains(x.resources(v1)["other.yaml"], "someone-else") {
		t.Fatalf("the concurrent edit was lost: %v", x.resources(v1))
	}

	// 5. Propose and approve: the IPs are committed in Git. (Revisions
	// are handled unstructured: this Porch serves spec.revision as a
	// number, which the porch/api v1.3.0 struct cannot decode.)
	x.setLifecycle(v1, "Proposed", "")
	x.setLifecycle(v1, "Published", "approval")
	inGit := gitRun(t, "", "--git-dir", env.bareRepo, "show", "main:net-pkg/ipam.yaml")
	for n, ip := range final {
		if !strings.Contains(inGit, "prefix: "+ip) {
			t.Errorf("%s's %s is not in Git:\n%s", n, ip, inGit)
		}
	}
	t.Logf("git log of the bare repo:\n%s", gitRun(t, "", "--git-dir", env.bareRepo, "log", "--oneline", "--decorate", "--all"))
	t.Logf("git show main:net-pkg/ipam.yaml:\n%s", inGit)

	// 6. A new Draft copied from the published revision keeps the IPs.
	v2 := x.createDraft("net-pkg", "v2", porchv1alpha1.Task{Type: porchv1alpha1.TaskTypeEdit,
		Edit: &porchv1alpha1.PackageEditTaskSpec{Source: &porchv1alpha1.PackageRevisionRef{Name: v1}}})
	copied := x.waitAllocated(v2, "alloc1", "alloc3", "alloc4")
	if fmt.Sprint(copied) != fmt.Sprint(final) {
		t.Errorf("the copy has %v, the published revision %v", copied, final)
	}
	if a := x.serverAllocations(owner); fmt.Sprint(a) != fmt.Sprint(final) {
		t.Errorf("server holds %v, want %v", a, final)
	}

	// 7. Deleting the Draft while the published revision exists releases
	// nothing; deleting the package (every revision) releases all.
	deletedAt := time.Now()
	must(t, env.k8s.Delete(x.ctx, newRevisionNamed(v2)))
	// The deletion's watch event makes a collection due: wait for one that
	// started after it.
	eventually(t, 30*time.Second, "a garbage collection after the deletion", func() error {
		gcMu.Lock()
		defer gcMu.Unlock()
		if !lastGC.After(deletedAt) {
			return fmt.Errorf("last collection started at %s, the deletion at %s", lastGC.Format(time.StampMicro), deletedAt.Format(time.StampMicro))
		}
		return nil
	})
	if a := x.serverAllocations(owner); fmt.Sprint(a) != fmt.Sprint(final) {
		t.Fatalf("deleting the Draft released allocations: server holds %v, want %v", a, final)
	}
	// Every revision of the package: v1, and the one Porch keeps for the
	// package on the main branch.
	prs := newRevisionList()
	must(t, env.k8s.List(x.ctx, prs, client.InNamespace(testNamespace)))
	var deleted []string
	for i := range prs.Items {
		pr := &prs.Items[i]
		if ownerOf(pr) != owner {
			continue
		}
		if lifecycle(pr) == "Published" {
			x.setLifecycle(pr.GetName(), "DeletionProposed", "")
		}
		must(t, env.k8s.Delete(x.ctx, newRevisionNamed(pr.GetName())))
		deleted = append(deleted, pr.GetName())
	}
	t.Logf("deleted every revision of net-pkg: %v", deleted)
	eventually(t, 90*time.Second, "package released", func() error {
		if a := x.serverAllocations(owner); len(a) != 0 {
			return fmt.Errorf("server still holds %v", a)
		}
		return nil
	})

	// 8. An exhausted pool: a False condition and a Warning Event; the
	// IPAM resources stay untouched.
	small := x.createDraft("small-pkg", "v1", porchv1alpha1.Task{Type: porchv1alpha1.TaskTypeInit,
		Init: &porchv1alpha1.PackageInitTaskSpec{Description: "too many IPs"}})
	tiny := strings.Replace(ipamBase, "10.1.1.0/24", "10.2.0.0/30", 1) + allocYAML("host-1") + allocYAML("host-2") + allocYAML("host-3")
	x.edit(small, func(r map[string]string) { r["ipam.yaml"] = tiny })
	eventually(t, 60*time.Second, "False condition", func() error {
		c, ok := getCondition(x.resources(small))
		if !ok || c.Status != "False" || c.Reason != ReasonFailed {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	c, _ := getCondition(x.resources(small))
	t.Logf("condition of %s: %+v", small, c)
	if got := x.resources(small)["ipam.yaml"]; got != tiny {
		t.Errorf("ipam.yaml changed on failure:\n%s", got)
	}
	eventually(t, 30*time.Second, "Warning Event", func() error {
		var evs eventsv1.EventList
		if err := env.k8s.List(x.ctx, &evs, client.InNamespace(testNamespace)); err != nil {
			return err
		}
		for _, ev := range evs.Items {
			if ev.Regarding.Name == small && ev.Reason == EventFailed && ev.Type == "Warning" {
				t.Logf("Event on %s: %s %s: %s", small, ev.Type, ev.Reason, ev.Note)
				return nil
			}
		}
		return fmt.Errorf("no %s Event on %s among %d", EventFailed, small, len(evs.Items))
	})
	// The readiness gate: Porch serves the Kptfile's gate and the False
	// condition on the PackageRevision, where porchctl rpkg propose and
	// approve check them (Porch v1.5.8 enforces gates in the client, not
	// in the approval subresource).
	x.edit(small, func(r map[string]string) {
		r["Kptfile"] = strings.Replace(r["Kptfile"], "info:\n", "info:\n"+readinessGate, 1)
	})
	eventually(t, 30*time.Second, "gate and condition on the PackageRevision", func() error {
		u := newRevision()
		if err := env.k8s.Get(x.ctx, x.key(small), u); err != nil {
			return err
		}
		gates, _, _ := unstructured.NestedSlice(u.Object, "spec", "readinessGates")
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		gated, failed := false, false
		for _, g := range gates {
			if m, _ := g.(map[string]any); m["conditionType"] == ConditionType {
				gated = true
			}
		}
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == ConditionType && m["status"] == "False" {
				failed = true
			}
		}
		if !gated || !failed {
			return fmt.Errorf("spec.readinessGates %v, status.conditions %v", gates, conds)
		}
		t.Logf("PackageRevision %s: spec.readinessGates %v, status.conditions %v", small, gates, conds)
		return nil
	})

	// 9. Cluster API claims in a package revision: the injector writes
	// each claim's IPAddress into a new file, and deletes the file when
	// the claim leaves the package.
	capi := x.createDraft("capi-pkg", "v1", porchv1alpha1.Task{Type: porchv1alpha1.TaskTypeInit,
		Init: &porchv1alpha1.PackageInitTaskSpec{Description: "node addresses for a cluster"}})
	const pool = "apiVersion: ipam.nephio.org/v1alpha1\nkind: InClusterIPPool\nmetadata: {name: nodes, namespace: default}\n" +
		"spec: {addresses: [10.50.0.10-10.50.0.20], prefix: 24, gateway: 10.50.0.1}\n"
	claimDoc := func(name string) string {
		return "---\napiVersion: ipam.cluster.x-k8s.io/v1beta2\nkind: IPAddressClaim\nmetadata: {name: " + name +
			", namespace: default}\nspec:\n  poolRef: {apiGroup: ipam.nephio.org, kind: InClusterIPPool, name: nodes}\n"
	}
	x.edit(capi, func(r map[string]string) { r["claims.yaml"] = pool + claimDoc("node-0") + claimDoc("node-1") })
	eventually(t, 60*time.Second, "IPAddress files written", func() error {
		r := x.resources(capi)
		if !strings.Contains(r["ipaddress-node-0.yaml"], "address: 10.50.0.10") || !strings.Contains(r["ipaddress-node-1.yaml"], "address: 10.50.0.11") {
			return fmt.Errorf("resources %v", slices.Sorted(maps.Keys(r)))
		}
		return nil
	})
	t.Logf("ipaddress-node-0.yaml as the injector wrote it:\n%s", x.resources(capi)["ipaddress-node-0.yaml"])
	x.edit(capi, func(r map[string]string) { r["claims.yaml"] = pool + claimDoc("node-0") })
	eventually(t, 60*time.Second, "ipaddress-node-1.yaml removed", func() error {
		if r := x.resources(capi); r["ipaddress-node-1.yaml"] != "" || r["ipaddress-node-0.yaml"] == "" {
			return fmt.Errorf("resources %v", slices.Sorted(maps.Keys(r)))
		}
		return nil
	})
	t.Logf("Porch e2e took %s", time.Since(start).Round(100*time.Millisecond))
}

func newRevisionNamed(name string) *unstructured.Unstructured {
	u := newRevision()
	u.SetNamespace(testNamespace)
	u.SetName(name)
	return u
}

// setLifecycle moves a revision to lifecycle, through subresource when
// not empty (approval).
func (x *e2e) setLifecycle(name, lifecycle, subresource string) {
	x.t.Helper()
	must(x.t, x.retryConflict(func() error {
		u := newRevision()
		if err := x.env.k8s.Get(x.ctx, x.key(name), u); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(u.Object, lifecycle, "spec", "lifecycle"); err != nil {
			return err
		}
		if subresource != "" {
			return x.env.k8s.SubResource(subresource).Update(x.ctx, u)
		}
		return x.env.k8s.Update(x.ctx, u)
	}))
}
