package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	capicorev1beta2 "github.com/nephio-project/ipam/api/capi/core/v1beta2"
	capiv1beta2 "github.com/nephio-project/ipam/api/capi/ipam/v1beta2"
	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	metal3v1alpha1 "github.com/nephio-project/ipam/api/metal3/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
	"github.com/nephio-project/ipam/api/vocab"
)

// Finalizers of the Cluster API IPAM contract, as the upstream in-cluster
// provider names them.
const (
	// ReleaseAddressFinalizer holds a claim until its address is released.
	ReleaseAddressFinalizer = "ipam.cluster.x-k8s.io/ReleaseAddress"
	// ProtectAddressFinalizer holds an IPAddress until its claim goes.
	ProtectAddressFinalizer = "ipam.cluster.x-k8s.io/ProtectAddress"
)

// DeleteForMoveAnnotation is what clusterctl move (and nothing else)
// writes on each object it deletes from the source management cluster
// once the target holds a copy: what it marks is moving away, not going,
// so nothing is released in ipam-server for it.
const DeleteForMoveAnnotation = "clusterctl.cluster.x-k8s.io/delete-for-move"

// movingAway reports whether clusterctl move is deleting obj from this
// management cluster after copying it to another.
func movingAway(obj client.Object) bool {
	_, ok := obj.GetAnnotations()[DeleteForMoveAnnotation]
	return ok && !obj.GetDeletionTimestamp().IsZero()
}

// indexCluster indexes IPAddressClaims by the Cluster they belong to.
const indexCluster = "ipam.nephio.org/cluster"

// clusterOf names the Cluster a claim belongs to: spec.clusterName, or
// the cluster-name label.
func clusterOf(c *capiv1beta2.IPAddressClaim) string {
	if c.Spec.ClusterName != "" {
		return c.Spec.ClusterName
	}
	return c.Labels[capicorev1beta2.ClusterNameLabel]
}

// indexByCluster is the indexer of indexCluster.
func indexByCluster(obj client.Object) []string {
	if c, ok := obj.(*capiv1beta2.IPAddressClaim); ok && clusterOf(c) != "" {
		return []string{clusterOf(c)}
	}
	return nil
}

// capiClaimKind adapts Cluster API IPAddressClaims whose poolRef names
// an ipam.nephio.org pool (InClusterIPPool, GlobalInClusterIPPool,
// IPPrefix or NetworkInstance) or a Metal3 IPPool: an address allocated
// from ipam-server, the IPAddress named after the claim created, both
// released with the claim. IPAddresses that exist without the server
// knowing them (after clusterctl move to a management cluster with a
// fresh ipam-server) are adopted, each as an allocation of exactly its
// address, before the pool hands out anything new.
type capiClaimKind struct {
	*reconciler
	*adoption
	// clusters is false when the Cluster CRD is not installed: claims
	// then belong to no cluster that could pause them.
	clusters bool
}

func (capiClaimKind) finalizer() string { return ReleaseAddressFinalizer }

func (capiClaimKind) conditions(claim *capiv1beta2.IPAddressClaim) *[]metav1.Condition {
	return &claim.Status.Conditions
}

func (capiClaimKind) status(claim *capiv1beta2.IPAddressClaim) any { return claim.Status }

// skip leaves alone the claims of other providers' pools, and the claims
// that are paused: nothing moves while paused, deletion included, since
// clusterctl move deletes the claims it copied without their addresses
// going.
func (r capiClaimKind) skip(ctx context.Context, claim *capiv1beta2.IPAddressClaim) (bool, error) {
	if !ourPool(claim.Spec.PoolRef) {
		return true, nil
	}
	cluster, err := r.cluster(ctx, claim)
	if err != nil {
		return false, err
	}
	if isPaused(claim, cluster) {
		log.FromContext(ctx).Info("paused: nothing done", "pool", claimPool(claim))
		return true, nil
	}
	return false, nil
}

func (r capiClaimKind) release(ctx context.Context, claim *capiv1beta2.IPAddressClaim) (ctrl.Result, error) {
	return ctrl.Result{}, r.releaseClaim(ctx, claim)
}

