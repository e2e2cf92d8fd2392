package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	capicorev1beta2 "github.com/nephio-project/ipam/api/capi/core/v1beta2"
	metal3v1alpha1 "github.com/nephio-project/ipam/api/metal3/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
	"github.com/nephio-project/ipam/api/vocab"
)

// Field indexes of the Metal3 front.
const (
	// indexMetal3Pool indexes Metal3 IPAddresses and IPClaims by their
	// pool, namespace/name.
	indexMetal3Pool = "ipam.metal3.io/pool"
	// indexMetal3Claim indexes Metal3 IPAddresses by their claim,
	// namespace/name.
	indexMetal3Claim = "ipam.metal3.io/claim"
	// indexMetal3Cluster indexes IPPools by spec.clusterName.
	indexMetal3Cluster = "ipam.metal3.io/cluster"
)

// refKey is namespace/name of a reference from an object in namespace.
func refKey(namespace string, ref corev1.ObjectReference) string {
	if ref.Namespace != "" {
		namespace = ref.Namespace
	}
	return namespace + "/" + ref.Name
}

func indexMetal3ByPool(obj client.Object) []string {
	switch o := obj.(type) {
	case *metal3v1alpha1.IPAddress:
		return []string{refKey(o.Namespace, o.Spec.Pool)}
	case *metal3v1alpha1.IPClaim:
		return []string{refKey(o.Namespace, o.Spec.Pool)}
	}
	return nil
}

func indexMetal3ByClaim(obj client.Object) []string {
	if a, ok := obj.(*metal3v1alpha1.IPAddress); ok && a.Spec.Claim.Name != "" {
		return []string{refKey(a.Namespace, a.Spec.Claim)}
	}
	return nil
}

func indexMetal3ByCluster(obj client.Object) []string {
	if p, ok := obj.(*metal3v1alpha1.IPPool); ok && p.Spec.ClusterName != nil {
		return []string{*p.Spec.ClusterName}
	}
	return nil
}

// metal3Paused reports whether pool or its cluster is paused.
func metal3Paused(ctx context.Context, c client.Client, clusters bool, pool *metal3v1alpha1.IPPool) (bool, error) {
	if isPaused(pool, nil) {
		return true, nil
	}
	cl, err := getCluster(ctx, c, clusters, pool.Namespace, ptr.Deref(pool.Spec.ClusterName, ""))
	return err == nil && isPaused(pool, cl), err
}

// metal3PoolKind adapts Metal3 IPPools: ipam-server holds each pool as its
// spec says, with the addresses taken by hand (IPAddresses without a
// claim), in one Sync under the pool's own owner; status.indexes maps
// claim to address; a deleted pool is held until no IPAddress uses it.
type metal3PoolKind struct {
	*reconciler
	clusters bool
}

func (metal3PoolKind) conditions(pool *metal3v1alpha1.IPPool) *[]metav1.Condition {
	return &pool.Status.Conditions
}

func (metal3PoolKind) status(pool *metal3v1alpha1.IPPool) any { return pool.Status }

func (r metal3PoolKind) skip(ctx context.Context, pool *metal3v1alpha1.IPPool) (bool, error) {
	paused, err := metal3Paused(ctx, r.client, r.clusters, pool)
	if paused {
		log.FromContext(ctx).Info("paused: nothing done")
	}
	return paused, err
}

// addresses are the Metal3 IPAddresses of pool.
func (r metal3PoolKind) addresses(ctx context.Context, pool *metal3v1alpha1.IPPool) ([]metal3v1alpha1.IPAddress, error) {
	var addrs metal3v1alpha1.IPAddressList
	if err := r.client.List(ctx, &addrs, client.MatchingFields{indexMetal3Pool: pool.Namespace + "/" + pool.Name}); err != nil {
		return nil, err
	}
	return addrs.Items, nil
}

