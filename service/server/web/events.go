package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
)

// change is the data of one live-update event.
type change struct {
	Type string `json:"type"`
	Kind string `json:"kind"`
	Key  string `json:"key"`
	VRF  string `json:"networkInstance,omitempty"`
}

// events streams the committed changes of one network instance (vrf
// parameter; all when absent) as server-sent events named "change". A
// client that falls behind is cut off by the server's change hub; the
// browser's EventSource then reconnects and the page reloads its data.
//
// It follows every change and filters here: a deletion names no network
// instance, so it is passed on (a page reloads once for nothing), rather
// than asking the hub to filter by network instance, which makes the hub
// index the network instance of every object in the state for as long as
// the server runs.
func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	vrf, err := param(r, "vrf")
	if err != nil {
		h.fail(w, err)
		return
	}
	if len(vrf) > ipam.MaxNameLength {
		h.fail(w, errTooLong("vrf"))
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok || h.cfg.Subscribe == nil {
		http.Error(w, "live updates are not available", http.StatusNotImplemented)
		return
	}
	client := h.cfg.Client(r)
	if code, msg := h.openStream(client); code != http.StatusOK {
		w.Header().Set("Retry-After", "30")
		http.Error(w, msg, code)
		return
	}
	defer h.closeStream(client)
	sub, err := h.cfg.Subscribe()
	if err != nil {
		http.Error(w, capText(err.Error(), 512), http.StatusServiceUnavailable)
		return
	}
	defer sub.Close()
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// The first comment tells the client the stream is open: a page that
	// reloads after it misses no change.
	_, _ = w.Write([]byte("retry: 2000\n: open\n\n"))
	fl.Flush()
	tick := time.NewTicker(Heartbeat)
	defer tick.Stop()
	for {
		select {
		case ev := <-sub.Events():
			c := changeOf(ev)
			if vrf != "" && c.VRF != "" && c.VRF != vrf {
				continue
			}
			b, _ := json.Marshal(c)
			if _, err := w.Write([]byte("event: change\ndata: " + string(b) + "\n\n")); err != nil {
				return
			}
			fl.Flush()
		case <-tick.C:
			if _, err := w.Write([]byte(": ping\n\n")); err != nil {
				return
			}
			fl.Flush()
		case <-sub.Done():
			return
		case <-r.Context().Done():
			return
		}
	}
}

// openStream counts a live-update stream of client in, or returns why it
// is refused: 503 when MaxStreams are open, 429 when the client has
// MaxStreamsPerClient open.
func (h *handler) openStream(client string) (int, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.streams >= MaxStreams {
		return http.StatusServiceUnavailable, "too many live-update streams are open"
	}
	if h.clients[client] >= MaxStreamsPerClient {
		return http.StatusTooManyRequests, fmt.Sprintf("too many live-update streams of this client: at most %d may be open at once; close a page first", MaxStreamsPerClient)
	}
	h.streams++
	h.clients[client]++
	return http.StatusOK, ""
}

// closeStream counts a live-update stream of client out.
func (h *handler) closeStream(client string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.streams--
	if h.clients[client]--; h.clients[client] <= 0 {
		delete(h.clients, client)
	}
}

func changeOf(ev *ipamv1.WatchEvent) change {
	k := ev.GetKey()
	c := change{Type: strings.TrimPrefix(ev.GetType().String(), "TYPE_"), Kind: strings.TrimPrefix(ev.GetKind().String(), "OBJECT_KIND_"),
		Key: k.GetOwner() + "/" + k.GetNamespace() + "/" + k.GetName()}
	if o := ev.GetObject(); o != nil {
		switch {
		case o.GetAllocation() != nil:
			c.VRF = o.GetAllocation().GetResult().GetNetworkInstance()
		case o.GetPrefix() != nil:
			c.VRF = o.GetPrefix().GetPrefix().GetNetworkInstance()
		case o.GetRange() != nil:
			c.VRF = o.GetRange().GetNetworkInstance()
		case o.GetNetworkInstance() != nil:
			c.VRF = k.GetName()
		}
	}
	return c
}

type errTooLong string

func (e errTooLong) Error() string { return "parameter " + string(e) + " is too long" }
