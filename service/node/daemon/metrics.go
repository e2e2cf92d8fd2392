package daemon

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc/codes"

	"github.com/nephio-project/ipam/service/node/nodeipam"
)

// Metrics are ipam-node's Prometheus metrics.
type Metrics struct {
	// Registry holds them (and the Go and process collectors).
	Registry *prometheus.Registry
	calls    *prometheus.HistogramVec
	stale    prometheus.Counter
	gc       prometheus.Counter
}

// NewMetrics registers the metrics of e, and extra ones (the histograms
// of e's store's log).
func NewMetrics(e *nodeipam.Engine, extra ...prometheus.Collector) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ipam_node_call_duration_seconds",
			Help:    "Latency of the node API's calls, by method and gRPC code.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5},
		}, []string{"method", "code"}),
		stale: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ipam_node_stale_allocations_released_total",
			Help: "Allocations the cleanup released because their pod is gone or has another UID.",
		}),
		gc: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ipam_node_gc_released_total",
			Help: "Allocations CNI GC released because the runtime did not list their container interface as valid.",
		}),
	}
	m.Registry.MustRegister(m.calls, m.stale, m.gc, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&poolCollector{e: e})
	m.Registry.MustRegister(extra...)
	return m
}

func (m *Metrics) observeCall(method string, c codes.Code, d time.Duration) {
	if m != nil {
		m.calls.WithLabelValues(method, c.String()).Observe(d.Seconds())
	}
}

func (m *Metrics) gcReleased(n int) {
	if m != nil {
		m.gc.Add(float64(n))
	}
}

func (m *Metrics) staleReleased() {
	if m != nil {
		m.stale.Inc()
	}
}

var (
	descAllocs = prometheus.NewDesc("ipam_node_allocations", "Addresses the node's containers hold, by pool.",
		[]string{"pool", "type"}, nil)
	descFree = prometheus.NewDesc("ipam_node_free_addresses", "Addresses of the node's block left to hand out, by pool.",
		[]string{"pool", "type"}, nil)
	descOutside = prometheus.NewDesc("ipam_node_allocations_outside_block",
		"Allocations the node's current block no longer holds (kept until released), by pool.", []string{"pool", "type"}, nil)
)

// poolCollector reads the engine's pools at each scrape.
type poolCollector struct{ e *nodeipam.Engine }

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descAllocs
	ch <- descFree
	ch <- descOutside
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.e.Stats() {
		l := []string{s.Pool.Name, s.Pool.Type.Kind()}
		ch <- prometheus.MustNewConstMetric(descAllocs, prometheus.GaugeValue, float64(s.Allocations), l...)
		ch <- prometheus.MustNewConstMetric(descFree, prometheus.GaugeValue, float64(s.Free), l...)
		ch <- prometheus.MustNewConstMetric(descOutside, prometheus.GaugeValue, float64(s.Outside), l...)
	}
}
