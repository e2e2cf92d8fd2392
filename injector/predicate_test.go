package injector

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func revisionAt(lifecycle, version string) *unstructured.Unstructured {
	u := newRevision()
	u.SetNamespace("default")
	u.SetName("r.p.v1")
	u.SetResourceVersion(version)
	_ = unstructured.SetNestedField(u.Object, lifecycle, "spec", "lifecycle")
	return u
}

// Updates pass when a Draft's version or lifecycle changed, not when Porch
// sends the same revision again; a deletion passes nothing and makes a
// collection due.
func TestRevisionEvents(t *testing.T) {
	in := &Injector{activity: make(chan struct{}, 1)}
	p := revisionEvents{in: in}
	for _, tc := range []struct {
		name     string
		old, new *unstructured.Unstructured
		want     bool
	}{
		{"same version", revisionAt("Draft", "a"), revisionAt("Draft", "a"), false},
		{"new version", revisionAt("Draft", "a"), revisionAt("Draft", "b"), true},
		{"back to Draft", revisionAt("Proposed", "a"), revisionAt("Draft", "a"), true},
		{"proposed", revisionAt("Draft", "a"), revisionAt("Proposed", "b"), false},
	} {
		if got := p.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: Update = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !p.Create(event.CreateEvent{Object: revisionAt("Draft", "a")}) || p.Create(event.CreateEvent{Object: revisionAt("Published", "a")}) {
		t.Error("Create passes Drafts only")
	}
	select {
	case <-in.activity:
	default:
		t.Error("a passed event signals no activity")
	}
	in.processed(keyOf(revisionAt("Draft", "a")), "a", true)
	if p.Delete(event.DeleteEvent{Object: revisionAt("Draft", "a")}) || !in.gcDue.Load() {
		t.Error("Delete passes nothing and makes a collection due")
	}
	if in.upToDate(keyOf(revisionAt("Draft", "a")), "a") {
		t.Error("a deleted revision is forgotten")
	}
}

// keyedMutex holds one key at a time and lets other keys through.
func TestKeyedMutex(t *testing.T) {
	var k keyedMutex
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			unlock := k.lock("a")
			if n := inside.Add(1); n > most.Load() {
				most.Store(n)
			}
			time.Sleep(time.Millisecond)
			inside.Add(-1)
			unlock()
		})
	}
	other := k.lock("b") // never waits for "a"
	other()
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("%d holders of one key at once", most.Load())
	}
	if len(k.locks) != 0 {
		t.Errorf("%d locks left", len(k.locks))
	}
}

func keyOf(u *unstructured.Unstructured) types.NamespacedName {
	return types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}
}
