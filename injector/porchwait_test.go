package injector

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
)

// TestPorchWait checks when the injector starts: at once when Porch is
// served; otherwise later, by itself, once it is, with one log line while
// it waits; an unreachable API server fails the start but is only logged
// afterwards.
func TestPorchWait(t *testing.T) {
	var logged []string
	log := funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})
	var served atomic.Bool
	fail := error(nil)
	starts := 0
	p := &porchWait{served: func() (bool, error) { return served.Load(), fail }, every: 10 * time.Millisecond, log: log,
		start: func() error { starts++; return nil }}

	fail = errors.New("connection refused")
	if err := p.try(true); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("at start, an unreachable API server: %v", err)
	}
	fail = nil
	for range 3 {
		if err := p.try(false); err != nil || p.on || starts != 0 {
			t.Fatalf("Porch not served: err %v, on %v, starts %d", err, p.on, starts)
		}
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "does not serve porch.kpt.dev/v1alpha1 packagerevisions") {
		t.Fatalf("logged %q, want one line saying what it waits for", logged)
	}
	fail = errors.New("timeout")
	if err := p.try(false); err != nil {
		t.Fatalf("a failed check after start is logged, not returned: %v", err)
	}
	fail = nil

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx) }()
	time.Sleep(30 * time.Millisecond)
	served.Store(true)
	select {
	case err := <-done:
		if err != nil || !p.on || starts != 1 {
			t.Fatalf("Start: %v, on %v, starts %d", err, p.on, starts)
		}
	case <-ctx.Done():
		t.Fatal("the injector did not start once Porch was served")
	}
}
