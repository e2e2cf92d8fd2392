package controllers

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		synced bool
		ready  bool
		retry  retry
		msg    string
	}{
		{"ok", nil, true, true, retryResync, "done"},
		{"invalid spec waits for a spec change", status.Error(codes.InvalidArgument, "IPPrefix a/b: spec.prefix: bad"), true, false, retryResync, "IPPrefix a/b: spec.prefix: bad"},
		{"missing parent waits", status.Error(codes.NotFound, "no aggregate contains 10.0.1.0/24"), true, false, retryBackoff, "no aggregate contains 10.0.1.0/24"},
		{"taken address waits", status.Error(codes.AlreadyExists, "10.0.1.10 is taken"), true, false, retryBackoff, "10.0.1.10 is taken"},
		{"full pool waits", status.Error(codes.ResourceExhausted, "no free address left"), true, false, retryBackoff, "no free address left"},
		{"in use waits", status.Error(codes.FailedPrecondition, "still holds"), true, false, retryBackoff, "still holds"},
		{"service down is an error", status.Error(codes.Unavailable, "connection refused"), false, false, retryError, "ipam-server: Unavailable: connection refused"},
		{"deadline is an error", status.Error(codes.DeadlineExceeded, "slow"), false, false, retryError, "ipam-server: DeadlineExceeded: slow"},
		{"internal is an error", status.Error(codes.Internal, "bug"), false, false, retryError, "ipam-server: Internal: bug"},
		{"not a status is an error", errors.New("boom"), false, false, retryError, "ipam-server: Unknown: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := classify(tc.err, "done")
			if o.synced != tc.synced || o.ready != tc.ready || o.retry != tc.retry || o.message != tc.msg {
				t.Fatalf("classify = %+v; want synced %v ready %v retry %v message %q", o, tc.synced, tc.ready, tc.retry, tc.msg)
			}
		})
	}
}

func TestSetConditions(t *testing.T) {
	readyConds := func() []metav1.Condition {
		var c []metav1.Condition
		setConditions(&c, outcome{synced: true, ready: true, message: "ok"}, 1)
		return c
	}
	type want struct{ synced, syncedReason, ready, readyReason, readyMsg string }
	for _, tc := range []struct {
		name  string
		start func() []metav1.Condition
		o     outcome
		want  want
	}{
		{"ready", nil, outcome{synced: true, ready: true, message: "allocated 10.0.1.2/24"},
			want{"True", "ReconcileSuccess", "True", "Ready", "allocated 10.0.1.2/24"}},
		{"refused", nil, outcome{synced: true, message: "no aggregate"},
			want{"True", "ReconcileSuccess", "False", "Failed", "no aggregate"}},
		{"unreachable, never ready", nil, outcome{message: "ipam-server: Unavailable"},
			want{"False", "ReconcileFailure", "False", "Failed", "not synced with ipam-server yet"}},
		{"unreachable keeps Ready", readyConds, outcome{message: "ipam-server: Unavailable"},
			want{"False", "ReconcileFailure", "True", "Ready", "ok"}},
		{"refused after ready", readyConds, outcome{synced: true, message: "full"},
			want{"True", "ReconcileSuccess", "False", "Failed", "full"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conds []metav1.Condition
			if tc.start != nil {
				conds = tc.start()
			}
			setConditions(&conds, tc.o, 2)
			s := meta.FindStatusCondition(conds, ipamv1alpha1.ConditionTypeSynced)
			r := meta.FindStatusCondition(conds, ipamv1alpha1.ConditionTypeReady)
			got := want{string(s.Status), s.Reason, string(r.Status), r.Reason, r.Message}
			if got != tc.want {
				t.Fatalf("conditions %+v; want %+v", got, tc.want)
			}
			if s.ObservedGeneration != 2 {
				t.Errorf("Synced observedGeneration %d; want 2", s.ObservedGeneration)
			}
		})
	}
}

func TestSetConditionsKeepsTransitionTime(t *testing.T) {
	var conds []metav1.Condition
	setConditions(&conds, outcome{synced: true, ready: true, message: "ok"}, 1)
	past := metav1.NewTime(time.Now().Add(-time.Hour))
	for i := range conds {
		conds[i].LastTransitionTime = past
	}
	setConditions(&conds, outcome{synced: true, ready: true, message: "ok"}, 1)
	for _, c := range conds {
		if !c.LastTransitionTime.Equal(&past) {
			t.Errorf("%s: lastTransitionTime moved without a transition", c.Type)
		}
	}
}

func TestBackoff(t *testing.T) {
	now := time.Now()
	at := func(ago time.Duration) []metav1.Condition {
		return []metav1.Condition{{Type: "Ready", Status: "False", LastTransitionTime: metav1.NewTime(now.Add(-ago))}}
	}
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition
		want  time.Duration
	}{
		{"no condition", nil, minBackoff},
		{"just now", at(0), minBackoff},
		{"waiting 10s", at(10 * time.Second), 10 * time.Second},
		{"capped by resync", at(time.Hour), 5 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := backoff(tc.conds, "Ready", now, 5*time.Minute); got != tc.want {
				t.Fatalf("backoff = %s; want %s", got, tc.want)
			}
		})
	}
}
