package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nephio-project/ipam/service/client"
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
// --etcd-ca, --etcd-cert and --etcd-key files, as every client of the
// project does (client.TLSConfig); nil when none is set.
func etcdTLS(cfg Config) (*tls.Config, error) {
	if cfg.EtcdCA == "" && cfg.EtcdCert == "" && cfg.EtcdKey == "" {
		return nil, nil
	}
	conf, err := client.TLSConfig(cfg.EtcdCA, cfg.EtcdCert, cfg.EtcdKey)
	var oe *client.OptionError
	if errors.As(err, &oe) {
		flag := "--etcd-cert/--etcd-key"
		if oe.Option == client.OptCA {
			flag = "--etcd-ca"
		}
		return nil, fmt.Errorf("store etcd: %s: %w", flag, oe.Err)
	}
	return conf, err
}
