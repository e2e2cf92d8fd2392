package injector

import (
	porchv1alpha1 "github.com/nephio-project/porch/api/porch/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// revisionEvents passes the events of Draft revisions that may need work:
// a Draft that appears, and a change of a Draft's resourceVersion (Porch
// gives every write of its resources a new one) or lifecycle. Porch sends
// every revision again, unchanged, whenever a watch is re-established;
// those pass no update. Deletions need no reconcile: they make a garbage
// collection due, which releases what a deleted package held.
type revisionEvents struct {
	predicate.Funcs
	in *Injector
}

func isDraft(o any) bool {
	pr, ok := o.(*unstructured.Unstructured)
	return ok && lifecycle(pr) == string(porchv1alpha1.PackageRevisionLifecycleDraft)
}

// Create passes Drafts.
func (r revisionEvents) Create(e event.CreateEvent) bool { return r.pass(isDraft(e.Object)) }

// Update passes a Draft whose resourceVersion or lifecycle changed.
func (r revisionEvents) Update(e event.UpdateEvent) bool {
	if !isDraft(e.ObjectNew) {
		return false
	}
	old, ok := e.ObjectOld.(*unstructured.Unstructured)
	return r.pass(!ok || old.GetResourceVersion() != e.ObjectNew.GetResourceVersion() || !isDraft(old))
}

// pass tells the injector of activity when ok.
func (r revisionEvents) pass(ok bool) bool {
	if ok && r.in != nil {
		r.in.active()
	}
	return ok
}

// Delete passes nothing and makes a garbage collection due.
func (r revisionEvents) Delete(e event.DeleteEvent) bool {
	if r.in != nil && e.Object != nil {
		r.in.deleted(types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: e.Object.GetName()})
	}
	return false
}

// Generic passes Drafts (the resync sends them).
func (revisionEvents) Generic(e event.GenericEvent) bool { return isDraft(e.Object) }
