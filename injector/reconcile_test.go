package injector

import (
	"context"
	"sync/atomic"
	"testing"

	porchv1alpha1 "github.com/nephio-project/porch/api/porch/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// testDraftKey names the Draft of the reconcile tests.
var testDraftKey = types.NamespacedName{Namespace: "default", Name: "repo.pkg.v1"}

// testDraft is the Draft PackageRevision testDraftKey names.
func testDraft() *unstructured.Unstructured {
	pr := newRevision()
	pr.SetNamespace(testDraftKey.Namespace)
	pr.SetName(testDraftKey.Name)
	_ = unstructured.SetNestedField(pr.Object, string(porchv1alpha1.PackageRevisionLifecycleDraft), "spec", "lifecycle")
	_ = unstructured.SetNestedField(pr.Object, "repo", "spec", "repository")
	_ = unstructured.SetNestedField(pr.Object, "pkg", "spec", "packageName")
	return pr
}

// porchScheme is a scheme with Porch's types.
func porchScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := porchv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// countingPorch is a client standing for Porch: it holds pr and the
// Draft's resources (no IPAM objects) and counts the reads of resources.
func countingPorch(scheme *runtime.Scheme, pr *unstructured.Unstructured) (client.WithWatch, *atomic.Int32) {
	var reads atomic.Int32
	porch := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pr,
		&porchv1alpha1.PackageRevisionResources{ObjectMeta: metav1.ObjectMeta{Namespace: testDraftKey.Namespace, Name: testDraftKey.Name},
			Spec: porchv1alpha1.PackageRevisionResourcesSpec{Resources: map[string]string{"README.md": "no IPAM objects\n"}}}).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*porchv1alpha1.PackageRevisionResources); ok {
				reads.Add(1)
			}
			return c.Get(ctx, k, obj, opts...)
		}}).Build()
	return porch, &reads
}

// TestResyncReadsPastAStaleCache: the watch's cache that missed a Draft's
// update (Porch's watch drops events under load) still shows the version
// the injector processed. A Draft the resync's list of Porch found at
// another version is read from Porch, not judged by the cache, and
// processed; an event alone is judged by the cache and costs nothing.
// The cache behind Porch is a fault the real Porch makes only at random,
// so it is injected here: two clients, one as the cache, one as Porch.
func TestResyncReadsPastAStaleCache(t *testing.T) {
	scheme := porchScheme(t)
	key, draft := testDraftKey, testDraft
	for _, tc := range []struct {
		name     string
		listed   bool
		wantRead bool
	}{
		{"an event, judged by the cache", false, false},
		{"found stale by the resync's list", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cache := fake.NewClientBuilder().WithScheme(scheme).WithObjects(draft()).Build()
			porch, reads := countingPorch(scheme, draft())
			// Porch moved on: its revision has a version the cache lacks.
			moved := draft()
			if err := porch.Get(ctx, key, moved); err != nil {
				t.Fatal(err)
			}
			moved.SetLabels(map[string]string{"edited": "yes"})
			if err := porch.Update(ctx, moved); err != nil {
				t.Fatal(err)
			}
			cached := newRevision()
			if err := cache.Get(ctx, key, cached); err != nil {
				t.Fatal(err)
			}
			if cached.GetResourceVersion() == moved.GetResourceVersion() {
				t.Fatalf("the cache and Porch agree on version %s", moved.GetResourceVersion())
			}
			in := &Injector{Client: porch, Reader: porch, Revisions: cache}
			in.processed(key, cached.GetResourceVersion(), true)
			if tc.listed {
				in.sawListed(key)
			}
			if _, err := in.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
				t.Fatal(err)
			}
			if got := reads.Load() > 0; got != tc.wantRead {
				t.Errorf("resources read: %v, want %v", got, tc.wantRead)
			}
			if in.takeListed(key) {
				t.Error("the resync's mark outlived the reconcile")
			}
		})
	}
}

// TestListedDraftsAreVerifiedOnce: a Draft processed at a version is
// checked once by the next list that shows that version. A Draft with
// IPAM objects whose listed revision shows the condition True costs no
// read; one whose listed revision lacks it, and one found without IPAM
// objects, are read from Porch once more, and after that read never again
// at that version. Porch serving a revision without the condition its
// resources were written with happens only at random under load, so the
// list's revision is made here.
func TestListedDraftsAreVerifiedOnce(t *testing.T) {
	scheme := porchScheme(t)
	key := testDraftKey
	draft := func(condition bool) *unstructured.Unstructured {
		pr := testDraft()
		if condition {
			_ = unstructured.SetNestedSlice(pr.Object, []any{map[string]any{"type": "other", "status": "False"},
				map[string]any{"type": ConditionType, "status": "True"}}, "status", "conditions")
		}
		return pr
	}
	for _, tc := range []struct {
		name      string
		ipam      bool // what the processing found
		condition bool // what the list shows
		wantReads int32
	}{
		{"IPAM objects, the list shows the condition", true, true, 0},
		{"IPAM objects, the list lacks the condition", true, false, 1},
		{"no IPAM objects found", false, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			porch, reads := countingPorch(scheme, draft(tc.condition))
			listed := newRevision()
			if err := porch.Get(ctx, key, listed); err != nil {
				t.Fatal(err)
			}
			in := &Injector{Client: porch, Reader: porch, Revisions: porch}
			in.processed(key, listed.GetResourceVersion(), tc.ipam)
			// Three lists in a row, each followed by the reconciles it asks for.
			for range 3 {
				if in.toVerify(key, listed) {
					in.sawListed(key)
				}
				if _, err := in.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
					t.Fatal(err)
				}
			}
			if got := reads.Load(); got != tc.wantReads {
				t.Errorf("resources read %d times, want %d", got, tc.wantReads)
			}
			if !in.upToDate(key, listed.GetResourceVersion()) {
				t.Error("the Draft is not recorded as processed at its version")
			}
		})
	}
}
