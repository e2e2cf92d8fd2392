package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestAdmissionShares charges requests in turn against a budget of 8 MiB:
// large requests (64 KiB and more) share seven eighths of it, a request
// larger than that share is charged all of it and runs alone, and small
// requests may use the rest.
func TestAdmissionShares(t *testing.T) {
	const limit = 8 << 20
	ad := newAdmission(limit, time.Millisecond)
	var held []charged
	for _, step := range []struct {
		name string
		size int
		fits bool
		cost int64
	}{
		{"a large request over the large share runs alone", 1 << 20, true, limit - limit/8},
		{"another large request does not fit", 100 << 10, false, 0},
		{"a small request uses the reserve", 60 << 10, true, 9 * 60 << 10},
		{"another small one too", 10 << 10, true, 9 * 10 << 10},
		{"a small request past the whole budget does not fit", 60 << 10, false, 0},
	} {
		ch, err := ad.charge(context.Background(), step.size)
		if step.fits != (err == nil) {
			t.Fatalf("%s: charge(%d): %v", step.name, step.size, err)
		}
		if err != nil {
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("%s: %v, want ResourceExhausted", step.name, err)
			}
			continue
		}
		if ch.cost != step.cost {
			t.Errorf("%s: charged %d, want %d", step.name, ch.cost, step.cost)
		}
		held = append(held, ch)
	}
	if got := ad.refused.Load(); got != 2 {
		t.Errorf("%d refusals counted, want 2", got)
	}
	// A waiting request gets the room a release frees.
	ad.wait = time.Minute
	got := make(chan error, 1)
	go func() {
		ch, err := ad.charge(context.Background(), 100<<10)
		ad.release(ch)
		got <- err
	}()
	for ad.waiting.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	for _, ch := range held {
		ad.release(ch)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiting request: %v", err)
	}
	if n, l := ad.inflight.Load(), ad.large.Load(); n != 0 || l != 0 {
		t.Errorf("%d bytes (%d large) in flight once every request is released", n, l)
	}
}

// TestAdmissionReceiveSlots takes every receive slot and fills the queue:
// one more request is refused at once, and a queued one gets the slot a
// finished receive gives back.
func TestAdmissionReceiveSlots(t *testing.T) {
	ad := newAdmission(0, time.Minute)
	ctx := context.Background()
	var dones []func()
	for range maxBulkReceives {
		done, err := ad.startReceive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		dones = append(dones, done)
	}
	got := make(chan error, maxBulkQueue)
	for range maxBulkQueue {
		go func() {
			done, err := ad.startReceive(ctx)
			if err == nil {
				done()
			}
			got <- err
		}()
	}
	for ad.queued.Load() < maxBulkQueue {
		time.Sleep(time.Millisecond)
	}
	if _, err := ad.startReceive(ctx); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("past the queue: %v, want ResourceExhausted", err)
	}
	dones[0]()
	for range maxBulkQueue {
		if err := <-got; err != nil {
			t.Fatalf("a queued receive: %v", err)
		}
	}
}
