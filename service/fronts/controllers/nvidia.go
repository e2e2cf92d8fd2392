package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	nvv1alpha1 "github.com/nephio-project/ipam/api/nvidia/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
)

// nodeMatches reports whether node matches sel as the scheduler reads a
// node selector: terms ORed, a term's expressions and fields ANDed; a nil
// selector matches every node, a term without requirements none.
func nodeMatches(sel *corev1.NodeSelector, node *corev1.Node) (bool, error) {
	if sel == nil {
		return true, nil
	}
	for _, term := range sel.NodeSelectorTerms {
		if len(term.MatchExpressions)+len(term.MatchFields) == 0 {
			continue
		}
		ok, err := termMatches(term, node)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

func termMatches(term corev1.NodeSelectorTerm, node *corev1.Node) (bool, error) {
	for _, groups := range []struct {
		reqs []corev1.NodeSelectorRequirement
		set  labels.Set
	}{{term.MatchExpressions, node.Labels}, {term.MatchFields, labels.Set{"metadata.name": node.Name}}} {
		for _, r := range groups.reqs {
			op, ok := map[corev1.NodeSelectorOperator]selection.Operator{
				corev1.NodeSelectorOpIn: selection.In, corev1.NodeSelectorOpNotIn: selection.NotIn,
				corev1.NodeSelectorOpExists: selection.Exists, corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
				corev1.NodeSelectorOpGt: selection.GreaterThan, corev1.NodeSelectorOpLt: selection.LessThan,
			}[r.Operator]
			if !ok {
				return false, fmt.Errorf("spec.nodeSelector: operator %q is not a node selector operator", r.Operator)
			}
			req, err := labels.NewRequirement(r.Key, op, r.Values)
			if err != nil {
				return false, fmt.Errorf("spec.nodeSelector: %w", err)
			}
			if !req.Matches(groups.set) {
				return false, nil
			}
		}
	}
	return true, nil
}

// nvidiaPoolKind adapts NVIDIA IPPools: ipam-server holds each
// pool's subnet, every node the node selector matches holds a block of
// perNodeBlockSize addresses (handed out from the start of the subnet,
// nodes in name order; the same block for a node across restarts and
// edits that keep it valid), a node that stops matching or goes gives its
// block back, and status.allocations lists the blocks. A matching node
// without a block (a full pool) turns Ready False with reason
// PoolExhausted and a Warning event.
type nvidiaPoolKind struct{ nvidiaBase }

func (nvidiaPoolKind) conditions(pool *nvv1alpha1.IPPool) *[]metav1.Condition {
	return &pool.Status.Conditions
}

func (nvidiaPoolKind) status(pool *nvv1alpha1.IPPool) any { return pool.Status }

func (r nvidiaPoolKind) release(ctx context.Context, pool *nvv1alpha1.IPPool) (ctrl.Result, error) {
	return r.releasePool(ctx, pool, &pool.Status.Conditions, translate.NVIDIAPoolID(r.owner, pool.Namespace, pool.Name))
}

func (r nvidiaPoolKind) serve(ctx context.Context, pool *nvv1alpha1.IPPool) (verdict, error) {
	o, allocs, exhausted, err := r.servePool(ctx, pool, translate.NVIDIAPoolID(r.owner, pool.Namespace, pool.Name))
	if err != nil {
		return verdict{}, err
	}
	if o.synced {
		pool.Status.Allocations = allocs
	}
	what := fmt.Sprintf("block of %d addresses", pool.Spec.PerNodeBlockSize)
	return r.verdict(pool, &pool.Status.Conditions, o, exhausted, what, "AllocateBlocks"), nil
}

func (r nvidiaPoolKind) report(orig, pool *nvv1alpha1.IPPool, v verdict) {
	r.reportPool(pool, orig.Status.Conditions, pool.Status.Conditions, v)
}

// releasePool releases everything held in the deleted pool's network
// instance id.
func (r nvidiaBase) releasePool(ctx context.Context, pool client.Object, conds *[]metav1.Condition, id string) (ctrl.Result, error) {
	return r.finalize(ctx, pool, conds, "DeletePool", func() error { return r.releaseAll(ctx, id) })
}

// verdict records o in the pool's conditions: Ready False PoolExhausted,
// retried with backoff, naming the nodes left without a what.
func (r nvidiaBase) verdict(pool client.Object, conds *[]metav1.Condition, o outcome, exhausted []string, what, action string) verdict {
	setConditions(conds, o, pool.GetGeneration())
	if len(exhausted) > 0 {
		meta.SetStatusCondition(conds, metav1.Condition{Type: ipamv1alpha1.ConditionTypeReady, Status: metav1.ConditionFalse,
			Reason: nvv1alpha1.ReasonPoolExhausted, ObservedGeneration: pool.GetGeneration(),
			Message: fmt.Sprintf("no %s left for %d node(s): %s", what, len(exhausted), firstNames(exhausted))})
		o.retry = retryBackoff
	}
	return verdict{o: o, action: action}
}

// reportPool records a Warning event when the pool turns PoolExhausted,
// and the events of its readiness.
func (r nvidiaBase) reportPool(pool client.Object, origConds, conds []metav1.Condition, v verdict) {
	ready := meta.FindStatusCondition(conds, ipamv1alpha1.ConditionTypeReady)
	if ready != nil && ready.Reason == nvv1alpha1.ReasonPoolExhausted && !meta.IsStatusConditionPresentAndEqual(origConds, ipamv1alpha1.ConditionTypeReady, metav1.ConditionFalse) {
		r.event(pool, corev1.EventTypeWarning, nvv1alpha1.ReasonPoolExhausted, v.action, ready.Message)
	}
	r.readinessEvent(pool, origConds, conds, v)
}

// firstNames lists up to five names, and how many more.
func firstNames(names []string) string {
	if len(names) <= 5 {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
}

// servePool syncs the pool, releases the blocks of nodes that no longer match
// and allocates one for each matching node. It returns the outcome, the
// blocks by node name and the matching nodes left without one; err is a
// failure to reach the API server or ipam-server.
func (r nvidiaPoolKind) servePool(ctx context.Context, pool *nvv1alpha1.IPPool, id string) (outcome, []nvv1alpha1.Allocation, []string, error) {
	p, err := translate.ParseNVIDIAPool(pool.Namespace, pool.Name, &pool.Spec)
	var sync *ipamv1.SyncRequest
	if err == nil {
		sync, err = p.Sync(r.owner)
	}
	matching, stop, err := r.syncNodes(ctx, sync, err, pool.Spec.NodeSelector, "IPPool "+translate.ID(pool.Namespace, pool.Name), id)
	if err != nil || stop != nil {
		return ptrOr(stop), nil, nil, err
	}
	var allocs []nvv1alpha1.Allocation
	var exhausted []string
	for _, node := range matching {
		resp, err := r.ipam.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: p.Block(r.owner, node)})
		switch {
		case status.Code(err) == codes.ResourceExhausted:
			exhausted = append(exhausted, node)
			continue
		case err != nil:
			o, err := verdictOf(err)
			return o, nil, nil, err
		}
		start, end, err := translate.BlockRange(resp.GetResult())
		if err != nil {
			return outcome{}, nil, nil, err
		}
		allocs = append(allocs, nvv1alpha1.Allocation{NodeName: node, StartIP: start, EndIP: end})
	}
	return outcome{synced: true, ready: true, message: fmt.Sprintf("%d node(s) hold a block", len(allocs)), retry: retryResync}, allocs, exhausted, nil
}

// syncNodes makes ipam-server hold the pool as sync says (or reports
// perr, the spec's error), releases what the nodes that no longer match
// sel hold in the pool's network instance id, and returns the matching
// nodes, sorted. stop is the outcome that ends serving the pool (named
// after what); err is a failure to reach the API server or ipam-server.
func (r nvidiaBase) syncNodes(ctx context.Context, sync *ipamv1.SyncRequest, perr error, sel *corev1.NodeSelector, what, id string) (matching []string, stop *outcome, err error) {
	if perr != nil {
		return nil, &outcome{synced: true, message: perr.Error(), retry: retryResync}, nil
	}
	if _, err := r.ipam.Sync(ctx, sync); err != nil {
		o, err := verdictOf(err)
		return nil, &o, err
	}
	matching, stop, err = r.matchingNodes(ctx, sel, what)
	if err != nil || stop != nil {
		return nil, stop, err
	}
	return matching, nil, r.releaseOthers(ctx, id, matching)
}

// verdictOf is the outcome of ipam-server's refusal err, or the error
// when it did not answer.
func verdictOf(err error) (outcome, error) {
	o := classify(err, "")
	if !o.synced {
		return o, fmt.Errorf("ipam-server: %w", err)
	}
	return o, nil
}

// ptrOr is *o, or the zero outcome.
func ptrOr(o *outcome) outcome {
	if o == nil {
		return outcome{}
	}
	return *o
}

// nvidiaBase is what the NVIDIA pool kinds share.
type nvidiaBase struct {
	*reconciler
}

// matchingNodes are the names of the nodes sel matches, sorted; o is the
// outcome of a selector that cannot be read (named after what).
func (r nvidiaBase) matchingNodes(ctx context.Context, sel *corev1.NodeSelector, what string) ([]string, *outcome, error) {
	var nodes corev1.NodeList
	if err := r.client.List(ctx, &nodes); err != nil {
		return nil, nil, err
	}
	var matching []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		ok, err := nodeMatches(sel, n)
		if err != nil {
			return nil, &outcome{synced: true, message: what + ": " + err.Error(), retry: retryResync}, nil
		}
		if ok && n.DeletionTimestamp.IsZero() {
			matching = append(matching, n.Name)
		}
	}
	slices.Sort(matching)
	return matching, nil, nil
}

