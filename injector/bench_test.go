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
//     time for the injector. Target: at least 0.8. It is one Draft's
//     latency: Porch answers creates in bunches, so the last create may
//     share Porch with the writes of one or two others
//     (ceiling-last-creates, injector-last-creates count them), and a
//     Draft Porch drops from its cache moves the figure by minutes.
//   - ratio-p50 (and ratio-p90): the same comparison over every Draft of
//     the fleet, the 50th (90th) percentile of the time from each create's
//     answer to the Draft's condition seen True, writer over injector.
//     Target: at least 0.8.
//   - idle-reads/100drafts/min: the injector's reads of Porch (counted at
//     its side) per minute per 100 Drafts over W9_IDLE (2m) in which
//     nothing changes, from 35 s after the last write (past the list the
//     injector makes after activity). Target: at most 1.
//   - reaction-p99-s: the 99th percentile of the time from an edit of one
//     Draft (a new IPAllocation; W9_EDITS (20) edits, one after the other)
//     to its allocation written back, while the other Drafts sit idle.
//     Target: at most 5 s.
//
// For each side it prints where a Draft's time went (create to read,
// read, read to write, write; timed at that side) and the requests on
// the Draft that turned True last. PORCH_TEST_LOGS=dir keeps Porch's and
// the injector's logs and each side's timed requests
// (requests-ceiling.tsv, requests-injector.tsv).
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
	report(b, "W9: %d Drafts × %d IPAllocations over %d networks, %d created at a time, %d workers; %d CPUs (%s/%s, %s)",
		n, allocs, networks, creators, workers, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, host)

	start := time.Now()
	env := startPorch(b)
	srv := servertest.Start(b, server.Config{}, false)
	x := &e2e{t: b, env: env, ipam: srv.Client(b), ctx: context.Background()}
	f := &fleet{x: x, n: n, allocs: allocs, networks: networks, creators: creators}
	f.setUp()
	conds := watchConditions(b, env.cfg)

	// Both repositories from the start: Porch syncs each every 10 s, and
	// both sides are measured with the same ones registered.
	env.addRepo(b, "fleet-ceiling")
	env.addRepo(b, "fleet")

	// Porch's ceiling: the do-nothing writer on a repository of its own.
	writerLog := &requestLog{}
	stopWriter := startWriter(b, writerLog.wrap(env.cfg), "fleet-ceiling", workers)
	ceiling := f.burst("fleet-ceiling", conds)
	stopWriter()
	ceilingPhase := f.measure(b, "ceiling", writerLog, conds, ceiling)
	// Out of the injector's way: it serves the whole namespace.
	f.remove(ceiling.names)

	// The injector on the fleet repository.
	injectorLog := &requestLog{}
	startInjector(b, env, Config{Server: srv.Addr, Workers: workers, RESTConfig: injectorLog.wrap(env.cfg)}, "injector-w9.log")
	allocated := f.burst("fleet", conds)
	injectorPhase := f.measure(b, "injector", injectorLog, conds, allocated)
	names := allocated.names
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
	report(b, "W9 idle: %.0f Porch reads by the injector in %s: %.2f per minute, %.3f per 100 Drafts per minute", idleReads, idle, perMin, perMin*100/float64(n))

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
	p50, p99 := percentile(reactions, 50), percentile(reactions, 99)
	report(b, "W9 reaction over %d edits: p50 %s, p99 %s", edits, p50, p99)

	var counts []string
	for k, v := range requestCounts(b) {
		if v > 0 {
			counts = append(counts, fmt.Sprintf("%s %s/%s %.0f", k[2], k[0], k[1], v))
		}
	}
	slices.Sort(counts)
	report(b, "W9 injector requests (whole run): %s", strings.Join(counts, "; "))
	report(b, "W9 took %s", time.Since(start).Round(time.Second))

	b.ReportMetric(ceilingPhase.afterLast.Seconds()/injectorPhase.afterLast.Seconds(), "ratio")
	b.ReportMetric(perMin*100/float64(n), "idle-reads/100drafts/min")
	b.ReportMetric(p99.Seconds(), "reaction-p99-s")
	b.ReportMetric(injectorPhase.afterLast.Seconds(), "allocated-s")
	b.ReportMetric(ceilingPhase.afterLast.Seconds(), "ceiling-s")
	b.ReportMetric(injectorPhase.total.Seconds(), "allocated-total-s")
	b.ReportMetric(ceilingPhase.total.Seconds(), "ceiling-total-s")
	b.ReportMetric(p50.Seconds(), "reaction-p50-s")
	b.ReportMetric(percentile(ceilingPhase.perDraft, 50).Seconds()/percentile(injectorPhase.perDraft, 50).Seconds(), "ratio-p50")
	b.ReportMetric(percentile(ceilingPhase.perDraft, 90).Seconds()/percentile(injectorPhase.perDraft, 90).Seconds(), "ratio-p90")
	b.ReportMetric(float64(ceilingPhase.cluster), "ceiling-last-creates")
	b.ReportMetric(float64(injectorPhase.cluster), "injector-last-creates")
	b.ReportMetric(float64(n), "drafts")
}

