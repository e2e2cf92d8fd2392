package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nvv1alpha1 "github.com/nephio-project/ipam/api/nvidia/v1alpha1"
	"github.com/nephio-project/ipam/service/node/nodeipam"
)

// Event reasons ipam-node records on pools.
const (
	ReasonAllocationOutsideBlock = "AllocationOutsideBlock"
	ReasonInvalidPool            = "InvalidPool"
	ReasonBlockConflict          = "BlockConflict"
	// maxOutsideEvents bounds the events of one block change.
	maxOutsideEvents = 10
)

// poolWatch keeps the engine's blocks in step with the pools of one
// namespace, read through a cache restricted to it (list and watch only).
type poolWatch struct {
	engine    *nodeipam.Engine
	node      string
	namespace string
	log       logr.Logger
	recorder  record.EventRecorder
	restCfg   *rest.Config
	scheme    *runtime.Scheme
	cache     cache.Cache
	kick      chan struct{}
	// invalid is the last parse error reported of each pool, so that a
	// pool that does not parse is evented once, not at every resync.
	invalid map[nodeipam.PoolKey]string
}

func newPoolWatch(restCfg *rest.Config, scheme *runtime.Scheme, e *nodeipam.Engine, node, ns string, log logr.Logger, rec record.EventRecorder) *poolWatch {
	return &poolWatch{engine: e, node: node, namespace: ns, log: log, recorder: rec, restCfg: restCfg, scheme: scheme,
		kick: make(chan struct{}, 1), invalid: map[nodeipam.PoolKey]string{}}
}

// retryEvery is how often the watch's set-up is tried again while the API
// server does not answer.
const retryEvery = 5 * time.Second

// run watches until ctx ends: it retries the set-up while the API server
// is unreachable (the engine serves the last known blocks meanwhile) and
// reconciles every pool on each change and every resync period.
func (w *poolWatch) run(ctx context.Context, resync time.Duration) {
	for {
		c, err := cache.New(w.restCfg, cache.Options{Scheme: w.scheme, DefaultNamespaces: map[string]cache.Config{w.namespace: {}},
			ByObject: map[client.Object]cache.ByObject{&nvv1alpha1.IPPool{}: {}, &nvv1alpha1.CIDRPool{}: {}}})
		if err == nil {
			w.cache = c
			break
		}
		w.log.Info("pool watch not set up yet; serving the last known blocks", "error", err.Error())
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryEvery):
		}
	}
	go func() {
		if err := w.cache.Start(ctx); err != nil && ctx.Err() == nil {
			w.log.Error(err, "pool cache stopped")
		}
	}()
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.trigger() },
		UpdateFunc: func(any, any) { w.trigger() },
		DeleteFunc: func(any) { w.trigger() },
	}
	for _, obj := range []client.Object{&nvv1alpha1.IPPool{}, &nvv1alpha1.CIDRPool{}} {
		for {
			inf, err := w.cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
			if err == nil {
				_, err = inf.AddEventHandler(handler)
			}
			if err == nil {
				break
			}
			w.log.Info("pool watch not set up yet; serving the last known blocks", "error", err.Error())
			select {
			case <-ctx.Done():
				return
			case <-time.After(retryEvery):
			}
		}
	}
	if !w.cache.WaitForCacheSync(ctx) {
		return
	}
	w.log.Info("pools synced", "namespace", w.namespace)
	t := time.NewTicker(resync)
	defer t.Stop()
	for {
		w.reconcile(ctx)
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		case <-t.C:
		}
	}
}

func (w *poolWatch) trigger() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// reconcile sets the node's block of every pool of the namespace, and
// none for the pools that are gone.
func (w *poolWatch) reconcile(ctx context.Context) {
	seen := map[nodeipam.PoolKey]bool{}
	var ips nvv1alpha1.IPPoolList
	var cps nvv1alpha1.CIDRPoolList
	if err := w.cache.List(ctx, &ips, client.InNamespace(w.namespace)); err != nil {
		w.log.Error(err, "list IPPools")
		return
	}
	if err := w.cache.List(ctx, &cps, client.InNamespace(w.namespace)); err != nil {
		w.log.Error(err, "list CIDRPools")
		return
	}
	for i := range ips.Items {
		p := &ips.Items[i]
		k := nodeipam.PoolKey{Type: nodeipam.IPPool, Name: p.Name}
		seen[k] = true
		b, err := nodeipam.BlockOfIPPool(p, w.node)
		w.set(ctx, p, k, b, err)
	}
	for i := range cps.Items {
		p := &cps.Items[i]
		k := nodeipam.PoolKey{Type: nodeipam.CIDRPool, Name: p.Name}
		seen[k] = true
		b, err := nodeipam.BlockOfCIDRPool(p, w.node)
		w.set(ctx, p, k, b, err)
	}
	for _, k := range w.engine.Pools() {
		if !seen[k] {
			w.set(ctx, nil, k, nil, nil)
		}
	}
}

func (w *poolWatch) set(ctx context.Context, obj runtime.Object, k nodeipam.PoolKey, b *nodeipam.Block, perr error) {
	if perr != nil {
		if w.invalid[k] == perr.Error() {
			return // reported already
		}
		w.invalid[k] = perr.Error()
		w.log.Error(perr, "pool does not parse; it hands out nothing new", "pool", k.Name, "type", k.Type)
		w.engine.Invalidate(k, perr)
		if obj != nil {
			w.recorder.Event(obj, corev1.EventTypeWarning, ReasonInvalidPool, capEvent(perr.Error()))
		}
		return
	}
	delete(w.invalid, k)
	ch, err := w.engine.SetPool(ctx, k, b)
	if err != nil {
		w.log.Error(err, "set block", "pool", k.Name, "type", k.Type)
		return
	}
	if !ch.Changed {
		return
	}
	kv := []any{"pool", k.Name, "type", k.Type}
	if b != nil {
		kv = append(kv, "network", b.Network.String(), "start", b.Start.String(), "end", b.End.String(), "gateway", b.Gateway.String())
	}
	w.log.Info("block set", kv...)
	if obj == nil {
		return
	}
	if ch.Blocked != nil {
		w.recorder.Event(obj, corev1.EventTypeWarning, ReasonBlockConflict, capEvent(fmt.Sprintf("node %s: %v", w.node, errors.Unwrap(ch.Blocked))))
	}
	for i, h := range ch.Outside {
		if i == maxOutsideEvents {
			w.recorder.Eventf(obj, corev1.EventTypeWarning, ReasonAllocationOutsideBlock, "node %s: %d more allocations outside the block", w.node, len(ch.Outside)-i)
			break
		}
		w.recorder.Event(obj, corev1.EventTypeWarning, ReasonAllocationOutsideBlock, capEvent(fmt.Sprintf(
			"node %s: pod %s/%s (container %s, interface %s) holds %s outside the node's block; kept until released",
			w.node, h.Pod.Namespace, h.Pod.Name, h.ContainerID, h.IfName, h.IP)))
	}
}

func capEvent(s string) string {
	const max = 1024
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
