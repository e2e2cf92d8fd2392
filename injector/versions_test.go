package injector

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	porchv1alpha1 "github.com/nephio-project/porch/api/porch/v1alpha1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The version log judges versions by the order the watch showed them in:
// a version followed by a new one of someone else is replaced, one shown
// again after a newer one (Porch's cache put back) does not replace the
// newer one, and one replaced only by the injector's own writes is not
// replaced. A write's answer, when the watch shows it, names the versions
// shown between the read and the write, other than those two.
func TestVersionLog(t *testing.T) {
	key := types.NamespacedName{Namespace: "default", Name: "r.p.v1"}
	type step struct {
		op   string // "watch v", "wrote read answer"
		lost string // for "watch": the versions observe returns, joined
	}
	for _, tc := range []struct {
		name       string
		steps      []step
		superseded string // versions superseded at the end
		current    string // versions not superseded at the end
	}{
		{"one version", []step{{"watch a", ""}}, "", "a"},
		{"an edit", []step{{"watch a", ""}, {"watch b", ""}}, "a", "b"},
		{"the same version again", []step{{"watch a", ""}, {"watch a", ""}}, "", "a"},
		{"cache put back", []step{{"watch a", ""}, {"watch b", ""}, {"watch a", ""}}, "a", "b"},
		{"own write, not yet watched", []step{{"watch a", ""}, {"wrote a w", ""}}, "", "a w"},
		{"own write watched", []step{{"watch a", ""}, {"wrote a w", ""}, {"watch w", ""}}, "", "a w"},
		{"own write on a put-back version", []step{{"watch a", ""}, {"watch e", ""}, {"watch a", ""}, {"wrote a w", ""}, {"watch w", "e"}}, "a", "e w"},
		{"own write replacing an unseen read", []step{{"wrote a w", ""}, {"watch e", ""}, {"watch w", "e"}}, "", "e w"},
		{"an edit after the own write", []step{{"watch a", ""}, {"wrote a w", ""}, {"watch w", ""}, {"watch e", ""}}, "a w", "e"},
		{"Porch's answer equals nothing watched", []step{{"watch a", ""}, {"wrote a w", ""}, {"watch x", ""}}, "a", "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l versionLog
			for _, s := range tc.steps {
				f := strings.Fields(s.op)
				switch f[0] {
				case "watch":
					if got := strings.Join(l.observe(key, f[1]), " "); got != s.lost {
						t.Errorf("%s: overwritten %q, want %q", s.op, got, s.lost)
					}
				case "wrote":
					l.wrote(key, f[1], f[2])
				}
			}
			for _, v := range strings.Fields(tc.superseded) {
				if !l.superseded(key, v) {
					t.Errorf("%s is not superseded", v)
				}
			}
			for _, v := range strings.Fields(tc.current) {
				if l.superseded(key, v) {
					t.Errorf("%s is superseded", v)
				}
			}
			l.forget(key)
			if l.superseded(key, "a") {
				t.Error("a forgotten Draft keeps its versions")
			}
		})
	}
}

// The log keeps at most keptVersions versions of a Draft.
func TestVersionLogIsBounded(t *testing.T) {
	key := types.NamespacedName{Namespace: "default", Name: "r.p.v1"}
	var l versionLog
	for i := range 10 * keptVersions {
		l.observe(key, fmt.Sprint(i))
		l.wrote(key, fmt.Sprint(i), fmt.Sprint(i+1))
	}
	if d := l.drafts[key]; len(d.seen) != keptVersions || len(d.own) != keptVersions {
		t.Errorf("%d versions seen and %d own kept, want %d", len(d.seen), len(d.own), keptVersions)
	}
}

// A Draft that Porch serves at a version the watch showed replaced (its
// cache went back) is neither processed nor written: it is read again
// soon. Porch's cache goes back only when a repository refresh overlaps a
// write, at random, so the watch's versions are given here.
func TestReconcileRefusesAReplacedVersion(t *testing.T) {
	scheme := porchScheme(t)
	ctx := context.Background()
	key := testDraftKey
	porch, _ := countingPorch(scheme, testDraft())
	var writes atomic.Int32
	porch = interceptor.NewClient(porch, interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
		writes.Add(1)
		return c.Update(ctx, obj, opts...)
	}})
	var prr porchv1alpha1.PackageRevisionResources
	if err := porch.Get(ctx, key, &prr); err != nil {
		t.Fatal(err)
	}
	in := &Injector{Client: porch, Reader: porch, Revisions: porch}
	served := testDraft()
	served.SetResourceVersion(prr.ResourceVersion)
	newer := testDraft()
	newer.SetResourceVersion(prr.ResourceVersion + "-edited")
	in.watched(served)
	in.watched(newer)

	res, err := in.Reconcile(ctx, reconcile.Request{NamespacedName: key})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != staleAnswerRetry {
		t.Errorf("requeued after %s, want %s", res.RequeueAfter, staleAnswerRetry)
	}
	if in.upToDate(key, prr.ResourceVersion) || writes.Load() != 0 {
		t.Errorf("the replaced version was processed (%d writes)", writes.Load())
	}
}

// When the watch shows the answer to a write of the injector after a
// version it never read, a Warning Event on the revision names that
// version.
func TestOverwrittenEditIsReported(t *testing.T) {
	rec := events.NewFakeRecorder(4)
	in := &Injector{Recorder: rec}
	at := func(v string) {
		pr := testDraft()
		pr.SetResourceVersion(v)
		in.watched(pr)
	}
	at("read")
	at("edit")
	in.versions.wrote(testDraftKey, "read", "answer")
	at("answer")
	select {
	case ev := <-rec.Events:
		if !strings.Contains(ev, EventOverwritten) || !strings.Contains(ev, "edit") {
			t.Errorf("event %q, want a Warning %s naming version edit", ev, EventOverwritten)
		}
	default:
		t.Error("no Event")
	}
}

// A replaced version that Porch keeps serving is read again later each
// time, up to staleRetryLimit apart, and taken as current after
// staleReadLimit.
func TestRefuseBacksOffThenGivesIn(t *testing.T) {
	key := types.NamespacedName{Namespace: "default", Name: "r.p.v1"}
	var l versionLog
	l.observe(key, "a")
	l.observe(key, "b")
	if _, ok := l.refuse(key, "b", time.Now()); ok {
		t.Fatal("the current version is refused")
	}
	start := time.Now()
	var delays []time.Duration
	for i := range 7 {
		d, ok := l.refuse(key, "a", start.Add(time.Duration(i)*time.Second))
		if !ok {
			t.Fatalf("refusal %d: the replaced version is accepted", i+1)
		}
		delays = append(delays, d)
	}
	want := []time.Duration{3 * time.Second, 6 * time.Second, 12 * time.Second, 24 * time.Second, 48 * time.Second, time.Minute, time.Minute}
	if fmt.Sprint(delays) != fmt.Sprint(want) {
		t.Errorf("delays %v, want %v", delays, want)
	}
	if _, ok := l.refuse(key, "a", start.Add(staleReadLimit)); ok {
		t.Errorf("the replaced version is still refused after %s", staleReadLimit)
	}
}