// admit gives no new address to a claim of a cluster going away.
func (r capiClaimKind) admit(ctx context.Context, claim *capiv1beta2.IPAddressClaim) (bool, error) {
	if _, err := r.address(ctx, claim); !apierrors.IsNotFound(err) {
		return true, err
	}
	cluster, err := r.cluster(ctx, claim)
	if err != nil {
		return false, err
	}
	return cluster == nil || cluster.DeletionTimestamp.IsZero(), nil
}

// address is the claim's IPAddress (named after it).
func (r capiClaimKind) address(ctx context.Context, claim *capiv1beta2.IPAddressClaim) (*capiv1beta2.IPAddress, error) {
	var addr capiv1beta2.IPAddress
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}, &addr); err != nil {
		return nil, err
	}
	return &addr, nil
}

// claimPool names the pool of a claim for the log: kind/namespace/name.
func claimPool(claim *capiv1beta2.IPAddressClaim) string {
	ref := claim.Spec.PoolRef
	return poolKey(ref.Kind, poolNamespace(ref.Kind, claim.Namespace), ref.Name)
}

func (r capiClaimKind) serve(ctx context.Context, claim *capiv1beta2.IPAddressClaim) (verdict, error) {
	var o claimOutcome
	switch addr, err := r.address(ctx, claim); {
	case err == nil:
		o = r.keep(ctx, claim, addr)
	case apierrors.IsNotFound(err):
		o = r.allocate(ctx, claim)
	default:
		return verdict{}, err
	}
	if o.err != nil && o.reason == "" {
		return verdict{}, o.err // the API server or ipam-server did not answer
	}
	cond := metav1.Condition{Type: capiv1beta2.ConditionReady, Status: metav1.ConditionTrue,
		Reason: capiv1beta2.ReasonReady, Message: o.message, ObservedGeneration: claim.Generation}
	v := verdict{o: outcome{synced: true, ready: true, message: o.message, retry: retryResync}, action: "Allocate", pool: claimPool(claim)}
	if o.reason != capiv1beta2.ReasonReady {
		cond.Status, cond.Reason = metav1.ConditionFalse, o.reason
		v.o.ready, v.o.retry = false, retryBackoff
	} else {
		claim.Status.AddressRef = capiv1beta2.IPAddressReference{Name: claim.Name}
	}
	meta.SetStatusCondition(&claim.Status.Conditions, cond)
	return v, nil
}

// report records an event when the claim turns Ready or stops being so,
// with the reason of its Ready condition.
func (r capiClaimKind) report(orig, claim *capiv1beta2.IPAddressClaim, v verdict) {
	if meta.IsStatusConditionTrue(orig.Status.Conditions, capiv1beta2.ConditionReady) == v.o.ready {
		return
	}
	cond := meta.FindStatusCondition(claim.Status.Conditions, capiv1beta2.ConditionReady)
	kind := corev1.EventTypeNormal
	if !v.o.ready {
		kind = corev1.EventTypeWarning
	}
	r.event(claim, kind, cond.Reason, v.action, cond.Message)
}

// claimOutcome is how a claim's reconcile ended: reason is the Ready
// reason (ReasonReady on success), or empty when err is a failure to
// reach the API server or ipam-server, retried as an error.
type claimOutcome struct {
	reason, message string
	err             error
}

// failed is the outcome of err from ipam-server: a full pool is
// PoolExhausted, a missing network instance PoolNotReady, any other
// verdict AllocationFailed, and no verdict an error.
func failed(err error) claimOutcome {
	st := status.Convert(err)
	switch st.Code() {
	case codes.ResourceExhausted:
		return claimOutcome{reason: capiv1beta2.ReasonPoolExhausted, message: st.Message(), err: err}
	case codes.NotFound:
		return claimOutcome{reason: capiv1beta2.ReasonPoolNotReady, message: st.Message(), err: err}
	}
	if isVerdict(err) {
		return claimOutcome{reason: capiv1beta2.ReasonAllocationFailed, message: st.Message(), err: err}
	}
	return claimOutcome{err: fmt.Errorf("ipam-server: %w", err)}
}

