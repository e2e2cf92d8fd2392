// Package daemon is ipam-node, the node daemon of NVIDIA's IPAM served by
// the project's allocation core: it watches the IPPool and CIDRPool objects
// of one namespace, takes this node's block of each, serves the node API
// (nvidia.ipam.node.v1.IPAMService) to the nv-ipam CNI plugin on a unix
// socket, releases the allocations of pods that are gone, installs the
// plugin and its configuration, and serves probes and metrics.
package daemon

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"
)

// Defaults of the flags.
const (
	DefaultBindAddress            = "unix:///var/lib/cni/nv-ipam/daemon.sock"
	DefaultStoreFile              = "/var/lib/cni/nv-ipam/store"
	DefaultPoolsNamespace         = "kube-system"
	DefaultCNIBinDir              = "/opt/cni/bin"
	DefaultCNIConfDir             = "/etc/cni/net.d/nv-ipam.d"
	DefaultCNIBinFile             = "/nv-ipam"
	DefaultCNILogFile             = "/var/log/nv-ipam-cni.log"
	DefaultCNILogLevel            = "info"
	DefaultCNICallTimeout         = 5
	DefaultCleanupInterval        = 5 * time.Minute
	DefaultCleanupGrace           = 2 * time.Minute
	DefaultHealthProbeBindAddress = ":8084"
	DefaultMetricsBindAddress     = "127.0.0.1:8083"
)

// Config is everything ipam-node is told on its command line.
type Config struct {
	NodeName        string
	PoolsNamespace  string
	Kubeconfig      string
	BindAddress     string
	StoreFile       string
	CleanupInterval time.Duration
	CleanupGrace    time.Duration
	HealthProbeAddr string
	MetricsAddr     string
	LogLevel        string
	CNI             CNIConfig
}

// CNIConfig is what the daemon installs for the nv-ipam plugin.
type CNIConfig struct {
	BinDir         string
	ConfDir        string
	BinFile        string
	SkipBinCopy    bool
	SkipConfCreate bool
	DaemonSocket   string
	CallTimeout    int
	LogFile        string
	LogLevel       string
	ForcePoolName  bool
}

// RegisterFlags adds ipam-node's flags to fs, with their defaults in c.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.NodeName, "node-name", os.Getenv("NODE_NAME"), "name of this node (default: $NODE_NAME, set from the downward API)")
	fs.StringVar(&c.PoolsNamespace, "ippools-namespace", DefaultPoolsNamespace, "namespace of the IPPool and CIDRPool objects")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig file; empty: in-cluster config")
	fs.StringVar(&c.BindAddress, "bind-address", DefaultBindAddress, "address of the node API: unix:///path or tcp://host:port")
	fs.StringVar(&c.StoreFile, "store-file", DefaultStoreFile, "directory of the allocation store (a regular file there is NVIDIA's store: it is imported once)")
	fs.DurationVar(&c.CleanupInterval, "cleanup-interval", DefaultCleanupInterval, "how often allocations of pods that are gone are released")
	fs.DurationVar(&c.CleanupGrace, "cleanup-grace", DefaultCleanupGrace, "an allocation younger than this is never released by the cleanup")
	fs.StringVar(&c.HealthProbeAddr, "health-probe-bind-address", DefaultHealthProbeBindAddress, `address of /healthz and /readyz; "0" turns them off`)
	fs.StringVar(&c.MetricsAddr, "metrics-bind-address", DefaultMetricsBindAddress, `address of /metrics; "0" turns it off`)
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug (every call), info, warn or error")
	fs.StringVar(&c.CNI.BinDir, "cni-bin-dir", DefaultCNIBinDir, "directory the nv-ipam plugin is copied to")
	fs.StringVar(&c.CNI.ConfDir, "cni-conf-dir", DefaultCNIConfDir, "directory nv-ipam.conf is written to")
	fs.StringVar(&c.CNI.BinFile, "cni-nv-ipam-bin-file", DefaultCNIBinFile, "the nv-ipam plugin binary to copy")
	fs.BoolVar(&c.CNI.SkipBinCopy, "cni-skip-nv-ipam-binary-copy", false, "do not copy the nv-ipam plugin")
	fs.BoolVar(&c.CNI.SkipConfCreate, "cni-skip-nv-ipam-config-creation", false, "do not write nv-ipam.conf")
	fs.StringVar(&c.CNI.DaemonSocket, "cni-daemon-socket", DefaultBindAddress, "daemon address written to nv-ipam.conf")
	fs.IntVar(&c.CNI.CallTimeout, "cni-daemon-call-timeout", DefaultCNICallTimeout, "seconds the plugin waits for the daemon, written to nv-ipam.conf")
	fs.StringVar(&c.CNI.LogFile, "cni-log-file", DefaultCNILogFile, "the plugin's log file, written to nv-ipam.conf")
	fs.StringVar(&c.CNI.LogLevel, "cni-log-level", DefaultCNILogLevel, "the plugin's log level, written to nv-ipam.conf: verbose, debug, info, warning, error, or NVIDIA's highest level (see the README)")
	fs.BoolVar(&c.CNI.ForcePoolName, "cni-force-pool-name", false, "make the plugin require a pool name, written to nv-ipam.conf")
}

// Check refuses a configuration ipam-node cannot run with.
func (c *Config) Check() error {
	switch {
	case c.NodeName == "":
		return errors.New("--node-name (or $NODE_NAME) is required")
	case c.PoolsNamespace == "":
		return errors.New("--ippools-namespace is required")
	case c.StoreFile == "":
		return errors.New("--store-file is required")
	case c.CleanupInterval <= 0:
		return fmt.Errorf("--cleanup-interval %s: must be positive", c.CleanupInterval)
	case c.CleanupGrace < 0:
		return fmt.Errorf("--cleanup-grace %s: must not be negative", c.CleanupGrace)
	case c.CNI.CallTimeout <= 0:
		return fmt.Errorf("--cni-daemon-call-timeout %d: must be positive", c.CNI.CallTimeout)
	}
	switch c.CNI.LogLevel {
	case "verbose", "debug", "info", "warning", "error", "panic":
	default:
		return fmt.Errorf("--cni-log-level %q: one of verbose, debug, info, warning, error, panic", c.CNI.LogLevel)
	}
	if _, _, err := parseBindAddress(c.BindAddress); err != nil {
		return err
	}
	return nil
}
