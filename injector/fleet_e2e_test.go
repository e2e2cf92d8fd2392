package injector

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	porchv1alpha1 "github.com/nephio-project/porch/api/porch/v1alpha1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// TestPorchFleet is the injector at fleet scale against the real Porch:
// FLEET_DRAFTS (50) Drafts of 10 IPAllocations each, cloned from one
// blueprint at once (the W9 benchmark runs 200; this test keeps make test
// short). The injector is restarted when half of them are created, and
// one Draft is edited between the injector's read and its write. Then:
// every Draft holds its 10 allocations, all distinct and as ipam-server
// holds them, under one owner per package; the edit is kept; deleting a
// quarter of the Drafts releases exactly their allocations.
func TestPorchFleet(t *testing.T) {
	start := time.Now()
	n := envInt(t, "FLEET_DRAFTS", 50)
	const allocs = 10
	env := startPorch(t)
	srv := servertest.Start(t, server.Config{}, false)
	x := &e2e{t: t, env: env, ipam: srv.Client(t), ctx: context.Background()}
	f := &fleet{x: x, n: n, allocs: allocs, networks: 4, creators: 4}
	f.setUp()
	conds := watchConditions(t, env.cfg)
	conds.logDir = env.logs
	env.addRepo(t, "fleet")

	// The edited Draft: someone adds a file between the injector's read
	// and its write, once, and the hook returns when the injector's watch
	// has shown the edit. The injector must not write on the version it
	// read: it reads again. Porch's own check (a 409) is not enough at this
	// scale: Porch v1.5.8 accepts a write on a version its cache put back
	// when a repository refresh overlapped the edit (see versionLog).
	target := types.NamespacedName{Namespace: testNamespace, Name: "fleet." + siteName(n/3) + ".v1"}
	var edits atomic.Int32
	var editErr atomic.Value
	hook := func(ctx context.Context, in *Injector, key types.NamespacedName, attempt int) {
		if key != target || attempt != 1 || edits.Load() > 0 {
			return
		}
		// In the injector's worker: no t.Fatal here.
		var answer string
		err := x.retryConflict(func() error {
			var prr porchv1alpha1.PackageRevisionResources
			if err := env.k8s.Get(x.ctx, x.key(key.Name), &prr); err != nil {
				return err
			}
			prr.Spec.Resources["edited.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: edited\ndata:\n  by: someone-else\n"
			if err := env.k8s.Update(x.ctx, &prr); err != nil {
				return err
			}
			answer = prr.ResourceVersion
			return nil
		})
		if err != nil {
			editErr.Store(err)
			return
		}
		edits.Add(1)
		deadline := time.Now().Add(30 * time.Second)
		for !in.versions.shown(key, answer) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("edited %s (version %s); the injector's watch showed it: %v", key.Name, answer, in.versions.shown(key, answer))
	}
	cfg := Config{Server: srv.Addr, GCInterval: 500 * time.Millisecond, ResyncInterval: time.Hour, beforeWrite: hook}
	stop := startInjector(t, env, cfg, "injector-1.log")
	restarted := make(chan struct{})
	var restartOnce sync.Once
	names, _ := f.create("fleet", 0, n, func(created int) {
		if created < n/2 {
			return
		}
		restartOnce.Do(func() {
			// Mid-burst: the first injector stops (in-flight work
			// cancelled), a second one starts from nothing.
			go func() {
				defer close(restarted)
				stop()
				startInjector(t, env, cfg, "injector-2.log")
				t.Logf("injector restarted after %d of %d creates", created, n)
			}()
		})
	})
	<-restarted
	conds.waitTrue(t, names, 10*time.Minute)
	t.Logf("%d Drafts allocated after %s", n, time.Since(start).Round(100*time.Millisecond))

	// Distinct addresses, as ipam-server holds them, one owner per package,
	// nothing allocated twice.
	held := ownerAllocations(t, x.ipam, "fleet/")
	if len(held) != n {
		t.Errorf("ipam-server holds allocations of %d owners, want one per package: %d", len(held), n)
	}
	byAddr := map[string]string{}
	for i, name := range names {
		// A condition turns True in the PackageRevision (Porch's cache of
		// its revisions) a moment before a read of its resources (loaded
		// from the draft branch) shows the write.
		owner := Owner("fleet", siteName(i))
		var res map[string]string
		var got map[string]string
		eventually(t, time.Minute, name+"'s resources as ipam-server holds them", func() error {
			res = x.resources(name)
			if got = allocations(t, res); len(got) != allocs || fmt.Sprint(got) != fmt.Sprint(held[owner]) {
				return fmt.Errorf("%s holds %v; ipam-server holds %v for %s", name, got, held[owner], owner)
			}
			return nil
		})
		for a, p := range got {
			if p == "" {
				t.Errorf("%s: %s has no address", name, a)
			} else if other, dup := byAddr[p]; dup {
				t.Errorf("%s is both %s and %s/%s", p, other, name, a)
			}
			byAddr[p] = name + "/" + a
		}
		if name == target.Name && !strings.Contains(res["edited.yaml"], "someone-else") {
			t.Errorf("the edit made while the injector worked on %s was lost: files %v", name, slices.Sorted(maps.Keys(res)))
		}
	}
	if err, _ := editErr.Load().(error); err != nil {
		t.Errorf("the concurrent edit of %s failed: %v", target.Name, err)
	}
	if edits.Load() != 1 {
		t.Errorf("the concurrent edit ran %d times, want 1", edits.Load())
	}
	if len(byAddr) != n*allocs {
		t.Errorf("%d distinct addresses, want %d", len(byAddr), n*allocs)
	}

	// Deleting a quarter of the Drafts releases exactly their allocations.
	var gone []string
	for i := 0; i < n; i += 4 {
		gone = append(gone, names[i])
	}
	f.remove(gone)
	want := maps.Clone(held)
	for i := 0; i < n; i += 4 {
		delete(want, Owner("fleet", siteName(i)))
	}
	eventually(t, 2*time.Minute, "the deleted Drafts' allocations released", func() error {
		got := ownerAllocations(t, x.ipam, "fleet/")
		if len(got) != len(want) {
			return fmt.Errorf("ipam-server holds %d owners, want %d", len(got), len(want))
		}
		return nil
	})
	if got := ownerAllocations(t, x.ipam, "fleet/"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after deleting %d Drafts ipam-server holds\n%v\nwant\n%v", len(gone), got, want)
	}
	t.Logf("deleted %d Drafts; ipam-server released their %d allocations and kept the other %d packages' (after %s)",
		len(gone), len(gone)*allocs, len(want), time.Since(start).Round(100*time.Millisecond))
}
