package web_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
	"github.com/nephio-project/ipam/service/server/web"
)

// site is a real ipam-server (in-memory store) with its web view.
type site struct {
	srv  *servertest.Server
	api  ipamv1.IPAMClient
	base string
	http *http.Client
}

// startSite runs ipam-server with the web view on loopback ports.
func startSite(t testing.TB, cfg server.Config) *site {
	t.Helper()
	wl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.WebListener = wl
	s := &site{srv: servertest.Start(t, cfg, false), base: "http://" + wl.Addr().String(), http: &http.Client{Timeout: 10 * time.Second}}
	return s
}

// seed declares vpc-1 (aggregate 10.0.0.0/8, network net1 10.0.1.0/24
// with gateway .1, pool 10.8.0.0/16) as owner infra with a source, and n
// addresses of net1 as owner pkg-a.
func (s *site) seed(t testing.TB, n int) {
	t.Helper()
	key := func(name string) *ipamv1.Key { return &ipamv1.Key{Namespace: "default", Name: name} }
	ctx := context.Background()
	_, err := s.api.Sync(ctx, &ipamv1.SyncRequest{Owner: "infra", Source: "https://git.example.com/org/infra/tree/main/vpc-1",
		NetworkInstances: []*ipamv1.NetworkInstance{{Key: key("vpc-1")}},
		Prefixes: []*ipamv1.Prefix{
			{Key: key("agg"), NetworkInstance: "vpc-1", Kind: "aggregate", Prefix: "10.0.0.0/8"},
			{Key: key("net1"), NetworkInstance: "vpc-1", Kind: "network", Prefix: "10.0.1.1/24", Network: "net1",
				Labels: map[string]string{"nephio.org/gateway": "true"}},
			{Key: key("pods"), NetworkInstance: "vpc-1", Kind: "pool", Prefix: "10.8.0.0/16", Labels: map[string]string{"role": "pods"}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	req := &ipamv1.SyncRequest{Owner: "pkg-a", Source: "porch:default/blueprints/pkg-a"}
	for i := range n {
		req.Allocations = append(req.Allocations, &ipamv1.Allocation{Key: key(fmt.Sprintf("a%04d", i)),
			Selector: map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net1"}})
	}
	if _, err := s.api.Sync(ctx, req); err != nil {
		t.Fatal(err)
	}
}

// get fetches path and returns the status and body.
func (s *site) get(t testing.TB, path string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func newSite(t *testing.T, n int) *site {
	s := startSite(t, server.Config{})
	s.api = s.srv.Client(t)
	s.seed(t, n)
	return s
}

var rowRE = regexp.MustCompile(`<tr class="allocation" data-address="([^"]+)"`)

func TestPages(t *testing.T) {
	s := newSite(t, 3)
	for _, tc := range []struct {
		name, path string
		want       []string
	}{
		{"network instances", "/", []string{`<a href="/vrf/vpc-1">vpc-1</a>`, `href="https://git.example.com/org/infra/tree/main/vpc-1"`,
			`<meter class="bar"`, `title="65792 of 16777216 addresses used"`, `value="0.3"`}},
		{"tree", "/vrf/vpc-1", []string{`data-prefix="10.0.0.0/8" data-kind="aggregate"`, `data-prefix="10.0.1.0/24" data-kind="network" data-used="6"`,
			`data-prefix="10.8.0.0/16" data-kind="pool"`, `<code class="block">10.0.0.0/24</code>`, `<code class="block">10.0.2.0/23</code>`,
			`<small>250 free</small>`, `value="2.3"`}},
		{"prefix", "/vrf/vpc-1/prefix?p=10.0.1.0/24", []string{`data-address="10.0.1.2/24"`, `data-address="10.0.1.4/24"`,
			`default/a0002`, `<code>10.0.1.1</code>`, `nephio.org/network-instance=vpc-1, nephio.org/network-name=net1`,
			`title="porch:default/blueprints/pkg-a">pkg-a</span>`, `<code class="block">10.0.1.5 – 10.0.1.254</code>`}},
		{"search by address", "/search?q=10.0.1.3", []string{`<tr class="holding">`, `<code>10.0.1.3/24</code> default/a0001 of`}},
		{"search a free address", "/search?q=10.0.1.99", []string{`<tr class="holding">`, `<td>free</td>`}},
		{"search a reserved address", "/search?q=10.0.1.255", []string{`reserved (network or broadcast address)`}},
		{"search by prefix", "/search?q=10.8.0.0/16", []string{`<tr class="prefix-hit">`, `default/pods`}},
		{"search by name", "/search?q=a000", []string{`data-address="10.0.1.2/24"`, `data-address="10.0.1.4/24"`}},
		{"search by owner", "/search?q=infra", []string{`<tr class="prefix-hit">`, `default/net1`, `default/agg`}},
		{"search nothing", "/search?q=nothing-has-this-name", []string{`Nothing found.`}},
		{"static assets", "/static/app.js", []string{`new EventSource(src)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := s.get(t, tc.path)
			if code != http.StatusOK {
				t.Fatalf("GET %s: %d %s", tc.path, code, body)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("GET %s lacks %s:\n%s", tc.path, w, body)
				}
			}
		})
	}
}

// TestPrefixPagination: 250 allocations are three pages of the prefix,
// in address order, each linking the next.
func TestPrefixPagination(t *testing.T) {
	s := newSite(t, 250)
	path := "/vrf/vpc-1/prefix?p=10.0.1.0/24"
	var all []string
	for pages := 0; path != ""; pages++ {
		if pages > 3 {
			t.Fatal("more than three pages")
		}
		code, body := s.get(t, path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d", path, code)
		}
		for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
			all = append(all, m[1])
		}
		path = ""
		if m := regexp.MustCompile(`<a rel="next" href="([^"]+)"`).FindStringSubmatch(body); m != nil {
			path = strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	if len(all) != 250 || all[0] != "10.0.1.2/24" || all[99] != "10.0.1.101/24" || all[100] != "10.0.1.102/24" || all[249] != "10.0.1.251/24" {
		t.Fatalf("%d rows: first %v … last %v", len(all), all[:2], all[len(all)-1:])
	}
}

// TestHostileRequests: the view is read-only, bounds its inputs, names the
// bad parameter, and escapes what clients stored.
func TestHostileRequests(t *testing.T) {
	s := newSite(t, 1)
	ctx := context.Background()
	// A client stores markup in names, labels and its source.
	_, err := s.api.Sync(ctx, &ipamv1.SyncRequest{Owner: `evil"><script>alert(1)</script>`, Source: "javascript:alert(document.cookie)",
		Allocations: []*ipamv1.Allocation{{Key: &ipamv1.Key{Namespace: "default", Name: `x"><img src=x onerror=alert(1)>`},
			Selector: map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	code, body := s.get(t, "/vrf/vpc-1/prefix?p=10.0.1.0/24")
	if code != http.StatusOK || strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") || strings.Contains(body, `href="javascript:`) {
		t.Fatalf("stored markup reached the page unescaped (%d):\n%s", code, body)
	}
	if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("the owner's name is not shown escaped:\n%s", body)
	}
	for _, tc := range []struct {
		method, path string
		code         int
		want         string
	}{
		{http.MethodPost, "/", http.StatusMethodNotAllowed, "read-only"},
		{http.MethodDelete, "/vrf/vpc-1", http.StatusMethodNotAllowed, "read-only"},
		{http.MethodGet, "/vrf/vpc-1/prefix?p=bad", http.StatusBadRequest, "parameter p"},
		{http.MethodGet, "/vrf/vpc-1/prefix?p=10.0.1.0/24&after=nope", http.StatusBadRequest, "parameter after"},
		{http.MethodGet, "/vrf/vpc-1/prefix?p=10.0.9.0/24", http.StatusNotFound, "no prefix 10.0.9.0/24"},
		{http.MethodGet, "/vrf/nope", http.StatusNotFound, "not found"},
		{http.MethodGet, "/vrf/vpc-1?page=-1", http.StatusBadRequest, "parameter page"},
		{http.MethodGet, "/search?q=" + strings.Repeat("a", 300), http.StatusBadRequest, "parameter q exceeds 256 bytes"},
		{http.MethodGet, "/search?q=" + strings.Repeat("a", 2000), http.StatusRequestURITooLong, "too long"},
		{http.MethodGet, "/events?vrf=" + strings.Repeat("v", 255), http.StatusBadRequest, "too long"},
		{http.MethodGet, "/nope", http.StatusNotFound, ""},
	} {
		req, _ := http.NewRequest(tc.method, s.base+tc.path, nil)
		resp, err := s.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s %.60s: %d %q, want %d containing %q", tc.method, tc.path, resp.StatusCode, b, tc.code, tc.want)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s %.60s: Content-Security-Policy %q", tc.method, tc.path, csp)
		}
	}
}

// TestLiveEvents: an allocation made through the API reaches a follower
// of the network instance's change stream; changes of another network
// instance do not.
func TestLiveEvents(t *testing.T) {
	s := newSite(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/events?vrf=vpc-1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, ct)
	}
	r := bufio.NewReader(resp.Body)
	for { // the stream is open once its first comment arrives
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == ": open\n" {
			break
		}
	}
	// A change of another network instance is not passed on.
	k := func(name string) *ipamv1.Key { return &ipamv1.Key{Namespace: "default", Name: name} }
	if _, err := s.api.Sync(ctx, &ipamv1.SyncRequest{Owner: "other", NetworkInstances: []*ipamv1.NetworkInstance{{Key: k("vpc-2")}},
		Prefixes: []*ipamv1.Prefix{{Key: k("agg2"), NetworkInstance: "vpc-2", Kind: "aggregate", Prefix: "10.0.0.0/8"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.api.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: &ipamv1.Key{Owner: "pkg-b", Namespace: "default", Name: "live"},
		Selector: map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net1"}}}); err != nil {
		t.Fatal(err)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			want := `{"type":"PUT","kind":"ALLOCATION","key":"pkg-b/default/live","networkInstance":"vpc-1"}`
			if got := strings.TrimSpace(strings.TrimPrefix(line, "data: ")); got != want {
				t.Fatalf("event %s, want %s", got, want)
			}
			return
		}
	}
}

// TestAuthorization: with a policy, the web view serves only callers that
// may read: a bearer token of a reader, not an unknown token, not a
// writer without read, not an anonymous caller.
func TestAuthorization(t *testing.T) {
	dir := t.TempDir()
	sum := func(tok string) string { h := sha256.Sum256([]byte(tok)); return hex.EncodeToString(h[:]) }
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(`apiVersion: ipam.nephio.org/v1alpha1
kind: AuthorizationPolicy
tokens:
- identity: reader
  sha256: `+sum("reader-token")+`
- identity: writer
  sha256: `+sum("writer-token")+`
rules:
- identities: [token:reader]
  read: true
- identities: [token:writer]
  owners: ["*"]
  networkInstances: ["*"]
  write: true
`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startSite(t, server.Config{AuthzPolicy: policy})
	for _, tc := range []struct {
		name, token string
		code        int
	}{
		{"anonymous", "", http.StatusForbidden},
		{"unknown token", "nope", http.StatusUnauthorized},
		{"writer without read", "writer-token", http.StatusForbidden},
		{"reader", "reader-token", http.StatusOK},
	} {
		var hdr []string
		if tc.token != "" {
			hdr = []string{"Authorization", "Bearer " + tc.token}
		}
		for _, path := range []string{"/", "/events", "/search?q=x", "/static/app.css"} {
			if tc.code == http.StatusOK && path == "/events" {
				continue // a stream: checked by TestLiveEvents
			}
			if code, body := s.get(t, path, hdr...); code != tc.code {
				t.Errorf("%s GET %s: %d %s, want %d", tc.name, path, code, body, tc.code)
			}
		}
	}
}

// TestMutualTLS: with --client-ca, the web view is served over TLS and
// needs a client certificate signed by that CA.
func TestMutualTLS(t *testing.T) {
	certs := servertest.WriteCerts(t, t.TempDir())
	s := startSite(t, server.Config{TLSCert: certs.ServerCert, TLSKey: certs.ServerKey, ClientCA: certs.CA})
	s.base = strings.Replace(s.base, "http://", "https://", 1)
	for _, tc := range []struct {
		name     string
		withCert bool
		code     int
	}{{"no client certificate", false, http.StatusUnauthorized}, {"client certificate", true, http.StatusOK}} {
		s.http = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: certs.ClientTLS(t, tc.withCert)}}
		if code, body := s.get(t, "/"); code != tc.code {
			t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.code)
		}
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if resp, err := plain.Get(strings.Replace(s.base, "https://", "http://", 1) + "/"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("the web view answered plaintext HTTP although TLS is configured")
		}
	}
	_ = url.Values{}
}

// openEvents opens a live-update stream with client c and headers
// (name, value pairs). It returns the response's status and its
// Retry-After header, and the function that closes a stream (200) once
// it is open.
func (s *site) openEvents(t *testing.T, c *http.Client, header ...string) (code int, retryAfter string, close func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/events", nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After"), nil
	}
	close = func() { cancel(); resp.Body.Close() }
	t.Cleanup(close)
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == ": open\n" {
			return resp.StatusCode, "", close
		}
	}
}

// clientFrom is an HTTP client whose connections come from the local
// address ip (a loopback address other than 127.0.0.1 plays another
// host).
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestLiveEventsPerClient: one client cannot take all the live-update
// streams. A client (its identity when the request is authenticated,
// else its address) holding web.MaxStreamsPerClient streams is refused
// another with 429 and Retry-After while another client still gets one,
// and a stream it closes frees its slot.
func TestLiveEventsPerClient(t *testing.T) {
	dir := t.TempDir()
	sum := func(tok string) string { h := sha256.Sum256([]byte(tok)); return hex.EncodeToString(h[:]) }
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(`apiVersion: ipam.nephio.org/v1alpha1
kind: AuthorizationPolicy
tokens:
- identity: alice
  sha256: `+sum("alice-token")+`
- identity: bob
  sha256: `+sum("bob-token")+`
rules:
- identities: [token:alice, token:bob, anonymous]
  read: true
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		cfg           server.Config
		first, second []string // headers of the two clients
		secondFrom    string   // local address of the second client
	}{
		{name: "anonymous clients by address", secondFrom: "127.0.0.2"},
		{name: "authenticated clients by identity", cfg: server.Config{AuthzPolicy: policy},
			first: []string{"Authorization", "Bearer alice-token"}, second: []string{"Authorization", "Bearer bob-token"}, secondFrom: "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startSite(t, tc.cfg)
			first := &http.Client{Transport: &http.Transport{}}
			var closers []func()
			for i := range web.MaxStreamsPerClient {
				code, _, close := s.openEvents(t, first, tc.first...)
				if code != http.StatusOK {
					t.Fatalf("stream %d of %d: %d", i+1, web.MaxStreamsPerClient, code)
				}
				closers = append(closers, close)
			}
			code, retry, _ := s.openEvents(t, first, tc.first...)
			if code != http.StatusTooManyRequests || retry == "" {
				t.Fatalf("stream %d of one client: %d, Retry-After %q; want 429 with Retry-After", web.MaxStreamsPerClient+1, code, retry)
			}
			if code, _, _ := s.openEvents(t, clientFrom(tc.secondFrom), tc.second...); code != http.StatusOK {
				t.Fatalf("another client's stream: %d", code)
			}
			// The server sees a closed stream end a moment later.
			closers[0]()
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				code, _, _ := s.openEvents(t, first, tc.first...)
				if code == http.StatusOK {
					break
				}
				if code != http.StatusTooManyRequests || time.Now().After(deadline) {
					t.Fatalf("a stream after one was closed: %d", code)
				}
			}
		})
	}
}
