package injector

import (
	porchv1alpha1 "github.com/nephio-project/porch/api/porch/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// draftOrDeleted passes events of Draft revisions only; deletions need no
// reconcile (garbage collection releases what a deleted package held).
type draftOrDeleted struct{ predicate.Funcs }

func isDraft(o any) bool {
	pr, ok := o.(*unstructured.Unstructured)
	return ok && lifecycle(pr) == string(porchv1alpha1.PackageRevisionLifecycleDraft)
}

func (draftOrDeleted) Create(e event.CreateEvent) bool   { return isDraft(e.Object) }
func (draftOrDeleted) Update(e event.UpdateEvent) bool   { return isDraft(e.ObjectNew) }
func (draftOrDeleted) Delete(event.DeleteEvent) bool     { return false }
func (draftOrDeleted) Generic(e event.GenericEvent) bool { return isDraft(e.Object) }
