package injector

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		method, path, watch   string
		group, resource, verb string
	}{
		{"GET", "/apis/porch.kpt.dev/v1alpha1/namespaces/default/packagerevisions", "", PorchGroup, "packagerevisions", "list"},
		{"GET", "/apis/porch.kpt.dev/v1alpha1/namespaces/default/packagerevisions", "true", PorchGroup, "packagerevisions", "watch"},
		{"GET", "/apis/porch.kpt.dev/v1alpha1/packagerevisions", "", PorchGroup, "packagerevisions", "list"},
		{"GET", "/apis/porch.kpt.dev/v1alpha1/namespaces/default/packagerevisionresources/blueprints.a.v1", "", PorchGroup, "packagerevisionresources", "get"},
		{"PUT", "/apis/porch.kpt.dev/v1alpha1/namespaces/default/packagerevisionresources/blueprints.a.v1", "", PorchGroup, "packagerevisionresources", "update"},
		{"PUT", "/apis/porch.kpt.dev/v1alpha1/namespaces/default/packagerevisions/blueprints.a.v1/approval", "", PorchGroup, "packagerevisions/approval", "update"},
		{"POST", "/api/v1/namespaces/default/events", "", "", "events", "create"},
		{"PATCH", "/apis/events.k8s.io/v1/namespaces/default/events/e1", "", "events.k8s.io", "events", "patch"},
		{"GET", "/api/v1/namespaces/default", "", "", "namespaces", "get"},
		{"GET", "/api/v1/namespaces", "", "", "namespaces", "list"},
		{"DELETE", "/apis/config.porch.kpt.dev/v1alpha1/namespaces/default/repositories/r", "", "config.porch.kpt.dev", "repositories", "delete"},
		{"DELETE", "/apis/config.porch.kpt.dev/v1alpha1/namespaces/default/repositories", "", "config.porch.kpt.dev", "repositories", "deletecollection"},
		{"GET", "/apis/porch.kpt.dev/v1alpha1", "", PorchGroup, "", "get"},
		{"GET", "/apis/porch.kpt.dev", "", PorchGroup, "", "get"},
		{"GET", "/apis", "", "", "", "get"},
		{"GET", "/version", "", "", "", "get"},
	} {
		g, r, v := classify(tc.method, tc.path, tc.watch)
		if g != tc.group || r != tc.resource || v != tc.verb {
			t.Errorf("classify(%s %s watch=%q) = %q %q %q, want %q %q %q", tc.method, tc.path, tc.watch, g, r, v, tc.group, tc.resource, tc.verb)
		}
	}
}

// The counting transport counts each request once, by group, resource and
// verb, and passes it on unchanged.
func TestCountingTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	defer srv.Close()
	c := apiRequests.WithLabelValues(PorchGroup, "packagerevisionresources", "get")
	before := counterValue(t, c)
	rt := countingTransport{next: http.DefaultTransport}
	for range 3 {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/apis/porch.kpt.dev/v1alpha1/namespaces/default/packagerevisionresources/x", nil)
		must(t, err)
		resp, err := rt.RoundTrip(req)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTeapot {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if got := counterValue(t, c) - before; got != 3 {
		t.Fatalf("counted %v requests, want 3", got)
	}
}

func counterValue(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	must(t, c.Write(&m))
	return m.GetCounter().GetValue()
}

// requestCounts returns the injector's API requests counted so far, by
// group, resource and verb.
func requestCounts(t testing.TB) map[[3]string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() { apiRequests.Collect(ch); close(ch) }()
	out := map[[3]string]float64{}
	for m := range ch {
		var d dto.Metric
		must(t, m.Write(&d))
		var k [3]string
		for _, l := range d.GetLabel() {
			switch l.GetName() {
			case "group":
				k[0] = l.GetValue()
			case "resource":
				k[1] = l.GetValue()
			case "verb":
				k[2] = l.GetValue()
			}
		}
		out[k] = d.GetCounter().GetValue()
	}
	return out
}

// porchReads is how many reads (get, list, watch) of Porch the injectors
// of this process made so far.
func porchReads(t testing.TB) float64 {
	t.Helper()
	var n float64
	for k, v := range requestCounts(t) {
		if k[0] == PorchGroup && isRead(k[2]) {
			n += v
		}
	}
	return n
}
