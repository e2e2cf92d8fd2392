package controllers

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
)

// Finalizer holds a resource until its prefix, allocation or network
// instance is released in ipam-server.
const Finalizer = "ipam.nephio.org/finalizer"

// DefaultOwner is the owner under which the controllers key their objects
// in ipam-server.
const DefaultOwner = "k8s"

// DefaultResync is how often every resource is reconciled again.
const DefaultResync = 5 * time.Minute

// reconciler is what every kind's adapter shares: the API client, the
// IPAM client, the owner they key objects by and the resync period.
type reconciler struct {
	client   client.Client
	ipam     ipamv1.IPAMClient
	owner    string
	resync   time.Duration
	recorder recorder.EventRecorder // may be nil
	now      func() time.Time
}

// key is the service key of a resource: (owner, namespace, name).
func (r *reconciler) key(obj client.Object) *ipamv1.Key {
	return translate.Key(r.owner, obj)
}

// ensureFinalizerNamed adds the finalizer name (the fronts use their
// ecosystem's) unless obj has it: before anything is created in the
// service, so nothing can be orphaned.
func (r *reconciler) ensureFinalizerNamed(ctx context.Context, obj client.Object, name string) error {
	if controllerutil.ContainsFinalizer(obj, name) {
		return nil
	}
	orig := obj.DeepCopyObject().(client.Object)
	controllerutil.AddFinalizer(obj, name)
	if err := r.client.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("adding finalizer: %w", err)
	}
	return nil
}

// finalize releases a deleted resource in the service with del and then
// lets it go. A refusal (live children) is written into the Synced
// condition and retried with backoff; the finalizer holds meanwhile. A
// resource clusterctl move is deleting after copying it is let go without
// del: the management cluster it moved to holds it in ipam-server now
// (the same server, or a fresh one that adopts its addresses).
func (r *reconciler) finalize(ctx context.Context, obj client.Object, conds *[]metav1.Condition, action string, del func() error) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return ctrl.Result{}, nil
	}
	before := append([]metav1.Condition(nil), *conds...)
	orig := obj.DeepCopyObject().(client.Object)
	if movingAway(obj) {
		del = func() error { return nil }
		action += " (moved by clusterctl: nothing released)"
	}
	err := del()
	if err == nil || isNotFound(err) {
		controllerutil.RemoveFinalizer(obj, Finalizer)
		if err := r.client.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		log.FromContext(ctx).Info("released", "action", action)
		return ctrl.Result{}, nil
	}
	o := classify(err, "")
	if o.synced {
		setDeleteRefused(conds, o.message, obj.GetGeneration())
	} else {
		setConditions(conds, o, obj.GetGeneration())
	}
	if !equality.Semantic.DeepEqual(before, *conds) {
		if perr := r.client.Status().Patch(ctx, obj, client.MergeFrom(orig)); perr != nil {
			return ctrl.Result{}, client.IgnoreNotFound(perr)
		}
		r.event(obj, corev1.EventTypeWarning, "DeleteRefused", action, o.message)
		if o.synced {
			log.FromContext(ctx).Info("deletion refused", "action", action, "reason", o.message)
		}
	}
	if !o.synced {
		return ctrl.Result{}, fmt.Errorf("%s: %w", action, err)
	}
	return ctrl.Result{RequeueAfter: backoff(*conds, ipamv1alpha1.ConditionTypeSynced, r.now(), r.resync)}, nil
}

// deleteCall is one of ipam-server's deletions by key.
type deleteCall func(context.Context, *ipamv1.DeleteRequest, ...grpc.CallOption) (*ipamv1.DeleteResponse, error)

// releaseKeyed releases a deleted obj in the service by its key with
// call, through finalize.
func (r *reconciler) releaseKeyed(ctx context.Context, obj client.Object, conds *[]metav1.Condition, action string, call deleteCall) (ctrl.Result, error) {
	return r.finalize(ctx, obj, conds, action, func() error {
		_, err := call(ctx, &ipamv1.DeleteRequest{Key: r.key(obj)})
		return err
	})
}

// event records an event about obj when a recorder is configured.
func (r *reconciler) event(obj client.Object, eventType, reason, action, note string) {
	if r.recorder == nil {
		return
	}
	r.recorder.Eventf(obj, nil, eventType, reason, action, "%s", note)
}