// releaseOthers gives back the blocks or prefixes held in the pool's
// network instance id for nodes not in matching (sorted).
func (r nvidiaBase) releaseOthers(ctx context.Context, id string, matching []string) error {
	held, err := r.held(ctx, id)
	if err != nil {
		return err
	}
	for node, k := range held {
		if _, found := slices.BinarySearch(matching, node); !found {
			if _, err := r.ipam.Release(ctx, &ipamv1.DeleteRequest{Key: k}); err != nil && !isNotFound(err) {
				return fmt.Errorf("ipam-server: releasing what node %s holds: %w", node, err)
			}
			log.FromContext(ctx).Info("released what a node held", "node", node, "networkInstance", id)
		}
	}
	return nil
}

// releaseAll gives back everything held in the pool's network instance
// id and drops the pool's own objects: a deleted pool.
func (r nvidiaBase) releaseAll(ctx context.Context, id string) error {
	if err := r.releaseOthers(ctx, id, nil); err != nil {
		return err
	}
	_, err := r.ipam.Sync(ctx, &ipamv1.SyncRequest{Owner: id, Prune: true})
	return err
}

// held are the keys of the allocations ipam-server holds in the pool's
// network instance id, by node.
func (r nvidiaBase) held(ctx context.Context, id string) (map[string]*ipamv1.Key, error) {
	out := map[string]*ipamv1.Key{}
	for token := ""; ; {
		resp, err := r.ipam.List(ctx, &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION,
			Owner: translate.NVIDIAOwner(r.owner), NetworkInstance: id, PageToken: token})
		if err != nil {
			return nil, fmt.Errorf("ipam-server: %w", err)
		}
		for _, o := range resp.GetObjects() {
			a := o.GetAllocation().GetAllocation()
			if node := a.GetLabels()[nvv1alpha1.LabelNode]; node != "" {
				out[node] = a.GetKey()
			}
		}
		if token = resp.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
}

