package injector

import (
	porchv1alpha1 "github.com/nephio-project/porch/api/porch/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
func (r revisionEvents) Create(e event.CreateEvent) bool {
	r.watched(nil, e.Object)
	return r.pass(isDraft(e.Object))
}

// Update passes a Draft whose resourceVersion or lifecycle changed.
func (r revisionEvents) Update(e event.UpdateEvent) bool {
	r.watched(e.ObjectOld, e.ObjectNew)
	if !isDraft(e.ObjectNew) {
		return false
	}
	old, ok := e.ObjectOld.(*unstructured.Unstructured)
	return r.pass(!ok || old.GetResourceVersion() != e.ObjectNew.GetResourceVersion() || !isDraft(old))
}

// watched tells the injector of the versions of a Draft the watch showed
// (old, when not nil, before cur).
func (r revisionEvents) watched(old, cur client.Object) {
	if r.in == nil || !isDraft(cur) {
		return
	}
	if old != nil && isDraft(old) {
		r.in.watched(old.(*unstructured.Unstructured))
	}
	r.in.watched(cur.(*unstructured.Unstructured))
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
