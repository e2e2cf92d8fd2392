package server

import (
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/codes"

	"github.com/nephio-project/ipam/service/internal/walmetrics"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/store/etcd"
)

// Metrics are the server's Prometheus metrics, in a registry of their own:
//
//	ipam_rpc_duration_seconds{method,code}      histogram of gRPC call latency
//	ipam_sync_items_total                       objects received in Sync requests
//	ipam_allocations{network_instance}          allocations held, computed on scrape
//	ipam_prefix_free_addresses{network_instance,prefix,kind,name}
//	                                            free addresses of every prefix of the tree, computed on scrape
//	ipam_prefix_used_addresses{...}             used addresses of every prefix (same labels)
//	ipam_prefix_size_addresses{...}             addresses of every prefix (same labels), so that a
//	                                            utilization alert is used / size
//	ipam_watchers                               open Watch streams
//	ipam_write_forwards_total{outcome}          changes this replica sent to the replica holding the
//	                                            write lead (--store etcd): outcome "forwarded", or
//	                                            "committed_here" when the leader was unavailable
//	ipam_etcd_transactions_total                etcd transactions this replica committed (--store etcd;
//	                                            each carries the changes grouped while the one before
//	                                            was in flight)
//	ipam_etcd_transaction_changes_total         changes those transactions carried
//	ipam_etcd_transaction_seconds_total         time those transactions took
//	ipam_wal_fsync_duration_seconds             histogram of the latency of the fsyncs of the log
//	                                            (--store file), as etcd's wal_fsync_duration_seconds
//	ipam_wal_batch_records                      histogram of the records each group commit of the log
//	                                            wrote with one fsync (--store file)
//	ipam_wal_batch_bytes                        histogram of the bytes each group commit wrote (--store file)
//	ipam_inflight_request_bytes                 memory charged to the requests in flight (see
//	                                            RequestMemoryFactor)
//	ipam_inflight_request_bytes_limit           the budget of that memory (--max-inflight-bytes)
//	ipam_requests_refused_busy_total            requests refused ResourceExhausted for want of room
//	                                            in the budget
//
// plus the standard Go runtime and process collectors.
type Metrics struct {
	Registry  *prometheus.Registry
	rpc       *prometheus.HistogramVec
	syncItems prometheus.Counter
	forwards  *prometheus.CounterVec
}

// NewMetrics registers the server's metrics; the allocation and prefix
// gauges are read from a on every scrape, the watcher count from hub.
func NewMetrics(a *ipam.Allocator, hub *Hub) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		rpc: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ipam_rpc_duration_seconds",
			Help:    "Latency of gRPC calls by method and status code.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method", "code"}),
		syncItems: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ipam_sync_items_total",
			Help: "Objects received in Sync requests.",
		}),
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ipam_write_forwards_total",
			Help: "Changes sent to the replica holding the write lead, by outcome (forwarded, committed_here).",
		}, []string{"outcome"}),
	}
	m.Registry.MustRegister(m.rpc, m.syncItems, m.forwards, &stateCollector{a: a},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ipam_watchers", Help: "Open Watch streams."},
			func() float64 { return float64(hub.Watchers()) }),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// commitStatser is a store that commits changes in group transactions
// (etcd).
type commitStatser interface{ CommitStats() etcd.CommitStats }

// watchCommits exports the group-commit counters of store: their rates
// give the changes per transaction and the seconds per transaction.
func (m *Metrics) watchCommits(store commitStatser) {
	m.Registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ipam_etcd_transactions_total",
			Help: "etcd transactions this replica committed, each carrying the changes grouped meanwhile."},
			func() float64 { return float64(store.CommitStats().Transactions) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ipam_etcd_transaction_changes_total",
			Help: "Changes carried by the etcd transactions this replica committed."},
			func() float64 { return float64(store.CommitStats().Changes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ipam_etcd_transaction_seconds_total",
			Help: "Time the etcd transactions this replica committed took."},
			func() float64 { return store.CommitStats().Time.Seconds() }))
}

// walStore is a store that writes a log of its own (file).
type walStore interface{ walHistograms() *walmetrics.Histograms }