func (r metal3PoolKind) release(ctx context.Context, pool *metal3v1alpha1.IPPool) (ctrl.Result, error) {
	addrs, err := r.addresses(ctx, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	return r.finalize(ctx, pool, &pool.Status.Conditions, "DeletePool", func() error {
		if n := len(addrs); n > 0 {
			a := &addrs[0]
			return poolInUse("IPPool "+translate.ID(pool.Namespace, pool.Name), n, a.Name, string(a.Spec.Address))
		}
		_, err := r.ipam.Sync(ctx, &ipamv1.SyncRequest{Owner: translate.Metal3PoolID(r.owner, pool.Namespace, pool.Name), Prune: true})
		return err
	})
}

// admit makes the pool's Cluster its owner first (ensureClusterOwner).
func (r metal3PoolKind) admit(ctx context.Context, pool *metal3v1alpha1.IPPool) (bool, error) {
	return true, r.ensureClusterOwner(ctx, pool)
}

func (r metal3PoolKind) serve(ctx context.Context, pool *metal3v1alpha1.IPPool) (verdict, error) {
	addrs, err := r.addresses(ctx, pool)
	if err != nil {
		return verdict{}, err
	}
	external := map[string]netip.Addr{}
	indexes := map[string]metal3v1alpha1.IPAddressStr{}
	for _, a := range addrs {
		ip, err := netip.ParseAddr(string(a.Spec.Address))
		if err != nil || !a.DeletionTimestamp.IsZero() {
			continue
		}
		if a.Spec.Claim.Name == "" {
			external[a.Name] = ip.Unmap()
		} else {
			indexes[a.Spec.Claim.Name] = a.Spec.Address
		}
	}
	var o outcome
	parsed, perr := translate.ParseMetal3Pool(pool.Namespace, pool.Name, &pool.Spec)
	var sync *ipamv1.SyncRequest
	if perr == nil {
		sync, perr = parsed.Metal3Sync(r.owner, external)
	}
	if perr != nil {
		o = outcome{synced: true, message: perr.Error(), retry: retryResync}
	} else {
		_, err = r.ipam.Sync(ctx, sync)
		o = classify(err, fmt.Sprintf("ipam-server holds the pool's %d ranges", len(sync.Ranges)))
	}
	setConditions(&pool.Status.Conditions, o, pool.Generation)
	if !maps.Equal(indexes, pool.Status.Allocations) && !(len(indexes) == 0 && len(pool.Status.Allocations) == 0) {
		pool.Status.Allocations = indexes
		pool.Status.LastUpdated = ptr.To(metav1.NewTime(r.now()))
	}
	return verdict{o: o, err: err, action: "SyncPool"}, nil
}

// ensureClusterOwner makes the Cluster of spec.clusterName an owner of the
// pool, as Metal3's own controller does, so that clusterctl move carries
// the pool (and the IPAddresses it owns) with its cluster. Nothing is done
// while the Cluster does not exist or Cluster API is not installed.
func (r metal3PoolKind) ensureClusterOwner(ctx context.Context, pool *metal3v1alpha1.IPPool) error {
	name := ptr.Deref(pool.Spec.ClusterName, "")
	if name == "" {
		return nil
	}
	cl, err := getCluster(ctx, r.client, r.clusters, pool.Namespace, name)
	if err != nil || cl == nil {
		return err
	}
	for _, o := range pool.OwnerReferences {
		if o.UID == cl.UID {
			return nil
		}
	}
	orig := pool.DeepCopy()
	pool.OwnerReferences = append(pool.OwnerReferences, metav1.OwnerReference{
		APIVersion: capicorev1beta2.GroupVersion.String(), Kind: capicorev1beta2.KindCluster, Name: cl.Name, UID: cl.UID})
	if err := r.client.Patch(ctx, pool, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("IPPool %s: making Cluster %s its owner: %w", translate.ID(pool.Namespace, pool.Name), name, err)
	}
	return nil
}

// metal3ClaimKind adapts Metal3 IPClaims: an address allocated from
// ipam-server, the IPAddress <namePrefix>-<address> created and
// status.address pointing at it, or Metal3's error in
// status.errorMessage; deleting the claim releases the address.
// IPAddresses ipam-server does not know (after clusterctl move) are
// adopted before the pool hands out anything new.
type metal3ClaimKind struct {
	*reconciler
	*adoption
	clusters bool
}

func (metal3ClaimKind) finalizer() string { return metal3v1alpha1.IPClaimFinalizer }

func (metal3ClaimKind) conditions(*metal3v1alpha1.IPClaim) *[]metav1.Condition { return nil }

func (metal3ClaimKind) status(claim *metal3v1alpha1.IPClaim) any { return claim.Status }

// pool is the claim's IPPool; err is NotFound when it is not there.
func (r metal3ClaimKind) pool(ctx context.Context, claim *metal3v1alpha1.IPClaim) (*metal3v1alpha1.IPPool, error) {
	var pool metal3v1alpha1.IPPool
	key := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Spec.Pool.Name}
	if claim.Spec.Pool.Namespace != "" {
		key.Namespace = claim.Spec.Pool.Namespace
	}
	err := r.client.Get(ctx, key, &pool)
	return &pool, err
}

