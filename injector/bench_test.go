package injector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	porchv1alpha1 "github.com/nephio-project/porch/api/porch/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// BenchmarkW9Fleet is workload W9, Porch at fleet scale: the real Porch of
// the e2e test, W9_DRAFTS (200) Draft package revisions created at once,
// W9_CREATORS (4) at a time, each a clone of a published blueprint with
// W9_ALLOCS (10) IPAllocations over W9_NETWORKS (4) networks, and one
// injector with W9_WORKERS workers (its default). It reports:
//
//   - ratio: the time from the last create until every revision's
//     ConditionType is True, for a do-nothing writer (it reads each
//     revision and writes one Kptfile condition: Porch's own ceiling,
//     with as many workers, in a repository of its own) over the same
//     time for the injector. Target: at least 0.8.
//   - idle-reads/100drafts/min: the injector's reads of Porch (counted at
//     its side) per minute per 100 Drafts over W9_IDLE (2m) in which
//     nothing changes, from 35 s after the last write (past the list the
//     injector makes after activity). Target: at most 1.
//   - reaction-p99-s: the 99th percentile of the time from an edit of one
//     Draft (a new IPAllocation; W9_EDITS (20) edits, one after the other)
//     to its allocation written back, while the other Drafts sit idle.
//     Target: at most 5 s.
//
// It is skipped when Porch is not built (make porch-env).
func BenchmarkW9Fleet(b *testing.B) {
	root := repoRoot(b)
	for _, p := range []string{"bin/porch/porch", "bin/porch/function-runner", "bin/k8s/kube-apiserver", "bin/k8s/etcd"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			reason := "W9 runs the real Porch and " + p + " is missing: run make porch-env to build it"
			// go test prints a skipped benchmark's reason only with -v;
			// make bench's table reads this line.
			fmt.Printf("--- SKIP: %s\n    %s\n", b.Name(), reason)
			b.Skip(reason)
		}
	}
	n := envInt(b, "W9_DRAFTS", 200)
	allocs := envInt(b, "W9_ALLOCS", 10)
	networks := envInt(b, "W9_NETWORKS", 4)
	creators := envInt(b, "W9_CREATORS", 4)
	workers := envInt(b, "W9_WORKERS", DefaultWorkers)
	idle := envDuration(b, "W9_IDLE", 2*time.Minute)
	edits := envInt(b, "W9_EDITS", 20)
	if networks > 200 || n*allocs > networks*60000 {
		b.Fatalf("W9_DRAFTS×W9_ALLOCS = %d does not fit in %d networks of a /16 each", n*allocs, networks)
	}
	host, _ := os.Hostname()
	b.Logf("W9: %d Drafts × %d IPAllocations over %d networks, %d created at a time, %d workers; %d CPUs (%s/%s, %s)",
		n, allocs, networks, creators, workers, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, host)

	start := time.Now()
	env := startPorch(b)
	srv := servertest.Start(b, server.Config{}, false)
	x := &e2e{t: b, env: env, ipam: srv.Client(b), ctx: context.Background()}
	f := &fleet{x: x, n: n, allocs: allocs, networks: networks, creators: creators}
	f.setUp()
	conds := watchConditions(b, env.cfg)

	// Porch's ceiling: the do-nothing writer on a repository of its own.
	env.addRepo(b, "fleet-ceiling")
	stopWriter := startWriter(b, env.cfg, "fleet-ceiling", workers)
	names, firstCreate, lastCreate := f.timedCreate("fleet-ceiling")
	allTrue := conds.waitTrue(b, names, 20*time.Minute)
	ceiling, ceilingTotal := allTrue.Sub(lastCreate), allTrue.Sub(firstCreate)
	stopWriter()
	b.Logf("W9 ceiling: %d Drafts written %s after the last create (%s after the first)", n, ceiling.Round(10*time.Millisecond), ceilingTotal.Round(10*time.Millisecond))
	// Out of the injector's way: it serves the whole namespace.
	f.remove(names)

	// The injector on the fleet repository.
	env.addRepo(b, "fleet")
	startInjector(b, env, Config{Server: srv.Addr, Workers: workers}, "injector-w9.log")
	names, firstCreate, lastCreate = f.timedCreate("fleet")
	allTrue = conds.waitTrue(b, names, 20*time.Minute)
	allocated, allocatedTotal := allTrue.Sub(lastCreate), allTrue.Sub(firstCreate)
	b.Logf("W9 injector: %d Drafts allocated %s after the last create (%s after the first)", n, allocated.Round(10*time.Millisecond), allocatedTotal.Round(10*time.Millisecond))
	held := ownerAllocations(b, x.ipam, "fleet/")
	distinct := map[string]bool{}
	for _, as := range held {
		for _, p := range as {
			distinct[p] = true
		}
	}
	if len(held) != n || len(distinct) != n*allocs {
		b.Fatalf("ipam-server holds %d distinct addresses for %d owners, want %d for %d", len(distinct), len(held), n*allocs, n)
	}

	// Idle: nothing changes.
	// Past the last writes' own events and the list that follows a burst.
	time.Sleep(activityResync + 5*time.Second)
	reads0 := porchReads(b)
	time.Sleep(idle)
	idleReads := porchReads(b) - reads0
	perMin := idleReads / idle.Minutes()
	b.Logf("W9 idle: %.0f Porch reads by the injector in %s: %.2f per minute, %.3f per 100 Drafts per minute", idleReads, idle, perMin, perMin*100/float64(n))

	// Reaction: one Draft edited at a time.
	var reactions []time.Duration
	for i := range edits {
		name := names[(i*7919)%len(names)]
		alloc := fmt.Sprintf("extra-%02d", i)
		x.edit(name, func(r map[string]string) { r["allocs.yaml"] += "---\n" + fleetAlloc(alloc, i%networks) })
		edited := time.Now()
		deadline := edited.Add(2 * time.Minute)
		for {
			var prr porchv1alpha1.PackageRevisionResources
			if err := x.env.k8s.Get(x.ctx, client.ObjectKey{Namespace: testNamespace, Name: name}, &prr); err == nil {
				if allocations(b, prr.Spec.Resources)[alloc] != "" {
					break
				}
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s of %s not allocated within 2m of the edit", alloc, name)
			}
			time.Sleep(20 * time.Millisecond)
		}
		reactions = append(reactions, time.Since(edited))
	}
	slices.Sort(reactions)
	p50 := reactions[len(reactions)/2]
	p99 := reactions[min(len(reactions)-1, (len(reactions)*99+99)/100-1)]
	b.Logf("W9 reaction over %d edits: p50 %s, p99 %s", edits, p50.Round(time.Millisecond), p99.Round(time.Millisecond))

	var counts []string
	for k, v := range requestCounts(b) {
		if v > 0 {
			counts = append(counts, fmt.Sprintf("%s %s/%s %.0f", k[2], k[0], k[1], v))
		}
	}
	slices.Sort(counts)
	b.Logf("W9 injector requests (whole run): %s", strings.Join(counts, "; "))
	b.Logf("W9 took %s", time.Since(start).Round(time.Second))

	b.ReportMetric(ceiling.Seconds()/allocated.Seconds(), "ratio")
	b.ReportMetric(perMin*100/float64(n), "idle-reads/100drafts/min")
	b.ReportMetric(p99.Seconds(), "reaction-p99-s")
	b.ReportMetric(allocated.Seconds(), "allocated-s")
	b.ReportMetric(ceiling.Seconds(), "ceiling-s")
	b.ReportMetric(allocatedTotal.Seconds(), "allocated-total-s")
	b.ReportMetric(ceilingTotal.Seconds(), "ceiling-total-s")
	b.ReportMetric(p50.Seconds(), "reaction-p50-s")
	b.ReportMetric(float64(n), "drafts")
}