// cluster is the claim's Cluster, or nil when it names none or the
// Cluster is not there.
func (r capiClaimKind) cluster(ctx context.Context, claim *capiv1beta2.IPAddressClaim) (*capicorev1beta2.Cluster, error) {
	return getCluster(ctx, r.client, r.clusters, claim.Namespace, clusterOf(claim))
}

// getCluster is the Cluster namespace/name, or nil when name is empty,
// the Cluster CRD is not served (clusters false) or the Cluster is not
// there.
func getCluster(ctx context.Context, c client.Client, clusters bool, namespace, name string) (*capicorev1beta2.Cluster, error) {
	if name == "" || !clusters {
		return nil, nil
	}
	var cl capicorev1beta2.Cluster
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &cl); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return &cl, nil
}

// isPaused reports whether obj (a claim, a pool) or its cluster is paused:
// the paused annotation on either, or the Cluster's spec.paused. An
// object clusterctl move is deleting after copying it is paused too.
func isPaused(obj client.Object, cluster *capicorev1beta2.Cluster) bool {
	if _, ok := obj.GetAnnotations()[capicorev1beta2.PausedAnnotation]; ok || movingAway(obj) {
		return true
	}
	if cluster == nil {
		return false
	}
	_, annotated := cluster.Annotations[capicorev1beta2.PausedAnnotation]
	return annotated || ptr.Deref(cluster.Spec.Paused, false)
}

// request is the allocation the claim asks ipam-server for and the pool
// it names, or the outcome that stops it: a pool that is missing or not
// ready.
func (r capiClaimKind) request(ctx context.Context, claim *capiv1beta2.IPAddressClaim) (*ipamv1.Allocation, client.Object, *claimOutcome) {
	ref := claim.Spec.PoolRef
	ns := poolNamespace(ref.Kind, claim.Namespace)
	key := types.NamespacedName{Namespace: ns, Name: ref.Name}
	notReady := func(why string) *claimOutcome {
		return &claimOutcome{reason: capiv1beta2.ReasonPoolNotReady,
			message: fmt.Sprintf("%s %s: spec.poolRef: %s %s %s", capiv1beta2.KindIPAddressClaim, translate.ID(claim.Namespace, claim.Name), ref.Kind, translate.ID(ns, ref.Name), why)}
	}
	var pool client.Object
	switch ref.Kind {
	case metal3v1alpha1.KindIPPool:
		pool = &metal3v1alpha1.IPPool{}
	case ipamv1alpha1.KindInClusterIPPool:
		pool = &ipamv1alpha1.InClusterIPPool{}
	case ipamv1alpha1.KindGlobalInClusterIPPool:
		pool = &ipamv1alpha1.GlobalInClusterIPPool{}
	case ipamv1alpha1.KindIPPrefix:
		pool = &ipamv1alpha1.IPPrefix{}
	default:
		pool = &ipamv1alpha1.NetworkInstance{}
	}
	if err := r.client.Get(ctx, key, pool); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, notReady("does not exist")
		}
		return nil, nil, &claimOutcome{err: err}
	}
	if !pool.GetDeletionTimestamp().IsZero() {
		return nil, nil, notReady("is being deleted")
	}
	var conds []metav1.Condition
	var want *ipamv1.Allocation
	k := translate.ClaimKey(r.owner, claim.Namespace, claim.Name)
	switch p := pool.(type) {
	case *metal3v1alpha1.IPPool:
		mp, err := translate.ParseMetal3Pool(p.Namespace, p.Name, &p.Spec)
		if err != nil {
			return nil, nil, notReady("is invalid: " + err.Error())
		}
		want, _ = mp.Metal3Claim(r.owner, k, "")
		conds = p.Status.Conditions
	case *ipamv1alpha1.IPPrefix:
		conds, want = p.Status.Conditions, translate.ClaimFromPrefix(k, p)
	case *ipamv1alpha1.NetworkInstance:
		conds, want = p.Status.Conditions, translate.ClaimFromNetworkInstance(k, p.Name)
	default:
		_, _, st := capiPool(pool)
		conds, want = st.Conditions, translate.ClaimAllocation(r.owner, k, claim, ns)
	}
	if !isReady(conds) {
		return nil, nil, notReady("is not Ready")
	}
	return want, pool, nil
}