// watchWAL exports the histograms store's log feeds.
func (m *Metrics) watchWAL(store walStore) {
	m.Registry.MustRegister(store.walHistograms().Collectors()...)
}

// watchAdmission exports the memory charged to the requests in flight,
// its budget and the requests refused for want of room.
func (m *Metrics) watchAdmission(ad *admission) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ipam_inflight_request_bytes",
			Help: "Memory charged to the requests in flight: RequestMemoryFactor times their encoded size."},
			func() float64 { return float64(ad.inflight.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ipam_inflight_request_bytes_limit",
			Help: "The budget of memory charged to the requests in flight (--max-inflight-bytes; negative: none)."},
			func() float64 { return float64(ad.limit) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ipam_requests_refused_busy_total",
			Help: "Requests refused ResourceExhausted because the memory budget of requests in flight had no room."},
			func() float64 { return float64(ad.refused.Load()) }))
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// rpcLatency returns the latency histograms of one gRPC method, named by
// its full name (/package.Service/Method).
func (m *Metrics) rpcLatency(fullMethod string) *rpcLatency {
	return &rpcLatency{vec: m.rpc, method: fullMethod[strings.LastIndexByte(fullMethod, '/')+1:]}
}

// rpcLatency observes the latency of one method's calls by status code.
// Each code's series is looked up in the vector on its first call only
// (and so, as with WithLabelValues per call, exported once observed).
type rpcLatency struct {
	vec    *prometheus.HistogramVec
	method string
	byCode [codes.Unauthenticated + 1]atomic.Pointer[prometheus.Observer]
}

// observe records the latency of one call that ended with code.
func (l *rpcLatency) observe(code codes.Code, d time.Duration) {
	if int(code) >= len(l.byCode) {
		l.vec.WithLabelValues(l.method, code.String()).Observe(d.Seconds())
		return
	}
	o := l.byCode[code].Load()
	if o == nil {
		h := l.vec.WithLabelValues(l.method, code.String())
		o = &h
		l.byCode[code].Store(o)
	}
	(*o).Observe(d.Seconds())
}

// stateCollector computes the allocation and prefix gauges from the core
// on each scrape.
type stateCollector struct{ a *ipam.Allocator }

var (
	allocationsDesc = prometheus.NewDesc("ipam_allocations", "Allocations held, by network instance.",
		[]string{"network_instance"}, nil)
	prefixLabels = []string{"network_instance", "prefix", "kind", "name"}
	freeDesc     = prometheus.NewDesc("ipam_prefix_free_addresses", "Free addresses of each prefix of a network instance's tree.", prefixLabels, nil)
	usedDesc     = prometheus.NewDesc("ipam_prefix_used_addresses", "Used addresses of each prefix of a network instance's tree.", prefixLabels, nil)
	sizeDesc     = prometheus.NewDesc("ipam_prefix_size_addresses", "Addresses of each prefix of a network instance's tree (saturating at 2^64-1).", prefixLabels, nil)
)

// Describe sends the descriptors of the computed gauges.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- allocationsDesc
	ch <- freeDesc
	ch <- usedDesc
	ch <- sizeDesc
}

// Collect reads the allocations and prefix trees of every network instance.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[string]int{}
	for _, ni := range c.a.ListNetworkInstances(ipam.Filter{}) {
		counts[ni.Key.Name] = 0
	}
	for _, r := range c.a.ListAllocations(ipam.Filter{}) {
		counts[r.Result.NetworkInstance]++
	}
	for vrf, n := range counts {
		ch <- prometheus.MustNewConstMetric(allocationsDesc, prometheus.GaugeValue, float64(n), vrf)
		nodes, err := c.a.Tree(vrf)
		if err != nil {
			continue // deleted since the list
		}
		for _, n := range nodes {
			labels := []string{vrf, n.Prefix.String(), string(n.Kind), n.Name}
			ch <- prometheus.MustNewConstMetric(freeDesc, prometheus.GaugeValue, float64(n.Total-min(n.Used, n.Total)), labels...)
			ch <- prometheus.MustNewConstMetric(usedDesc, prometheus.GaugeValue, float64(n.Used), labels...)
			ch <- prometheus.MustNewConstMetric(sizeDesc, prometheus.GaugeValue, float64(n.Total), labels...)
		}
	}
}
