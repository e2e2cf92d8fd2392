package server

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
)

// DefaultWatchBuffer is the number of events a watcher may fall behind
// before it is disconnected.
const DefaultWatchBuffer = 4096

// errHubClosed ends watchers when the server shuts down.
var errHubClosed = &codedError{msg: "server is shutting down", sentinel: ErrUnavailable}

// Hub is the allocator's Journal. It passes every batch of change records
// to the store's journal and, once the store reports them durable,
// publishes them to watchers as WatchEvents in commit order. Watchers have
// bounded buffers: one that falls behind is disconnected instead of
// slowing allocation down.
type Hub struct {
	store  ipam.Journal        // nil: in memory, records are durable at once
	settle func() func() error // the store's Settled, nil when it has none (see ipam.SettlingJournal)
	log    *slog.Logger
	buffer int

	appendMu sync.Mutex // orders batches: the store's order is the publish order
	next     uint64     // sequence number of the next batch

	failOnce  sync.Once
	onFailure func(error) // set before serving

	mu        sync.Mutex
	published uint64                   // batches below are published
	done      map[uint64][]ipam.Record // durable batches waiting for earlier ones
	watchers  map[*watcher]struct{}    // open watchers
	closed    bool

	// Delete records name only the key, so watchers filtered by network
	// instance need the network instance of every live prefix, range and
	// allocation. That index costs memory per object and a scan of the
	// allocator to build, so it is built when the first such watcher
	// subscribes and kept from then on. (If the core's delete records
	// carried their network instance, it would not be needed.)
	alloc      *ipam.Allocator
	indexOnce  sync.Once
	vrfOf      map[objectKey]string // nil until built
	tombstones map[objectKey]bool   // deletions published while the index is built
}

// objectKey names an object of any kind.
type objectKey struct {
	kind ipamv1.ObjectKind
	key  ipam.Key
}

// NewHub returns a Hub that journals to store (nil for an in-memory
// allocator). buffer bounds each watcher's backlog; 0 means
// DefaultWatchBuffer.
func NewHub(store ipam.Journal, buffer int, log *slog.Logger) *Hub {
	if buffer <= 0 {
		buffer = DefaultWatchBuffer
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{store: store, log: log, buffer: buffer, done: map[uint64][]ipam.Record{}, watchers: map[*watcher]struct{}{}}
	if s, ok := store.(ipam.SettlingJournal); ok {
		h.settle = s.Settled
	}
	return h
}

// Settled implements ipam.SettlingJournal for the store's journal: nil
// when the store has no change appended and not yet durable (always, for
// a store that shows none: memory, etcd), and otherwise the store's wait
// for them.
func (h *Hub) Settled() func() error {
	if h.settle == nil {
		return nil
	}
	return h.settle()
}

// OnFailure sets a function called once, on the first failure of the
// store: the allocator's memory then holds a change the store does not,
// so the server should stop serving. Call it before serving.
func (h *Hub) OnFailure(f func(error)) { h.onFailure = f }

// Attach tells the hub which allocator it journals for, so that it can
// look up the network instance of existing objects for watchers filtered
// by network instance. Call it before serving.
func (h *Hub) Attach(a *ipam.Allocator) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.alloc = a
}