// skip leaves the claims of a paused pool alone, deletion included.
func (r metal3ClaimKind) skip(ctx context.Context, claim *metal3v1alpha1.IPClaim) (bool, error) {
	pool, err := r.pool(ctx, claim)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	paused, err := metal3Paused(ctx, r.client, r.clusters, pool)
	if paused {
		log.FromContext(ctx).Info("paused: nothing done", "pool", translate.ID(pool.Namespace, pool.Name))
	}
	return paused, err
}

func (r metal3ClaimKind) release(ctx context.Context, claim *metal3v1alpha1.IPClaim) (ctrl.Result, error) {
	return ctrl.Result{}, r.releaseClaim(ctx, claim)
}

func (r metal3ClaimKind) serve(ctx context.Context, claim *metal3v1alpha1.IPClaim) (verdict, error) {
	pool, poolErr := r.pool(ctx, claim)
	if poolErr != nil && !apierrors.IsNotFound(poolErr) {
		return verdict{}, poolErr
	}
	addr, errMsg, err := r.serveClaim(ctx, claim, pool, poolErr)
	if err != nil {
		return verdict{}, err
	}
	v := verdict{action: "Allocate", pool: refKey(claim.Namespace, claim.Spec.Pool), after: r.resync}
	if errMsg != "" {
		claim.Status.ErrorMessage = &errMsg
		v.o, v.after = outcome{synced: true, message: errMsg}, r.resync/5
	} else {
		claim.Status.ErrorMessage = nil
		claim.Status.Address = &corev1.ObjectReference{Name: addr, Namespace: claim.Namespace}
		v.o = outcome{synced: true, ready: true, message: "IPAddress " + addr}
	}
	return v, nil
}

// report records an event for every change of the claim's status.
func (r metal3ClaimKind) report(_, claim *metal3v1alpha1.IPClaim, v verdict) {
	if v.o.ready {
		r.event(claim, corev1.EventTypeNormal, "Allocated", v.action, v.o.message)
	} else {
		r.event(claim, corev1.EventTypeWarning, "AllocationFailed", v.action, v.o.message)
	}
}

