package injector

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	porchv1alpha1 "github.com/nephio-project/porch/api/porch/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// DefaultPorchCheck is how often the injector looks again for Porch's API
// while the cluster does not serve it, when Config.PorchCheck is zero.
const DefaultPorchCheck = 10 * time.Second

// porchWait starts the injector once the cluster serves Porch's
// PackageRevisions: an injector installed before Porch (or while Porch's
// API server is down at start) waits, ready and logging why, instead of
// failing.
type porchWait struct {
	served func() (bool, error)
	start  func() error
	every  time.Duration
	log    logr.Logger
	// on is set once start succeeded; why is the reason last logged.
	on  bool
	why string
}

// try starts the injector when Porch is served. A failed check is
// returned atStart (the API server unreachable: the kubeconfig is wrong)
// and logged later, to be retried; a failed start is always returned.
func (p *porchWait) try(atStart bool) error {
	ok, err := p.served()
	if err != nil {
		if atStart {
			return fmt.Errorf("looking for Porch's API (%s): %w", porchv1alpha1.SchemeGroupVersion, err)
		}
		p.log.Error(err, "looking for Porch's API")
		return nil
	}
	if !ok {
		why := fmt.Sprintf("the cluster does not serve %s packagerevisions (Porch is not installed, or its API server is not available)", porchv1alpha1.SchemeGroupVersion)
		if why != p.why {
			p.log.Info(why + fmt.Sprintf("; the injector starts by itself once it does (checked every %s)", p.every))
			p.why = why
		}
		return nil
	}
	if err := p.start(); err != nil {
		return err
	}
	p.on = true
	if p.why != "" {
		p.log.Info("Porch's API is served: the injector starts")
	}
	return nil
}

// Start checks every p.every until the injector started or ctx is done.
// It implements manager.Runnable.
func (p *porchWait) Start(ctx context.Context) error {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for !p.on {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := p.try(false); err != nil {
			return err
		}
	}
	return nil
}

// NeedLeaderElection is false: the check runs on every replica, the
// controllers it registers on the leader only.
func (p *porchWait) NeedLeaderElection() bool { return false }

// porchServed reports whether the API server of cfg serves Porch's
// packagerevisions.
func porchServed(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	list, err := dc.ServerResourcesForGroupVersion(porchv1alpha1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		// An aggregated API whose server is down answers 503.
		if apierrors.IsServiceUnavailable(err) {
			return false, nil
		}
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == "packagerevisions" {
			return true, nil
		}
	}
	return false, nil
}
