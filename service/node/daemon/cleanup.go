package daemon

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nephio-project/ipam/service/node/nodeipam"
)

// cleaner releases the allocations whose pod is gone or was recreated
// with another UID.
type cleaner struct {
	node    string // this node: its pods are listed
	engine  *nodeipam.Engine
	pods    kubernetes.Interface
	grace   time.Duration
	log     logr.Logger
	metrics *Metrics
}

func (c *cleaner) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.round(ctx)
		}
	}
}

// round lists the pods of this node once (in pages) and releases the
// allocations older than the grace whose pod is not among them, or is
// there with another UID: a pod's interfaces are added on the node it is
// bound to, so a pod that is not on this node (gone, or recreated
// elsewhere) holds none of its addresses. An error from the API server ends
// the round before anything is released: nothing is ever released on an
// error. One list per round, whatever the number of allocations.
func (c *cleaner) round(ctx context.Context) {
	now := time.Now()
	var candidates []nodeipam.Held
	for _, h := range c.engine.List() {
		if h.Pod.Name != "" && h.Pod.Namespace != "" && now.Sub(h.Created) >= c.grace {
			candidates = append(candidates, h)
		}
	}
	if len(candidates) == 0 {
		return
	}
	uids, err := c.podsOnNode(ctx)
	if err != nil {
		c.log.Info("cleanup skipped: the API server does not answer", "error", err.Error())
		return
	}
	for _, h := range candidates {
		uid, ok := uids[h.Pod.Namespace+"/"+h.Pod.Name]
		if ok && (h.Pod.UID == "" || uid == h.Pod.UID) {
			continue
		}
		if err := c.engine.Release(ctx, h); err != nil {
			c.log.Error(err, "release stale allocation", "pool", h.Pool.Name, "container", h.ContainerID, "ifname", h.IfName)
			continue
		}
		c.metrics.staleReleased()
		c.log.Info("released stale allocation", "pool", h.Pool.Name, "type", h.Pool.Type, "ip", h.IP.String(),
			"pod", h.Pod.Namespace+"/"+h.Pod.Name, "container", h.ContainerID, "ifname", h.IfName)
	}
}

// podsOnNode returns the UID of every pod bound to this node, by
// namespace/name.
func (c *cleaner) podsOnNode(ctx context.Context) (map[string]string, error) {
	uids := map[string]string{}
	opts := metav1.ListOptions{FieldSelector: "spec.nodeName=" + c.node, Limit: 500}
	for {
		list, err := c.pods.CoreV1().Pods("").List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for _, p := range list.Items {
			uids[p.Namespace+"/"+p.Name] = string(p.UID)
		}
		if list.Continue == "" {
			return uids, nil
		}
		opts.Continue = list.Continue
	}
}
