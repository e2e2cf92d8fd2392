package daemon

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nephio-project/ipam/service/node/nodeipam"
)

// cleaner releases the allocations whose pod is gone or was recreated
// with another UID.
type cleaner struct {
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

// round looks every allocation older than the grace up and releases the
// stale ones. Any error but NotFound from the API server ends the round
// before anything is released: nothing is ever released on an error.
func (c *cleaner) round(ctx context.Context) {
	now := time.Now()
	var stale []nodeipam.Held
	for _, h := range c.engine.List() {
		if h.Pod.Name == "" || h.Pod.Namespace == "" || now.Sub(h.Created) < c.grace {
			continue
		}
		pod, err := c.pods.CoreV1().Pods(h.Pod.Namespace).Get(ctx, h.Pod.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			stale = append(stale, h)
		case err != nil:
			c.log.Info("cleanup skipped: the API server does not answer", "error", err.Error())
			return
		case h.Pod.UID != "" && string(pod.UID) != h.Pod.UID:
			stale = append(stale, h)
		}
	}
	for _, h := range stale {
		if err := c.engine.Release(ctx, h); err != nil {
			c.log.Error(err, "release stale allocation", "pool", h.Pool.Name, "container", h.ContainerID, "ifname", h.IfName)
			continue
		}
		c.metrics.staleReleased()
		c.log.Info("released stale allocation", "pool", h.Pool.Name, "type", h.Pool.Type, "ip", h.IP.String(),
			"pod", h.Pod.Namespace+"/"+h.Pod.Name, "container", h.ContainerID, "ifname", h.IfName)
	}
}
