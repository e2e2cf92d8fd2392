package web

import (
	"encoding/json"
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
	if h.streams.Add(1) > MaxStreams {
		h.streams.Add(-1)
		w.Header().Set("Retry-After", "30")
		http.Error(w, "too many live-update streams are open", http.StatusServiceUnavailable)
		return
	}
	defer h.streams.Add(-1)
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
