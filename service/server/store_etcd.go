package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/store/etcd"
)

var (
	_ Store          = (*etcd.Store)(nil)
	_ ipam.Committer = (*etcd.Store)(nil)
	_ leaderStore    = (*etcd.Store)(nil)
	_ commitStatser  = (*etcd.Store)(nil)
)

// openEtcdStore connects to the etcd cluster of cfg.EtcdEndpoints; the
// replicas snapshot the log every cfg.SnapshotEvery entries.
func openEtcdStore(cfg Config, log *slog.Logger) (Store, error) {
	if len(cfg.EtcdEndpoints) == 0 {
		return nil, errors.New("store etcd: --etcd-endpoints is required")
	}
	tlsConf, err := etcdTLS(cfg)
	if err != nil {
		return nil, err
	}
	return etcd.Open(etcd.Options{Endpoints: cfg.EtcdEndpoints, Prefix: cfg.EtcdPrefix, TLS: tlsConf, Logger: log,
		SnapshotEvery: cfg.SnapshotEvery})
}

// etcdTLS builds the TLS configuration of the etcd client from the
// --etcd-ca, --etcd-cert and --etcd-key files; nil when none is set.
func etcdTLS(cfg Config) (*tls.Config, error) {
	if cfg.EtcdCA == "" && cfg.EtcdCert == "" && cfg.EtcdKey == "" {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.EtcdCA != "" {
		pem, err := os.ReadFile(cfg.EtcdCA)
		if err != nil {
			return nil, fmt.Errorf("store etcd: --etcd-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("store etcd: --etcd-ca %s: no certificate found", cfg.EtcdCA)
		}
		conf.RootCAs = pool
	}
	if (cfg.EtcdCert == "") != (cfg.EtcdKey == "") {
		return nil, errors.New("store etcd: --etcd-cert and --etcd-key go together")
	}
	if cfg.EtcdCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.EtcdCert, cfg.EtcdKey)
		if err != nil {
			return nil, fmt.Errorf("store etcd: client certificate: %w", err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}
