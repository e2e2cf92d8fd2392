package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// DefaultFrontCheck is how often a front that is off (its CRDs not
// installed, or the RBAC not letting the controllers watch them) looks
// again.
const DefaultFrontCheck = 10 * time.Second

// front is one of the optional fronts (Cluster API, Metal3, NVIDIA): off
// until its CRDs are served and the RBAC lets the controllers watch them.
type front struct {
	// name is the front's name in the log: "Metal3 front on".
	name string
	// missing says what keeps the front off ("" when it can turn on).
	// It has no side effect, so it may run again and again.
	missing func(ctx context.Context) (why string, err error)
	// turnOn registers the front's controllers with the manager, once.
	turnOn func(ctx context.Context) error
	// on is set once turnOn succeeded; why is the reason last logged.
	on  bool
	why string
}

// fronts turns on the optional fronts: at start those whose CRDs are
// there, later, as a manager runnable, each one as soon as its CRDs are
// installed, checking every every.
type fronts struct {
	list  []*front
	every time.Duration
	// log is the logger of Setup's context; the fronts log to it.
	log logr.Logger
}

// tryAll turns on every front that is off and can turn on, in list order,
// and reports whether one is still off. A failed check (the API server
// unreachable) is returned atStart and logged later, to be retried; a
// failed registration is always returned.
func (f *fronts) tryAll(ctx context.Context, atStart bool) (off bool, err error) {
	for _, fr := range f.list {
		if fr.on {
			continue
		}
		why, err := fr.missing(ctx)
		if err != nil {
			if atStart {
				return true, fmt.Errorf("%s front: %w", fr.name, err)
			}
			f.log.Error(err, "checking whether the front can turn on", "front", fr.name)
			off = true
			continue
		}
		if why != "" {
			if why != fr.why {
				f.log.Info(fmt.Sprintf("%s front off: %s; it turns on by itself as soon as that changes (checked every %s)", fr.name, why, f.every))
				fr.why = why
			}
			off = true
			continue
		}
		if err := fr.turnOn(ctx); err != nil {
			return true, fmt.Errorf("%s front: %w", fr.name, err)
		}
		fr.on = true
	}
	return off, nil
}

// Start checks the fronts that are off every f.every until all are on or
// ctx is done. It implements manager.Runnable.
func (f *fronts) Start(ctx context.Context) error {
	ctx = log.IntoContext(ctx, f.log)
	t := time.NewTicker(f.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		off, err := f.tryAll(ctx, false)
		if err != nil {
			return err
		}
		if !off {
			return nil
		}
	}
}

// NeedLeaderElection is false: every replica registers the fronts, so that
// the one elected next has them; their controllers still run on the
// leader only.
func (f *fronts) NeedLeaderElection() bool { return false }
