// Package web is ipam-server's read-only web view of the address space:
// the network instances with their utilization, a prefix tree per network
// instance with a utilization bar and the free blocks of every prefix, a
// page per prefix listing its allocations, search by address or name, and
// live updates as server-sent events from the server's change stream.
//
// Pages are rendered on the server from Go templates; the assets are
// embedded, and the only script (static/app.js) reloads the page's main
// section when a change arrives. Every page is bounded: lists are paged,
// so a page costs the same with 100 or 100,000 allocations.
package web

import (
	"bytes"
	"cmp"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Page sizes and bounds of what one request may ask.
const (
	// TreePageSize is the number of prefixes per page of a tree.
	TreePageSize = 200
	// AllocationPageSize is the number of allocations per page of a prefix.
	AllocationPageSize = 100
	// VRFPageSize is the number of network instances per page of the list.
	VRFPageSize = 100
	// SearchLimit is the most results a search shows.
	SearchLimit = 100
	// FreeBlocksShown is the number of free blocks shown per prefix of a
	// tree (a prefix's own page shows FreeBlocksOnPage).
	FreeBlocksShown = 4
	// FreeBlocksOnPage is the number of free blocks on a prefix's page.
	FreeBlocksOnPage = 32
	// MaxQuery bounds a search query and every other query parameter.
	MaxQuery = 256
	// MaxStreams bounds the live-update streams open at once.
	MaxStreams = 256
	// MaxStreamsPerClient bounds the live-update streams of one client
	// (Config.Client) open at once, so that one client cannot take all
	// MaxStreams: a page holds one, and a browser rarely shows more
	// than a dozen pages of one site.
	MaxStreamsPerClient = 16
	// Heartbeat is how often an idle live-update stream sends a comment,
	// so that proxies keep it open.
	Heartbeat = 15 * time.Second
)

// Stream is an open change stream: events in commit order until Done is
// closed.
type Stream interface {
	Events() <-chan *ipamv1.WatchEvent
	Done() <-chan struct{}
	Close()
}

// Config is what the web view reads and how it authorizes.
type Config struct {
	// Allocator is the state shown.
	Allocator *ipam.Allocator
	// Subscribe opens a stream of every committed change.
	Subscribe func() (Stream, error)
	// Authorize refuses a request whose caller may not read (and logs
	// it); nil allows every caller.
	Authorize func(r *http.Request) error
	// Client names the client of an authorized request, for the limit
	// on the live-update streams of one client; nil: the request's
	// remote IP address.
	Client func(r *http.Request) string
	// Log receives rendering failures; nil discards.
	Log *slog.Logger
}

// handler serves the web view.
type handler struct {
	cfg   Config
	pages map[string]*template.Template
	mux   *http.ServeMux

	mu      sync.Mutex
	streams int            // live-update streams open
	clients map[string]int // live-update streams open by client
}

// New returns the web view's handler.
func New(cfg Config) http.Handler {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Client == nil {
		cfg.Client = remoteIP
	}
	h := &handler{cfg: cfg, pages: parseTemplates(), mux: http.NewServeMux(), clients: map[string]int{}}
	static, _ := fs.Sub(staticFS, "static")
	h.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	h.mux.HandleFunc("GET /{$}", h.vrfList)
	h.mux.HandleFunc("GET /vrf/{name}", h.tree)
	h.mux.HandleFunc("GET /vrf/{name}/prefix", h.prefix)
	h.mux.HandleFunc("GET /search", h.search)
	h.mux.HandleFunc("GET /events", h.events)
	return h
}

// ServeHTTP sets the headers of every response, refuses what is not a
// read, authorizes the caller and routes.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "the web view is read-only", http.StatusMethodNotAllowed)
		return
	}
	if len(r.URL.RawQuery) > 4*MaxQuery || len(r.URL.Path) > 4*MaxQuery {
		http.Error(w, "request URL too long", http.StatusRequestURITooLong)
		return
	}
	if h.cfg.Authorize != nil {
		if err := h.cfg.Authorize(r); err != nil {
			code := http.StatusForbidden
			var ue *UnauthenticatedError
			if errors.As(err, &ue) {
				code = http.StatusUnauthorized
			}
			http.Error(w, capText(err.Error(), 512), code)
			return
		}
	}
	if strings.HasPrefix(r.URL.Path, "/static/") || r.URL.Path == "/events" || h.cfg.Allocator == nil {
		h.mux.ServeHTTP(w, r)
		return
	}
	// A page is sent only once what it shows is committed: the write
	// lead shows changes whose commit is still on its way, and one that
	// then fails is undone (the page is made again).
	var held *heldResponse
	err := h.cfg.Allocator.ReadSettled(func() {
		held = &heldResponse{header: w.Header().Clone()}
		h.mux.ServeHTTP(held, r)
	})
	if err != nil {
		http.Error(w, capText("the state could not be read: "+err.Error(), 512), http.StatusServiceUnavailable)
		return
	}
	maps.Copy(w.Header(), held.header)
	w.WriteHeader(cmp.Or(held.code, http.StatusOK))
	_, _ = w.Write(held.body.Bytes())
}

// heldResponse is a page's response, held until what it shows is known
// to be committed.
type heldResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

// Header returns the headers the page sets.
func (r *heldResponse) Header() http.Header { return r.header }

// WriteHeader keeps the page's status.
func (r *heldResponse) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

// Write keeps the page's body.
func (r *heldResponse) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.body.Write(b)
}

// UnauthenticatedError is an Authorize error for a caller that is not
// known (401), as opposed to one that may not read (403).
type UnauthenticatedError struct{ Err error }

func (e *UnauthenticatedError) Error() string { return e.Err.Error() }
func (e *UnauthenticatedError) Unwrap() error { return e.Err }

// capText cuts s to n bytes at a rune boundary.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// param returns query parameter k, trimmed, or an error if it is too long.
func param(r *http.Request, k string) (string, error) {
	v := strings.TrimSpace(r.URL.Query().Get(k))
	if len(v) > MaxQuery {
		return "", errors.New("parameter " + k + " exceeds " + strconv.Itoa(MaxQuery) + " bytes")
	}
	return v, nil
}

// remoteIP is the IP address of a request's client (its remote address
// without the port).
func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
