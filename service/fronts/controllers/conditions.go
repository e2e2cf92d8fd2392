package controllers

import (
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
)

// retry says when a reconcile that met an outcome runs again.
type retry int

const (
	// retryResync: the outcome holds until the spec or the service changes;
	// check again at the resync period.
	retryResync retry = iota
	// retryBackoff: the outcome depends on other resources (a missing
	// parent, a full pool, live children); check again with a growing delay.
	retryBackoff
	// retryError: the service did not answer; return the error so the
	// work queue retries with its rate limiter.
	retryError
)

// outcome is what one answer of ipam-server means for a resource.
type outcome struct {
	// synced is true when the service processed the request, whatever
	// its verdict.
	synced bool
	// ready is true when the request is fulfilled.
	ready bool
	// message explains the verdict.
	message string
	retry   retry
}

// classify is the one place where the gRPC status of a call becomes the
// conditions and the retry policy of a resource. Refusals that depend on
// other resources (NotFound, AlreadyExists, ResourceExhausted,
// FailedPrecondition) are retried with backoff; a refused spec
// (InvalidArgument) waits for a spec change; anything else means the
// service did not decide and the call is retried as an error.
func classify(err error, okMessage string) outcome {
	if err == nil {
		return outcome{synced: true, ready: true, message: okMessage, retry: retryResync}
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.InvalidArgument, codes.OutOfRange:
		return outcome{synced: true, message: st.Message(), retry: retryResync}
	case codes.NotFound, codes.AlreadyExists, codes.ResourceExhausted, codes.FailedPrecondition:
		return outcome{synced: true, message: st.Message(), retry: retryBackoff}
	default:
		return outcome{message: "ipam-server: " + st.Code().String() + ": " + st.Message(), retry: retryError}
	}
}

// isNotFound reports whether err is a gRPC NotFound: on deletion, an object
// the service does not know is already gone.
func isNotFound(err error) bool { return status.Code(err) == codes.NotFound }

// setConditions records o as the Synced and Ready conditions. Ready is left
// alone when the service did not answer: what was allocated before still is.
func setConditions(conds *[]metav1.Condition, o outcome, generation int64) {
	synced := metav1.Condition{Type: ipamv1alpha1.ConditionTypeSynced, ObservedGeneration: generation,
		Status: metav1.ConditionTrue, Reason: ipamv1alpha1.ReasonReconcileSuccess}
	if !o.synced {
		synced.Status, synced.Reason, synced.Message = metav1.ConditionFalse, ipamv1alpha1.ReasonReconcileFailure, o.message
	}
	meta.SetStatusCondition(conds, synced)
	if !o.synced && meta.FindStatusCondition(*conds, ipamv1alpha1.ConditionTypeReady) != nil {
		return
	}
	ready := metav1.Condition{Type: ipamv1alpha1.ConditionTypeReady, ObservedGeneration: generation,
		Status: metav1.ConditionTrue, Reason: ipamv1alpha1.ReasonReady, Message: o.message}
	if !o.ready {
		ready.Status, ready.Reason = metav1.ConditionFalse, ipamv1alpha1.ReasonFailed
		if !o.synced {
			ready.Message = "not synced with ipam-server yet"
		}
	}
	meta.SetStatusCondition(conds, ready)
}

// setDeleteRefused records that the service refused to delete the object
// (it still holds children or allocations): Synced turns False with the
// service's explanation; Ready stays as it is, since the object still works.
func setDeleteRefused(conds *[]metav1.Condition, message string, generation int64) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: ipamv1alpha1.ConditionTypeSynced,
		ObservedGeneration: generation, Status: metav1.ConditionFalse,
		Reason: ipamv1alpha1.ReasonReconcileFailure, Message: "deletion refused by ipam-server: " + message})
}

// isReady reports whether conds hold Ready=True.
func isReady(conds []metav1.Condition) bool {
	return meta.IsStatusConditionTrue(conds, ipamv1alpha1.ConditionTypeReady)
}

// isSynced reports whether conds hold Synced=True.
func isSynced(conds []metav1.Condition) bool {
	return meta.IsStatusConditionTrue(conds, ipamv1alpha1.ConditionTypeSynced)
}

// backoff is the delay before a waiting resource is checked again: as long
// as it has been waiting (since its condition last changed), at least
// minBackoff and at most max. Waiting 1s, 2s, 4s ... needs no state beyond
// the condition itself.
func backoff(conds []metav1.Condition, condType string, now time.Time, max time.Duration) time.Duration {
	d := minBackoff
	if c := meta.FindStatusCondition(conds, condType); c != nil {
		if since := now.Sub(c.LastTransitionTime.Time); since > d {
			d = since
		}
	}
	return min(d, max)
}

// minBackoff is the first delay before a waiting resource is checked again.
const minBackoff = time.Second