// serveClaim finds or makes the claim's IPAddress: its name, or Metal3's error
// message; err is a failure to reach the API server or ipam-server.
func (r metal3ClaimKind) serveClaim(ctx context.Context, claim *metal3v1alpha1.IPClaim, pool *metal3v1alpha1.IPPool, poolErr error) (string, string, error) {
	if poolErr != nil {
		return "", fmt.Sprintf("IPPool %s not found", translate.ID(pool.Namespace, claim.Spec.Pool.Name)), nil
	}
	p, err := translate.ParseMetal3Pool(pool.Namespace, pool.Name, &pool.Spec)
	if err != nil {
		return "", err.Error(), nil
	}
	var existing metal3v1alpha1.IPAddressList
	if err := r.client.List(ctx, &existing, client.MatchingFields{indexMetal3Claim: claim.Namespace + "/" + claim.Name}); err != nil {
		return "", "", err
	}
	for _, a := range existing.Items {
		if a.Spec.Pool.Name == pool.Name && a.DeletionTimestamp.IsZero() {
			refused, err := r.adopt(ctx, p, &a)
			if err != nil || refused != nil {
				return "", errText(refused), err
			}
			return a.Name, "", nil
		}
	}
	if p.PreAllocationOutOfBounds(claim.Name) {
		return "", metal3v1alpha1.ErrPreAllocatedOutOfBounds, nil
	}
	if p.Entries() == 0 {
		return "", metal3v1alpha1.ErrExhausted, nil
	}
	if err := r.adoptPool(ctx, p); err != nil {
		return "", "", err
	}
	requested := claim.Annotations[metal3v1alpha1.AnnotationIPAddress]
	key := translate.Metal3ClaimKey(r.owner, claim.Namespace, claim.Name)
	want, err := p.Metal3Claim(r.owner, key, requested)
	if err != nil {
		return "", metal3v1alpha1.ErrRequestedNotAvailable + ": " + err.Error(), nil
	}
	var resp *ipamv1.AllocateResponse
	if requested != "" || p.HasPreAllocation(claim.Name) {
		resp, err = r.ipam.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: want})
	} else {
		// The first entry with a free address, in spec order.
		for i := range p.Entries() {
			resp, err = r.ipam.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: p.Metal3ClaimEntry(r.owner, key, i)})
			if status.Code(err) != codes.ResourceExhausted {
				break
			}
		}
	}
	if err != nil {
		if !isVerdict(err) {
			return "", "", fmt.Errorf("ipam-server: %w", err)
		}
		return "", metal3Error(err, requested), nil
	}
	res, err := netip.ParsePrefix(resp.GetResult().GetPrefix())
	if err != nil {
		return "", "", fmt.Errorf("ipam-server answered %q: %w", resp.GetResult().GetPrefix(), err)
	}
	ip := res.Addr()
	a := &metal3v1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Namespace: pool.Namespace, Name: p.Metal3AddressName(ip), Labels: claim.Labels,
			Finalizers: []string{metal3v1alpha1.IPAddressFinalizer}},
		Spec: p.Metal3Address(ip, claim.Namespace, claim.Name),
	}
	a.OwnerReferences = append(append([]metav1.OwnerReference(nil), claim.OwnerReferences...),
		metav1.OwnerReference{APIVersion: metal3v1alpha1.GroupVersion.String(), Kind: metal3v1alpha1.KindIPPool, Name: pool.Name, UID: pool.UID},
		metav1.OwnerReference{APIVersion: metal3v1alpha1.GroupVersion.String(), Kind: metal3v1alpha1.KindIPClaim, Name: claim.Name, UID: claim.UID})
	if err := r.client.Create(ctx, a); err != nil {
		// The name is taken (an IPAddress made by hand that the pool has
		// not synced yet): give the address back and try again.
		if _, rerr := r.ipam.Release(ctx, &ipamv1.DeleteRequest{Key: want.GetKey()}); rerr != nil && !isNotFound(rerr) {
			err = errors.Join(err, rerr)
		}
		return "", "", fmt.Errorf("creating IPAddress %s: %w", translate.ID(a.Namespace, a.Name), err)
	}
	r.markAdopted(a.UID)
	return a.Name, "", nil
}

// metal3Error is the errorMessage of a refusal, in Metal3's wording.
func metal3Error(err error, requested string) string {
	st := status.Convert(err)
	switch {
	case st.Code() == codes.ResourceExhausted:
		return metal3v1alpha1.ErrExhausted
	case requested != "":
		return metal3v1alpha1.ErrRequestedNotAvailable + ": " + st.Message()
	}
	return st.Message()
}