// remove deletes the revisions names, f.creators at a time, and waits
// until Porch lists none of them.
func (f *fleet) remove(names []string) {
	x := f.x
	x.t.Helper()
	next := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range max(f.creators, 1) {
		wg.Go(func() {
			for name := range next {
				if err := client.IgnoreNotFound(x.env.k8s.Delete(x.ctx, newRevisionNamed(name))); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("delete %s: %w", name, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, name := range names {
		next <- name
	}
	close(next)
	wg.Wait()
	must(x.t, errors.Join(errs...))
	gone := map[string]bool{}
	for _, name := range names {
		gone[name] = true
	}
	eventually(x.t, 5*time.Minute, "deleted revisions gone", func() error {
		prs := newRevisionList()
		if err := x.env.k8s.List(x.ctx, prs, client.InNamespace(testNamespace)); err != nil {
			return err
		}
		left := 0
		for _, pr := range prs.Items {
			if gone[pr.GetName()] {
				left++
			}
		}
		if left > 0 {
			return fmt.Errorf("%d of %d still listed", left, len(names))
		}
		return nil
	})
}

// timedCreate creates the fleet's Drafts in repo and returns their names,
// when the first create was sent and when the last one was answered.
func (f *fleet) timedCreate(repo string) ([]string, time.Time, time.Time) {
	first := time.Now()
	names, last := f.create(repo, 0, f.n, nil)
	return names, first, last
}
