package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
)

// waitFor gets ns/name until check passes.
func waitFor[T any, P interface {
	*T
	client.Object
}](t *testing.T, c client.Client, ns, name string, check func(P) error) P {
	t.Helper()
	var obj P
	eventually(t, 30*time.Second, fmt.Sprintf("%T %s/%s", obj, ns, name), func() error {
		obj = P(new(T))
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
			return err
		}
		return check(obj)
	})
	return obj
}

// waitGone waits until ns/name no longer exists (its finalizer let go).
func waitGone[T any, P interface {
	*T
	client.Object
}](t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("%T %s/%s to be gone", P(nil), ns, name), func() error {
		err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, P(new(T)))
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		if err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
}

// condIs checks one condition's status, reason and (a part of) its message.
func condIs(conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason, msgPart string) error {
	c := meta.FindStatusCondition(conds, typ)
	switch {
	case c == nil:
		return fmt.Errorf("no %s condition yet (conditions %v)", typ, conds)
	case c.Status != status || c.Reason != reason || !strings.Contains(c.Message, msgPart):
		return fmt.Errorf("%s = %s/%s %q; want %s/%s containing %q", typ, c.Status, c.Reason, c.Message, status, reason, msgPart)
	}
	return nil
}

// ready checks Synced=True and Ready=True.
func ready(conds []metav1.Condition) error {
	if err := condIs(conds, ipamv1alpha1.ConditionTypeSynced, metav1.ConditionTrue, ipamv1alpha1.ReasonReconcileSuccess, ""); err != nil {
		return err
	}
	return condIs(conds, ipamv1alpha1.ConditionTypeReady, metav1.ConditionTrue, ipamv1alpha1.ReasonReady, "")
}

// failed checks Synced=True and Ready=False (Failed) with msgPart in the message.
func failed(conds []metav1.Condition, msgPart string) error {
	if err := condIs(conds, ipamv1alpha1.ConditionTypeSynced, metav1.ConditionTrue, ipamv1alpha1.ReasonReconcileSuccess, ""); err != nil {
		return err
	}
	return condIs(conds, ipamv1alpha1.ConditionTypeReady, metav1.ConditionFalse, ipamv1alpha1.ReasonFailed, msgPart)
}

func networkInstance(ns, name string) *ipamv1alpha1.NetworkInstance {
	return &ipamv1alpha1.NetworkInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func ipPrefix(ns, name, vrf string, kind ipamv1alpha1.PrefixKind, prefix, network string, labels map[string]string) *ipamv1alpha1.IPPrefix {
	return &ipamv1alpha1.IPPrefix{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       ipamv1alpha1.IPPrefixSpec{Kind: kind, NetworkInstance: vrf, Prefix: prefix, Network: network},
	}
}

// ipAllocation selects by matchLabels; prefixLength 0 means an address.
func ipAllocation(ns, name string, kind ipamv1alpha1.PrefixKind, prefixLength int32, selector map[string]string) *ipamv1alpha1.IPAllocation {
	a := &ipamv1alpha1.IPAllocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       ipamv1alpha1.IPAllocationSpec{Kind: kind, Selector: &metav1.LabelSelector{MatchLabels: selector}},
	}
	if prefixLength > 0 {
		a.Spec.PrefixLength = ptr.To(prefixLength)
	}
	return a
}

func create(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

func del(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Delete(context.Background(), o); client.IgnoreNotFound(err) != nil {
			t.Fatalf("delete %T %s: %v", o, o.GetName(), err)
		}
	}
}

// allocated checks an allocation's status: Ready with prefix and gateway.
func allocated(prefix, gateway string) func(*ipamv1alpha1.IPAllocation) error {
	return func(a *ipamv1alpha1.IPAllocation) error {
		if err := ready(a.Status.Conditions); err != nil {
			return err
		}
		if a.Status.Prefix != prefix || a.Status.Gateway != gateway {
			return fmt.Errorf("status prefix %q gateway %q; want %q %q", a.Status.Prefix, a.Status.Gateway, prefix, gateway)
		}
		return nil
	}
}

// recorded checks a prefix's status: Ready with prefix and gateway.
func recorded(prefix, gateway string) func(*ipamv1alpha1.IPPrefix) error {
	return func(p *ipamv1alpha1.IPPrefix) error {
		if err := ready(p.Status.Conditions); err != nil {
			return err
		}
		if p.Status.Prefix != prefix || p.Status.Gateway != gateway {
			return fmt.Errorf("status prefix %q gateway %q; want %q %q", p.Status.Prefix, p.Status.Gateway, prefix, gateway)
		}
		return nil
	}
}

func objectMeta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name}
}
