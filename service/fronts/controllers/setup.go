package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

// Options configure the reconcilers.
type Options struct {
	// Owner keys every object in ipam-server; DefaultOwner when empty.
	Owner string
	// Resync is how often every resource is reconciled again;
	// DefaultResync when zero.
	Resync time.Duration
	// Metal3 asks for the Metal3 front: on once its CRDs are installed
	// and the RBAC lets the controllers watch them.
	Metal3 bool
	// NVIDIA asks for the NVIDIA front: on once its CRDs are installed
	// and the RBAC lets the controllers watch them and the nodes.
	NVIDIA bool
	// Nephio asks for the Nephio front (NetworkInstance, IPPrefix,
	// IPClaim, VLANIndex, VLANClaim of Nephio's resource API): on once its CRDs are installed and the RBAC
	// lets the controllers watch them.
	Nephio bool
	// FrontCheck is how often a front that is off (the Cluster API
	// front, and Metal3 and NVIDIA when asked for) checks again whether
	// it can turn on; DefaultFrontCheck when zero.
	FrontCheck time.Duration
	// EventRecorderName names the events the reconcilers record; no events
	// when empty.
	EventRecorderName string
	// Reconciled, when set, is called after every reconcile with the
	// controller's name (networkinstance, ipprefix, ipallocation,
	// inclusterippool, globalinclusterippool, ipaddressclaim,
	// metal3-ippool, metal3-ipclaim, nvidia-ippool, nephio-ipclaim,
	// nephio-vlanclaim, nephio-vlanindex, nephio-networkinstance,
	// nephio-ipprefix), the
	// object and the outcome; any status write is done by then. Tests
	// count reconciles with it instead of waiting for time to pass.
	Reconciled func(controller string, key types.NamespacedName, res ctrl.Result, err error)
}

// observed calls hook after every reconcile of r.
func observed(name string, r reconcile.Reconciler, hook func(string, types.NamespacedName, ctrl.Result, error)) reconcile.Reconciler {
	if hook == nil {
		return r
	}
	return reconcile.Func(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
		res, err := r.Reconcile(ctx, req)
		hook(name, req.NamespacedName, res, err)
		return res, err
	})
}

// Setup registers the NetworkInstance, IPPrefix and IPAllocation
// reconcilers, their watches and the network-instance field indexes with
// mgr, and the optional fronts: the Cluster API front (pools and
// IPAddressClaims) and, with opts.Metal3 and opts.NVIDIA, the Metal3 front
// (IPPools, IPClaims) and the NVIDIA front (per-node blocks). A front whose
// CRDs are not installed, or whose RBAC does not let the controllers watch
// them, is off; it turns on by itself (and logs "<front> front on") once
// they are, checked every opts.FrontCheck by a runnable added to mgr. The
// reconcilers call ipam through c; mgr's scheme needs AddToScheme.
func Setup(ctx context.Context, mgr ctrl.Manager, c ipamv1.IPAMClient, opts Options) error {
	if c == nil {
		return errors.New("controllers: an IPAM client is required")
	}
	base := &reconciler{client: mgr.GetClient(), ipam: c, owner: opts.Owner, resync: opts.Resync, now: time.Now}
	if base.owner == "" {
		base.owner = DefaultOwner
	}
	if base.resync <= 0 {
		base.resync = DefaultResync
	}
	if opts.EventRecorderName != "" {
		base.recorder = mgr.GetEventRecorder(opts.EventRecorderName)
	}
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &ipamv1alpha1.IPPrefix{}, indexNetworkInstance, indexByNetworkInstance); err != nil {
		if meta.IsNoMatchError(err) {
			return fmt.Errorf("the %s CRDs are not installed: install them before starting the controller (api/ipam/v1alpha1/crds, or the blueprints/ipam package): %w", ipamv1alpha1.Group, err)
		}
		return err
	}
	if err := idx.IndexField(ctx, &ipamv1alpha1.IPAllocation{}, indexNetworkInstance, indexByNetworkInstance); err != nil {
		return err
	}
	c8s := mgr.GetClient()
	waitingPrefixes := enqueueWaiting(c8s, func() *ipamv1alpha1.IPPrefixList { return &ipamv1alpha1.IPPrefixList{} }, prefixItems)
	waitingAllocations := enqueueWaiting(c8s, func() *ipamv1alpha1.IPAllocationList { return &ipamv1alpha1.IPAllocationList{} }, allocationItems)
	changed := builder.WithPredicates(stateChanged)
	forSpec := builder.WithPredicates(specChanged)

	if err := ctrl.NewControllerManagedBy(mgr).Named("networkinstance").
		For(&ipamv1alpha1.NetworkInstance{}, forSpec).
		Watches(&ipamv1alpha1.IPPrefix{}, enqueueNetworkInstance(c8s), changed).
		Watches(&ipamv1alpha1.IPAllocation{}, enqueueNetworkInstance(c8s), changed).
		Complete(observed("networkinstance", reconcilerOf[ipamv1alpha1.NetworkInstance](base, networkInstanceKind{base}), opts.Reconciled)); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("ipprefix").
		For(&ipamv1alpha1.IPPrefix{}, forSpec).
		Watches(&ipamv1alpha1.NetworkInstance{}, waitingPrefixes, changed).
		Watches(&ipamv1alpha1.IPPrefix{}, waitingPrefixes, changed).
		Watches(&ipamv1alpha1.IPAllocation{}, waitingPrefixes, changed).
		Complete(observed("ipprefix", reconcilerOf[ipamv1alpha1.IPPrefix](base, prefixKind{base}), opts.Reconciled)); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("ipallocation").
		For(&ipamv1alpha1.IPAllocation{}, forSpec).
		Watches(&ipamv1alpha1.NetworkInstance{}, waitingAllocations, changed).
		Watches(&ipamv1alpha1.IPPrefix{}, waitingAllocations, changed).
		Watches(&ipamv1alpha1.IPAllocation{}, waitingAllocations, changed).
		Complete(observed("ipallocation", reconcilerOf[ipamv1alpha1.IPAllocation](base, allocationKind{base}), opts.Reconciled)); err != nil {
		return err
	}
	f := &fronts{every: opts.FrontCheck, log: log.FromContext(ctx)}
	if f.every <= 0 {
		f.every = DefaultFrontCheck
	}
	var claims controller.Controller // the Cluster API front's, once on
	var metal3 *front
	if opts.Metal3 {
		metal3 = metal3Front(mgr, base, opts.Reconciled, &claims)
		f.list = append(f.list, metal3)
	}
	if opts.NVIDIA {
		f.list = append(f.list, nvidiaFront(mgr, base, opts.Reconciled))
	}
	if opts.Nephio {
		f.list = append(f.list, nephioFront(mgr, base, opts.Reconciled))
	}
	f.list = append(f.list, capiFront(mgr, base, opts.Reconciled, metal3, &claims))
	off, err := f.tryAll(ctx, true)
	if err != nil || !off {
		return err
	}
	return mgr.Add(f)
}