// allocate gets a new address for a claim without an IPAddress and
// creates the IPAddress.
func (r capiClaimKind) allocate(ctx context.Context, claim *capiv1beta2.IPAddressClaim) claimOutcome {
	want, pool, stop := r.request(ctx, claim)
	if stop != nil {
		return *stop
	}
	if err := r.adoptPool(ctx, claim); err != nil {
		return claimOutcome{err: err}
	}
	resp, err := r.ipam.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: want})
	if err != nil {
		return failed(err)
	}
	spec, err := translate.AddressSpec(claim, resp.GetResult())
	if err != nil {
		return claimOutcome{reason: capiv1beta2.ReasonAllocationFailed, message: err.Error(), err: err}
	}
	if m, ok := pool.(*metal3v1alpha1.IPPool); ok {
		// A Metal3 address carries its entry's prefix and gateway.
		if mp, err := translate.ParseMetal3Pool(m.Namespace, m.Name, &m.Spec); err == nil {
			ip, _ := netip.ParseAddr(spec.Address)
			m3 := mp.Metal3Address(ip, claim.Namespace, claim.Name)
			bits := int32(m3.Prefix)
			spec.Prefix, spec.Gateway = &bits, ""
			if m3.Gateway != nil {
				spec.Gateway = string(*m3.Gateway)
			}
		}
	}
	addr := &capiv1beta2.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: claim.Name,
			Finalizers: []string{ProtectAddressFinalizer}},
		Spec: spec,
	}
	if name := clusterOf(claim); name != "" {
		addr.Labels = map[string]string{capicorev1beta2.ClusterNameLabel: name}
	}
	// The claim controls its address; the pool owns it too, but the claim
	// staying an owner means the address is never collected with the pool.
	addr.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: capiv1beta2.GroupVersion.String(), Kind: capiv1beta2.KindIPAddressClaim,
		Name: claim.Name, UID: claim.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}, {
		APIVersion: claim.Spec.PoolRef.APIGroup + "/v1alpha1", Kind: claim.Spec.PoolRef.Kind, Name: pool.GetName(), UID: pool.GetUID(),
	}}
	if err := r.client.Create(ctx, addr); err != nil {
		// The allocation stays: the claim's next reconcile gets the same
		// address again (rule 8) and creates the IPAddress then.
		return claimOutcome{err: fmt.Errorf("creating IPAddress %s: %w", translate.ID(addr.Namespace, addr.Name), err)}
	}
	r.markAdopted(addr.UID)
	return claimOutcome{reason: capiv1beta2.ReasonReady, message: "allocated " + resp.GetResult().GetPrefix()}
}

// keep checks that ipam-server holds the address of a claim's IPAddress,
// and adopts it when the server does not know it.
func (r capiClaimKind) keep(ctx context.Context, claim *capiv1beta2.IPAddressClaim, addr *capiv1beta2.IPAddress) claimOutcome {
	if !metav1.IsControlledBy(addr, claim) && len(addr.OwnerReferences) > 0 {
		return claimOutcome{reason: capiv1beta2.ReasonAllocationFailed,
			message: fmt.Sprintf("%s %s: an IPAddress of that name exists and belongs to another claim", capiv1beta2.KindIPAddressClaim, translate.ID(claim.Namespace, claim.Name))}
	}
	if o, err := r.adopt(ctx, addr); err != nil || o != nil {
		if err != nil {
			return claimOutcome{err: err}
		}
		return *o
	}
	return claimOutcome{reason: capiv1beta2.ReasonReady, message: "allocated " + addr.Spec.Address}
}

