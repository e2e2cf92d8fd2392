package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
)

// Reconciler is the one reconcile loop of every kind the controllers
// serve, claims and pools alike: get the object, leave it alone while it
// is paused, release it when it is deleted, hold it with a finalizer,
// serve it from ipam-server, write its status when it changed (with an
// event and a log line), and say when to come back. What is particular
// to a kind is its adapter.
type Reconciler[T client.Object] struct {
	*reconciler
	// newObject makes an empty object of the kind.
	newObject func() T
	// kind is the kind's adapter.
	kind adapter[T]
}

// reconcilerOf is the Reconciler of the objects *E, adapted by kind.
func reconcilerOf[E any, T interface {
	*E
	client.Object
}](base *reconciler, kind adapter[T]) *Reconciler[T] {
	return &Reconciler[T]{reconciler: base, newObject: func() T { return T(new(E)) }, kind: kind}
}

// adapter is what is particular to a kind. Adapters may implement
// finalizerNamer, skipper, admitter and reporter too.
type adapter[T client.Object] interface {
	// conditions are obj's conditions: the Ready condition paces the
	// backoff and its changes are the events; nil for a kind without.
	conditions(obj T) *[]metav1.Condition
	// status is what serve writes of obj: the status is patched when it
	// changed.
	status(obj T) any
	// release gives a deleted obj's holdings back to ipam-server and
	// removes the finalizer.
	release(ctx context.Context, obj T) (ctrl.Result, error)
	// serve makes ipam-server hold what obj asks for and writes the
	// answer into obj's status; err is a failure to reach the API server
	// or ipam-server, returned before any status is written.
	serve(ctx context.Context, obj T) (verdict, error)
}

// finalizerNamer is an adapter whose objects are held by their
// ecosystem's finalizer rather than Finalizer, until release lets them go.
type finalizerNamer interface {
	finalizer() string
}

// skipper is an adapter whose objects are left alone at times: paused,
// or not the controllers' to serve.
type skipper[T client.Object] interface {
	skip(ctx context.Context, obj T) (bool, error)
}

// admitter is an adapter whose live objects may have to wait before they
// get the finalizer and are served.
type admitter[T client.Object] interface {
	admit(ctx context.Context, obj T) (bool, error)
}

// reporter is an adapter with events of its own after its status was
// written, instead of the change of the Ready condition.
type reporter[T client.Object] interface {
	report(orig, obj T, v verdict)
}

// verdict is how serving an object ended.
type verdict struct {
	// o is ipam-server's answer: the retry policy, and for the log
	// whether the object is served and why not.
	o outcome
	// err is the failed call when o.retry is retryError.
	err error
	// action names the call in events, logs and errors (Allocate,
	// SyncPool ...).
	action string
	// pool names what the object was served from, for the log.
	pool string
	// after, when set, is the delay before the next reconcile instead of
	// the one o.retry says.
	after time.Duration
}

// Reconcile brings one object and ipam-server in line.
func (r *Reconciler[T]) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.newObject()
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if s, ok := r.kind.(skipper[T]); ok {
		if skip, err := s.skip(ctx, obj); err != nil || skip {
			return ctrl.Result{}, err
		}
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return r.kind.release(ctx, obj)
	}
	if a, ok := r.kind.(admitter[T]); ok {
		if in, err := a.admit(ctx, obj); err != nil || !in {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	finalizer := Finalizer
	if f, ok := r.kind.(finalizerNamer); ok {
		finalizer = f.finalizer()
	}
	if err := r.ensureFinalizerNamed(ctx, obj, finalizer); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := obj.DeepCopyObject().(T)
	v, err := r.kind.serve(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !equality.Semantic.DeepEqual(r.kind.status(orig), r.kind.status(obj)) {
		if err := r.client.Status().Patch(ctx, obj, client.MergeFrom(orig)); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		r.logChange(ctx, orig, obj, v)
		if rep, ok := r.kind.(reporter[T]); ok {
			rep.report(orig, obj, v)
		} else if conds := r.kind.conditions(obj); conds != nil {
			r.readinessEvent(obj, *r.kind.conditions(orig), *conds, v)
		}
	}
	switch {
	case v.o.retry == retryError:
		return ctrl.Result{}, fmt.Errorf("%s: %w", v.action, v.err)
	case v.after > 0:
		return ctrl.Result{RequeueAfter: v.after}, nil
	case v.o.retry == retryBackoff:
		var conds []metav1.Condition
		if c := r.kind.conditions(obj); c != nil {
			conds = *c
		}
		return ctrl.Result{RequeueAfter: backoff(conds, ipamv1alpha1.ConditionTypeReady, r.now(), r.resync)}, nil
	}
	return ctrl.Result{RequeueAfter: r.resync}, nil
}

// logChange logs a status change that an operator wants to see: obj
// served, or refused and why, as its Ready condition says (or v, for a
// kind without conditions). A change that leaves the Ready condition as
// it was (a count, a utilization) logs at V(1) only, a resync that
// changes nothing not at all, and a failure to reach ipam-server is
// logged as the reconcile's error.
func (r *Reconciler[T]) logChange(ctx context.Context, orig, obj T, v verdict) {
	if !v.o.synced {
		return
	}
	logger := log.FromContext(ctx)
	ready, message := v.o.ready, v.o.message
	if conds := r.kind.conditions(obj); conds != nil {
		c := meta.FindStatusCondition(*conds, ipamv1alpha1.ConditionTypeReady)
		if c == nil {
			return
		}
		ready, message = c.Status == metav1.ConditionTrue, c.Message
		if was := meta.FindStatusCondition(*r.kind.conditions(orig), ipamv1alpha1.ConditionTypeReady); was != nil &&
			was.Status == c.Status && was.Reason == c.Reason && was.Message == c.Message {
			logger = logger.V(1)
		}
	}
	kv := []any{"action", v.action}
	if v.pool != "" {
		kv = append(kv, "pool", v.pool)
	}
	if ready {
		logger.Info("served", append(kv, "result", message)...)
	} else {
		logger.Info("refused", append(kv, "reason", message)...)
	}
}

// readinessEvent records an event when obj turned Ready, or turned not
// Ready (or Synced while not Ready) on ipam-server's refusal.
func (r *reconciler) readinessEvent(obj client.Object, origConds, conds []metav1.Condition, v verdict) {
	was, is := isReady(origConds), isReady(conds)
	if was == is && (is || isSynced(origConds) || !isSynced(conds)) {
		return
	}
	if is {
		r.event(obj, corev1.EventTypeNormal, ipamv1alpha1.ReasonReady, v.action, v.o.message)
	} else if v.o.synced {
		r.event(obj, corev1.EventTypeWarning, ipamv1alpha1.ReasonFailed, v.action, v.o.message)
	}
}