// phase is what W9 measured of one side (the writer or the injector).
type phase struct {
	// afterLast and total: from the last create, and from the first,
	// until every Draft's condition was seen True.
	afterLast, total time.Duration
	// perDraft: each Draft's time from its create's answer to its
	// condition seen True, sorted.
	perDraft []time.Duration
	// cluster: how many creates were answered within clusterGap of the
	// last one (the last included).
	cluster int
}

// clusterGap: creates answered this close to the last one share Porch
// with its write (Porch answers creates in bunches).
const clusterGap = 250 * time.Millisecond

// burstResult is one burst of creates and its wait.
type burstResult struct {
	names                   []string
	firstCreate, lastCreate time.Time // the first create sent, the last answered
	lastTrue                string    // the Draft whose condition turned True last
	allTrue                 time.Time // when it did
}

// burst creates the fleet's Drafts in repo and waits until conds shows
// every one's condition True.
func (f *fleet) burst(repo string, conds *conditionWatch) burstResult {
	f.x.t.Helper()
	r := burstResult{firstCreate: time.Now()}
	r.names, r.lastCreate = f.create(repo, 0, f.n, nil)
	r.lastTrue, r.allTrue = conds.waitTrue(f.x.t, r.names, 20*time.Minute)
	return r
}

// measure reports what one side of W9 took for burst br: from the last
// create and from the first until every condition was True, its reads
// and writes of the Drafts' resources, each Draft's time from create to
// True and where it went, how many creates were answered with the last
// one, and the requests on the Draft that turned True last.
func (f *fleet) measure(b *testing.B, side string, reqs *requestLog, conds *conditionWatch, br burstResult) phase {
	b.Helper()
	ph := phase{afterLast: br.allTrue.Sub(br.lastCreate), total: br.allTrue.Sub(br.firstCreate)}
	for _, n := range br.names {
		if br.lastCreate.Sub(f.createdAt[n]) <= clusterGap {
			ph.cluster++
		}
		if at, ok := conds.trueSince(n); ok {
			ph.perDraft = append(ph.perDraft, at.Sub(f.createdAt[n]))
		}
	}
	slices.Sort(ph.perDraft)
	report(b, "W9 %s: %d Drafts True %s after the last create (%s after the first)", side, len(br.names),
		ph.afterLast.Round(10*time.Millisecond), ph.total.Round(10*time.Millisecond))
	const prr = "packagerevisionresources"
	report(b, "W9 %s requests: %s; %s", side, reqs.summary("get", prr, br.firstCreate), reqs.summary("update", prr, br.firstCreate))
	report(b, "W9 %s per Draft, create to True: p50 %s, p90 %s, max %s; %d create(s) answered within %s of the last",
		side, percentile(ph.perDraft, 50), percentile(ph.perDraft, 90), percentile(ph.perDraft, 100), ph.cluster, clusterGap)
	toRead, read, toWrite, write := reqs.stages(br.names, f.createdAt)
	report(b, "W9 %s per Draft, p50 (p90): create to read %s (%s), read %s (%s), read to write %s (%s), write %s (%s)", side,
		percentile(toRead, 50), percentile(toRead, 90), percentile(read, 50), percentile(read, 90),
		percentile(toWrite, 50), percentile(toWrite, 90), percentile(write, 50), percentile(write, 90))
	must(b, reqs.dump(filepath.Join(f.x.env.logs, "requests-"+side+".tsv")))
	created := f.createdAt[br.lastTrue]
	report(b, "W9 %s last True %s, created %s before the last create; after its create: %s; True +%s", side, br.lastTrue,
		br.lastCreate.Sub(created).Round(time.Millisecond), reqs.story(br.lastTrue, created), br.allTrue.Sub(created).Round(time.Millisecond))
	return ph
}

// percentile is the p-th percentile of sorted ds (p 100: the largest),
// rounded to the millisecond; 0 when ds is empty.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, (len(ds)*p+99)/100-1)].Round(time.Millisecond)
}

// report prints a line of W9's report to standard output: go test keeps
// only the first 10 lines a benchmark logs unless run with -v, and make
// bench does not pass -v.
func report(b *testing.B, format string, args ...any) {
	b.Helper()
	fmt.Printf("    "+format+"\n", args...)
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