// adoptPool makes sure ipam-server holds every IPAddress of the claim's
// pool before the pool hands out a new address: after clusterctl move the
// IPAddresses arrive before the claims are reconciled, and a fresh server
// must not hand their addresses out again.
func (r capiClaimKind) adoptPool(ctx context.Context, claim *capiv1beta2.IPAddressClaim) error {
	ref := claim.Spec.PoolRef
	var list capiv1beta2.IPAddressList
	if err := r.client.List(ctx, &list, client.MatchingFields{indexPool: poolKey(ref.Kind, poolNamespace(ref.Kind, claim.Namespace), ref.Name)}); err != nil {
		return err
	}
	for i := range list.Items {
		a := &list.Items[i]
		if r.isAdopted(a.UID) || !a.DeletionTimestamp.IsZero() {
			continue
		}
		if o, err := r.adopt(ctx, a); err != nil {
			return err
		} else if o != nil {
			log.FromContext(ctx).Info("cannot adopt IPAddress", "ipAddress", translate.ID(a.Namespace, a.Name), "reason", o.message)
		}
	}
	return nil
}

// adopt makes ipam-server hold addr for its claim (holdExactly). The
// outcome is non-nil when the server refuses, or holds another address
// for the claim.
func (r capiClaimKind) adopt(ctx context.Context, addr *capiv1beta2.IPAddress) (*claimOutcome, error) {
	ip, perr := netip.ParseAddr(addr.Spec.Address)
	if perr != nil {
		return &claimOutcome{reason: capiv1beta2.ReasonAllocationFailed,
			message: fmt.Sprintf("IPAddress %s: spec.address: %s is not an IP address", translate.ID(addr.Namespace, addr.Name), vocab.Quote(addr.Spec.Address))}, nil
	}
	var stop *claimOutcome
	key := translate.ClaimKey(r.owner, addr.Namespace, addr.Spec.ClaimRef.Name)
	refused, err := holdExactly(ctx, r.ipam, key, ip.Unmap(), func() (*ipamv1.Allocation, error) {
		claim := &capiv1beta2.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: addr.Namespace, Name: addr.Spec.ClaimRef.Name},
			Spec: capiv1beta2.IPAddressClaimSpec{PoolRef: addr.Spec.PoolRef}}
		want, _, o := r.request(ctx, claim)
		if o != nil {
			stop = o
			return nil, errStopped
		}
		return want, nil
	})
	switch {
	case err != nil:
		return nil, err
	case stop != nil:
		if stop.reason == "" {
			return nil, stop.err
		}
		return stop, nil
	case refused != nil:
		o := failed(refused)
		o.message = fmt.Sprintf("IPAddress %s: %s", translate.ID(addr.Namespace, addr.Name), o.message)
		return &o, nil
	}
	log.FromContext(ctx).V(1).Info("IPAddress held by ipam-server", "ipAddress", translate.ID(addr.Namespace, addr.Name), "address", ip.String())
	r.markAdopted(addr.UID)
	return nil, nil
}

// errStopped tells holdExactly that want's caller recorded why it stops.
var errStopped = errors.New("stopped")

// releaseClaim gives a deleted claim's address back to its pool, deletes its
// IPAddress and lets the claim go.
func (r capiClaimKind) releaseClaim(ctx context.Context, claim *capiv1beta2.IPAddressClaim) error {
	if !controllerutil.ContainsFinalizer(claim, ReleaseAddressFinalizer) {
		return nil
	}
	key := translate.ClaimKey(r.owner, claim.Namespace, claim.Name)
	if _, err := r.ipam.Release(ctx, &ipamv1.DeleteRequest{Key: key}); err != nil && !isNotFound(err) {
		return fmt.Errorf("ipam-server: release %s: %w", translate.ID(claim.Namespace, claim.Name), err)
	}
	var addr capiv1beta2.IPAddress
	err := r.client.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}, &addr)
	if err == nil && metav1.IsControlledBy(&addr, claim) {
		if controllerutil.ContainsFinalizer(&addr, ProtectAddressFinalizer) {
			orig := addr.DeepCopy()
			controllerutil.RemoveFinalizer(&addr, ProtectAddressFinalizer)
			if err := r.client.Patch(ctx, &addr, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		if err := r.client.Delete(ctx, &addr); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		r.forget(addr.UID)
	} else if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	orig := claim.DeepCopy()
	controllerutil.RemoveFinalizer(claim, ReleaseAddressFinalizer)
	if err := r.client.Patch(ctx, claim, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(err)
	}
	log.FromContext(ctx).Info("released", "action", "Release", "pool", claimPool(claim))
	return nil
}
