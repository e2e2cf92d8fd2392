package injector

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// PorchGroup is the API group Porch serves PackageRevisions and their
// resources in; reads of it are reads of Porch, which serves them from
// Git.
const PorchGroup = "porch.kpt.dev"

// apiRequests counts the injector's requests to the Kubernetes API (Porch
// included), by API group, resource and verb, at the injector's side: the
// exact number of calls, retries included. It is served with the
// controller metrics (--metrics-bind-address) as
// ipam_injector_api_requests_total.
var apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "ipam_injector_api_requests_total",
	Help: "Requests of ipam-injector to the Kubernetes API (Porch included), by API group, resource and verb.",
}, []string{"group", "resource", "verb"})

func init() {
	metrics.Registry.MustRegister(apiRequests)
}

// countRequests returns a copy of cfg whose requests are counted in
// apiRequests.
func countRequests(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt} })
	return cfg
}

// countingTransport counts every request it passes on.
type countingTransport struct{ next http.RoundTripper }

// RoundTrip counts r and sends it.
func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	group, resource, verb := classify(r.Method, r.URL.Path, r.URL.Query().Get("watch"))
	apiRequests.WithLabelValues(group, resource, verb).Inc()
	return c.next.RoundTrip(r)
}

// classify names the API group, resource (with its subresource, as
// "resource/subresource") and Kubernetes verb of a request from its method
// and path: /api/v1/... is the core group (""), /apis/<group>/<version>/...
// any other; paths that name no resource (discovery) have resource "".
func classify(method, path, watch string) (group, resource, verb string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		group, rest = parts[1], parts[3:]
	case len(parts) == 2 && parts[0] == "apis":
		group = parts[1]
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		rest = rest[2:] // a namespaced resource
	}
	named := false
	if len(rest) > 0 {
		resource = rest[0]
		named = len(rest) > 1
		if len(rest) > 2 {
			resource += "/" + rest[2]
		}
	}
	switch method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watch == "true" || watch == "1":
			verb = "watch"
		case named || resource == "":
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(method)
	}
	return group, resource, verb
}

// isRead reports whether verb reads (get, list or watch).
func isRead(verb string) bool {
	return verb == "get" || verb == "list" || verb == "watch"
}
