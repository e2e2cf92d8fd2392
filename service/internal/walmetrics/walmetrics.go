// Package walmetrics exports the file store's log as Prometheus
// histograms: the latency of its fsyncs and the size of its group commits.
// ipam-server and ipam-node both serve them; the log itself stays free of
// Prometheus and feeds them through the OnFsync and OnCommit hooks of
// file.Options, which ObserveFsync and ObserveCommit fit.
package walmetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Histograms are the histograms one file store's log feeds.
type Histograms struct{ fsync, records, bytes prometheus.Histogram }

// New makes the histograms, to be fed by a store's hooks and registered
// with Collectors.
func New() *Histograms {
	return &Histograms{
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ipam_wal_fsync_duration_seconds",
			Help:    "Latency of the fsyncs of the file store's log: what each group commit waits for.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}), // 1 ms to 8 s, as etcd's wal_fsync_duration_seconds
		records: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ipam_wal_batch_records",
			Help:    "Records written by each group commit of the file store's log, with one fsync.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 13)}), // 1 to 4096
		bytes: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ipam_wal_batch_bytes",
			Help:    "Bytes written by each group commit of the file store's log.",
			Buckets: prometheus.ExponentialBuckets(256, 4, 10)}), // 256 B to 64 MiB
	}
}

// ObserveFsync records the latency of one fsync of the log.
func (h *Histograms) ObserveFsync(d time.Duration) { h.fsync.Observe(d.Seconds()) }

// ObserveCommit records the size of one group commit of the log.
func (h *Histograms) ObserveCommit(records, bytes int) {
	h.records.Observe(float64(records))
	h.bytes.Observe(float64(bytes))
}

// Collectors are the histograms, to register.
func (h *Histograms) Collectors() []prometheus.Collector {
	return []prometheus.Collector{h.fsync, h.records, h.bytes}
}