// errText is the message of err, or "".
func errText(err error) string {
	if err == nil {
		return ""
	}
	return status.Convert(err).Message()
}

// adopt makes ipam-server hold a (holdExactly) for its claim.
func (r metal3ClaimKind) adopt(ctx context.Context, p *translate.Metal3Pool, a *metal3v1alpha1.IPAddress) (refused, err error) {
	ip, perr := netip.ParseAddr(string(a.Spec.Address))
	if perr != nil {
		return status.Errorf(codes.InvalidArgument, "IPAddress %s: spec.address: %s is not an IP address", translate.ID(a.Namespace, a.Name), vocab.Quote(string(a.Spec.Address))), nil
	}
	ns := a.Spec.Claim.Namespace
	if ns == "" {
		ns = a.Namespace
	}
	key := translate.Metal3ClaimKey(r.owner, ns, a.Spec.Claim.Name)
	refused, err = holdExactly(ctx, r.ipam, key, ip.Unmap(), func() (*ipamv1.Allocation, error) {
		return p.Metal3Claim(r.owner, key, "")
	})
	if err == nil && refused == nil {
		r.markAdopted(a.UID)
		log.FromContext(ctx).V(1).Info("IPAddress held by ipam-server", "ipAddress", translate.ID(a.Namespace, a.Name), "address", ip.String())
	}
	return refused, err
}

// adoptPool makes sure ipam-server holds every claimed IPAddress of the
// pool before it hands out a new address.
func (r metal3ClaimKind) adoptPool(ctx context.Context, p *translate.Metal3Pool) error {
	var list metal3v1alpha1.IPAddressList
	if err := r.client.List(ctx, &list, client.MatchingFields{indexMetal3Pool: p.Namespace + "/" + p.Name}); err != nil {
		return err
	}
	for i := range list.Items {
		a := &list.Items[i]
		if a.Spec.Claim.Name == "" || r.isAdopted(a.UID) || !a.DeletionTimestamp.IsZero() {
			continue
		}
		refused, err := r.adopt(ctx, p, a)
		if err != nil {
			return err
		}
		if refused != nil {
			log.FromContext(ctx).Info("cannot adopt IPAddress", "ipAddress", translate.ID(a.Namespace, a.Name), "reason", errText(refused))
		}
	}
	return nil
}

// releaseClaim gives a deleted claim's address back, deletes its IPAddress and
// lets the claim go.
func (r metal3ClaimKind) releaseClaim(ctx context.Context, claim *metal3v1alpha1.IPClaim) error {
	if !controllerutil.ContainsFinalizer(claim, metal3v1alpha1.IPClaimFinalizer) {
		return nil
	}
	key := translate.Metal3ClaimKey(r.owner, claim.Namespace, claim.Name)
	if _, err := r.ipam.Release(ctx, &ipamv1.DeleteRequest{Key: key}); err != nil && !isNotFound(err) {
		return fmt.Errorf("ipam-server: release %s: %w", translate.ID(claim.Namespace, claim.Name), err)
	}
	var list metal3v1alpha1.IPAddressList
	if err := r.client.List(ctx, &list, client.MatchingFields{indexMetal3Claim: claim.Namespace + "/" + claim.Name}); err != nil {
		return err
	}
	for i := range list.Items {
		a := &list.Items[i]
		if controllerutil.ContainsFinalizer(a, metal3v1alpha1.IPAddressFinalizer) {
			orig := a.DeepCopy()
			controllerutil.RemoveFinalizer(a, metal3v1alpha1.IPAddressFinalizer)
			if err := r.client.Patch(ctx, a, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		if err := r.client.Delete(ctx, a); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		r.forget(a.UID)
	}
	orig := claim.DeepCopy()
	controllerutil.RemoveFinalizer(claim, metal3v1alpha1.IPClaimFinalizer)
	if err := r.client.Patch(ctx, claim, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(err)
	}
	log.FromContext(ctx).Info("released", "action", "Release", "pool", refKey(claim.Namespace, claim.Spec.Pool))
	return nil
}
