package injector

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// requestLog records the requests one client makes to the API server
// (watches aside): what, on which object, when and how long. W9 keeps one
// for the do-nothing writer and one for the injector, to compare where
// each spends the time of a Draft.
type requestLog struct {
	mu   sync.Mutex
	reqs []timedRequest
}

// timedRequest is one request of a requestLog.
type timedRequest struct {
	verb, resource, name string
	start                time.Time
	took                 time.Duration
}

// wrap returns a copy of cfg whose requests l records.
func (l *requestLog) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return timingTransport{log: l, next: rt} })
	return cfg
}

// timingTransport records the requests it passes on in log.
type timingTransport struct {
	log  *requestLog
	next http.RoundTripper
}

// RoundTrip sends r and records it unless it is a watch.
func (t timingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	_, resource, verb := classify(r.Method, r.URL.Path, r.URL.Query().Get("watch"))
	if verb == "watch" {
		return t.next.RoundTrip(r)
	}
	name := objectName(r.URL.Path)
	start := time.Now()
	resp, err := t.next.RoundTrip(r)
	t.log.mu.Lock()
	t.log.reqs = append(t.log.reqs, timedRequest{verb: verb, resource: resource, name: name, start: start, took: time.Since(start)})
	t.log.mu.Unlock()
	return resp, err
}

// summary is the count and the 50th, 90th percentile and longest time of
// the requests of verb on resource since since.
func (l *requestLog) summary(verb, resource string, since time.Time) string {
	l.mu.Lock()
	var took []time.Duration
	for _, r := range l.reqs {
		if r.verb == verb && r.resource == resource && !r.start.Before(since) {
			took = append(took, r.took)
		}
	}
	l.mu.Unlock()
	if len(took) == 0 {
		return verb + " " + resource + ": none"
	}
	slices.Sort(took)
	return fmt.Sprintf("%s %s: %d, p50 %s, p90 %s, max %s", verb, resource, len(took),
		percentile(took, 50), percentile(took, 90), percentile(took, 100))
}

// story is the requests on the object name, each as its start after from
// and its duration.
func (l *requestLog) story(name string, from time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var parts []string
	for _, r := range l.reqs {
		if r.name == name {
			parts = append(parts, fmt.Sprintf("+%s %s %s (%s)", r.start.Sub(from).Round(time.Millisecond), r.verb, r.resource, r.took.Round(time.Millisecond)))
		}
	}
	if len(parts) == 0 {
		return "no request"
	}
	return strings.Join(parts, ", ")
}

// stages is, per Draft of names, the time from its create's answer to
// its first read, the read, the time from the read's answer to the write,
// and the write; Drafts without both are left out.
func (l *requestLog) stages(names []string, created map[string]time.Time) (toRead, read, toWrite, write []time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := map[string]timedRequest{}
	update := map[string]timedRequest{}
	for _, r := range l.reqs {
		if r.resource != "packagerevisionresources" {
			continue
		}
		switch _, seen := first[r.name]; {
		case r.verb == "get" && !seen:
			first[r.name] = r
		case r.verb == "update":
			if _, ok := update[r.name]; !ok {
				update[r.name] = r
			}
		}
	}
	for _, n := range names {
		g, okg := first[n]
		u, oku := update[n]
		if !okg || !oku {
			continue
		}
		toRead = append(toRead, g.start.Sub(created[n]))
		read = append(read, g.took)
		toWrite = append(toWrite, u.start.Sub(g.start.Add(g.took)))
		write = append(write, u.took)
	}
	for _, ds := range [][]time.Duration{toRead, read, toWrite, write} {
		slices.Sort(ds)
	}
	return toRead, read, toWrite, write
}

// dump writes the log as tab-separated lines (start in RFC 3339 with
// nanoseconds, duration, verb, resource, name) to path.
func (l *requestLog) dump(path string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range l.reqs {
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\t%s\n", r.start.UTC().Format(time.RFC3339Nano), r.took, r.verb, r.resource, r.name)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// objectName is the name of the namespaced object a request path names,
// or "" when it names none.
func objectName(p string) string {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for i := 0; i+3 < len(parts); i++ {
		if parts[i] == "namespaces" {
			return parts[i+3]
		}
	}
	return ""
}