// nvidiaFront is the NVIDIA front (IPPool and CIDRPool reconcilers), on
// once the nv-ipam.nvidia.com CRDs are installed and the RBAC lets the
// controllers watch pools and nodes.
func nvidiaFront(mgr ctrl.Manager, base *reconciler, hook func(string, types.NamespacedName, ctrl.Result, error)) *front {
	return &front{
		name: "NVIDIA",
		missing: func(ctx context.Context) (string, error) {
			on, err := served(mgr, nvv1alpha1.GroupVersion, nvv1alpha1.KindIPPool, nvv1alpha1.KindCIDRPool)
			if err != nil {
				return "", err
			}
			if !on {
				return "the nv-ipam.nvidia.com CRDs are not installed", nil
			}
			if why, err := denied(ctx, mgr, nvv1alpha1.Group, "ippools", "cidrpools"); why != "" || err != nil {
				return why, err
			}
			return denied(ctx, mgr, "", "nodes")
		},
		turnOn: func(ctx context.Context) error { return setupNVIDIA(ctx, mgr, base, hook) },
	}
}

// setupNVIDIA registers the NVIDIA front's reconcilers.
func setupNVIDIA(ctx context.Context, mgr ctrl.Manager, base *reconciler, hook func(string, types.NamespacedName, ctrl.Result, error)) error {
	logger := log.FromContext(ctx).WithName("nvidia")
	c8s := mgr.GetClient()
	allPools := func(list client.ObjectList) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			l := list.DeepCopyObject().(client.ObjectList)
			if err := c8s.List(ctx, l); err != nil {
				log.FromContext(ctx).Error(err, "listing NVIDIA pools")
				return nil
			}
			items, _ := meta.ExtractList(l)
			reqs := make([]reconcile.Request, 0, len(items))
			for _, it := range items {
				o := it.(client.Object)
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}})
			}
			return reqs
		})
	}
	// Nodes matter when they come, go or change labels.
	nodeEvents := builder.WithPredicates(predicate.Or[client.Object](predicate.LabelChangedPredicate{},
		predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
		}}))
	if err := ctrl.NewControllerManagedBy(mgr).Named("nvidia-ippool").
		For(&nvv1alpha1.IPPool{}, builder.WithPredicates(specChanged)).
		Watches(&corev1.Node{}, allPools(&nvv1alpha1.IPPoolList{}), nodeEvents).
		Complete(observed("nvidia-ippool", reconcilerOf[nvv1alpha1.IPPool](base, nvidiaPoolKind{nvidiaBase{base}}), hook)); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("nvidia-cidrpool").
		For(&nvv1alpha1.CIDRPool{}, builder.WithPredicates(specChanged)).
		Watches(&corev1.Node{}, allPools(&nvv1alpha1.CIDRPoolList{}), nodeEvents).
		Complete(observed("nvidia-cidrpool", reconcilerOf[nvv1alpha1.CIDRPool](base, nvidiaCIDRPoolKind{nvidiaBase{base}}), hook)); err != nil {
		return err
	}
	logger.Info("NVIDIA front on")
	return nil
}