// buildIndex builds the network-instance index once. Publishing goes on
// meanwhile: events published during the scan win over what the scan saw.
func (h *Hub) buildIndex() {
	h.indexOnce.Do(func() {
		h.mu.Lock()
		a := h.alloc
		h.vrfOf, h.tombstones = map[objectKey]string{}, map[objectKey]bool{}
		h.mu.Unlock()
		if a == nil {
			return
		}
		scanned := map[objectKey]string{}
		for _, p := range a.ListPrefixes(ipam.Filter{}) {
			scanned[objectKey{ipamv1.ObjectKind_OBJECT_KIND_PREFIX, p.Prefix.Key}] = p.Prefix.NetworkInstance
		}
		for _, r := range a.ListRanges(ipam.Filter{}) {
			scanned[objectKey{ipamv1.ObjectKind_OBJECT_KIND_RANGE, r.Key}] = r.NetworkInstance
		}
		for _, r := range a.ListAllocations(ipam.Filter{}) {
			scanned[objectKey{ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, r.Allocation.Key}] = r.Result.NetworkInstance
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		for k, vrf := range scanned {
			if _, seen := h.vrfOf[k]; !seen && !h.tombstones[k] {
				h.vrfOf[k] = vrf
			}
		}
		h.tombstones = nil
		h.log.Info("watch: built the network instance index", "objects", len(h.vrfOf))
	})
}

// Append implements ipam.Journal. It is called with the mutated VRFs
// locked and does no I/O: it hands the records to the store's journal and
// returns a wait function that blocks until they are durable, then
// publishes them. When the store has nothing to wait for (in memory), the
// records are durable already: Append publishes them and returns nil.
func (h *Hub) Append(recs []ipam.Record) func() error {
	h.appendMu.Lock()
	seq, wait := h.enqueue(recs)
	if wait == nil {
		// In order: appendMu is held, so no later batch is published first.
		h.complete(seq, recs)
		h.appendMu.Unlock()
		return nil
	}
	h.appendMu.Unlock()
	return func() error { return h.durable(seq, recs, wait) }
}

// enqueue gives recs the next turn to be published and hands them to
// the store's journal, whose wait is nil when it has nothing to wait for.
// It is called with appendMu held, so turns follow the order of appends.
func (h *Hub) enqueue(recs []ipam.Record) (seq uint64, wait func() error) {
	seq = h.next
	h.next++
	if h.store != nil {
		wait = h.store.Append(recs)
	}
	return seq, wait
}

// AppendPending implements ipam.PendingJournal: the records of a change
// whose commit (to a store shared by replicas, queued by the write lead)
// is not known yet take their turn now, and are published only once
// committed returns nil; a change whose commit failed is undone, and
// watchers never see it.
func (h *Hub) AppendPending(recs []ipam.Record, committed func() error) func() error {
	h.appendMu.Lock()
	seq, wait := h.enqueue(recs)
	h.appendMu.Unlock()
	return func() error {
		if err := committed(); err != nil {
			if wait != nil {
				_ = wait() // the store's batch completes; the commit's error is the one to report
			}
			h.complete(seq, nil)
			return err
		}
		if wait == nil {
			h.complete(seq, recs)
			return nil
		}
		return h.durable(seq, recs, wait)
	}
}

// durable waits until the store has batch seq (wait) and publishes it,
// or reports the store's failure.
func (h *Hub) durable(seq uint64, recs []ipam.Record, wait func() error) error {
	if err := wait(); err != nil {
		// Not durable: watchers must not see it. The batch still takes
		// its turn so that later batches are published.
		h.log.Error("journal append failed", "err", err)
		h.failOnce.Do(func() {
			if h.onFailure != nil {
				h.onFailure(err)
			}
		})
		h.complete(seq, nil)
		return &codedError{msg: "store: " + err.Error(), sentinel: ErrUnavailable, cause: err}
	}
	h.complete(seq, recs)
	return nil
}

// complete marks batch seq durable (recs nil: failed, nothing to publish)
// and publishes every batch that is now in order.
func (h *Hub) complete(seq uint64, recs []ipam.Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if seq != h.published {
		// Earlier batches are still waiting for the store.
		h.done[seq] = recs
		return
	}
	for {
		for _, r := range recs {
			h.publish(r)
		}
		h.published++
		var ok bool
		if recs, ok = h.done[h.published]; !ok {
			return
		}
		delete(h.done, h.published)
	}
}

// publish sends one record to the watchers it matches; h.mu is held.
func (h *Hub) publish(r ipam.Record) {
	if r.Op == ipam.OpPutOwner || r.Op == ipam.OpDeleteOwner {
		return // no object: the binding of an owner to its package
	}
	vrf := recordVRF(r)
	if h.vrfOf != nil {
		ok := objectKey{kindOfOp(r.Op), r.Key}
		switch r.Op {
		case ipam.OpPutPrefix, ipam.OpPutRange, ipam.OpPutAllocation:
			h.vrfOf[ok] = vrf
			if h.tombstones != nil {
				delete(h.tombstones, ok)
			}
		case ipam.OpDeletePrefix, ipam.OpDeleteRange, ipam.OpDeleteAllocation:
			if vrf == "" {
				vrf = h.vrfOf[ok]
			}
			delete(h.vrfOf, ok)
			if h.tombstones != nil {
				h.tombstones[ok] = true
			}
		}
	}
	if len(h.watchers) == 0 {
		return
	}
	var ev *ipamv1.WatchEvent
	for w := range h.watchers {
		if !w.matches(r.Key.Owner, vrf) {
			continue
		}
		if ev == nil {
			ev = eventFromRecord(r)
		}
		select {
		case w.events <- ev:
		default:
			h.log.Warn("watcher fell behind; disconnecting it", "buffer", h.buffer, "network_instance", w.vrf, "owner", w.owner)
			w.stop(&codedError{sentinel: ipam.ErrExhausted,
				msg: fmt.Sprintf("watch fell behind: more than %d events pending; list again and restart the watch", h.buffer)})
			delete(h.watchers, w)
		}
	}
}

// watcher is one Watch stream's subscription.
type watcher struct {
	vrf, owner string
	events     chan *ipamv1.WatchEvent
	stopped    chan struct{}
	err        error // why it stopped; set before stopped is closed
}

func (w *watcher) matches(owner, vrf string) bool {
	return (w.owner == "" || w.owner == owner) && (w.vrf == "" || w.vrf == vrf)
}

func (w *watcher) stop(err error) {
	w.err = err
	close(w.stopped)
}

// Subscription is an open watch: events in commit order until Done is
// closed; Err then says why.
type Subscription struct {
	h *Hub
	w *watcher
}

// Subscribe opens a subscription to the changes of one network instance
// and owner (empty strings match everything).
func (h *Hub) Subscribe(vrf, owner string) (*Subscription, error) {
	if vrf != "" {
		h.buildIndex()
	}
	w := &watcher{vrf: vrf, owner: owner, events: make(chan *ipamv1.WatchEvent, h.buffer), stopped: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errHubClosed
	}
	h.watchers[w] = struct{}{}
	return &Subscription{h: h, w: w}, nil
}

// Events delivers the subscription's events.
func (s *Subscription) Events() <-chan *ipamv1.WatchEvent { return s.w.events }

// Done is closed when the hub ends the subscription.
func (s *Subscription) Done() <-chan struct{} { return s.w.stopped }

// Err says why the subscription ended; valid once Done is closed.
func (s *Subscription) Err() error {
	select {
	case <-s.w.stopped:
		return s.w.err
	default:
		return nil
	}
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	if _, ok := s.h.watchers[s.w]; ok {
		delete(s.h.watchers, s.w)
		s.w.stop(errors.New("subscription closed"))
	}
}

// Watchers returns the number of open subscriptions.
func (h *Hub) Watchers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.watchers)
}

// Close ends every subscription (they report Unavailable) and refuses new
// ones. Journaling goes on, so in-flight mutations still complete.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for w := range h.watchers {
		w.stop(errHubClosed)
		delete(h.watchers, w)
	}
}
