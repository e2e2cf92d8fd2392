package cni

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	nodev1 "github.com/nephio-project/ipam/api/proto/nvidia/ipam/node/v1"
)

// Defaults of the keys the network configuration and the conf file may set.
const (
	// PluginType is the value of the ipam object's "type".
	PluginType = "nv-ipam"
	// ConfFileName is the file in confDir the node daemon writes.
	ConfFileName = "nv-ipam.conf"
	// DefaultConfDir is where the plugin looks for ConfFileName.
	DefaultConfDir = "/etc/cni/net.d/nv-ipam.d"
	// DefaultDaemonSocket is the node daemon's address.
	DefaultDaemonSocket = "unix:///var/lib/cni/nv-ipam/daemon.sock"
	// DefaultDaemonCallTimeoutSeconds bounds every call to the daemon.
	DefaultDaemonCallTimeoutSeconds = 5
	// DefaultLogFile is where the plugin logs.
	DefaultLogFile = "/var/log/nv-ipam-cni.log"
	// DefaultLogLevel is the level the plugin logs at.
	DefaultLogLevel = "info"
	// PoolTypeIPPool names an IPPool (the default).
	PoolTypeIPPool = "ippool"
	// PoolTypeCIDRPool names a CIDRPool.
	PoolTypeCIDRPool = "cidrpool"
)

// Limits on what the plugin reads.
const (
	// MaxConfigBytes caps the network configuration on stdin.
	MaxConfigBytes = 1 << 20
	// MaxConfFileBytes caps <confDir>/nv-ipam.conf.
	MaxConfFileBytes = 64 << 10
	// MaxPools is the number of pools one call may name (dual stack).
	MaxPools = 2
	// MaxDaemonCallTimeoutSeconds caps daemonCallTimeoutSeconds.
	MaxDaemonCallTimeoutSeconds = 300
	// maxPathLen caps confDir and logFile.
	maxPathLen = 4096
	// maxSocketLen caps daemonSocket.
	maxSocketLen = 1024
)

// logLevels are the accepted logLevel values, NVIDIA's names.
var logLevels = []string{"verbose", "debug", "info", "warning", "error", "panic"}

// unsupportedIPAMKeys are keys of other IPAM plugins (host-local, static,
// whereabouts) that nv-ipam does not honour: a configuration naming one
// would otherwise silently get something else than it asks for. Other
// unknown keys are ignored, as NVIDIA's plugin does.
var unsupportedIPAMKeys = map[string]string{
	"subnet":     "the subnet is the pool's spec.subnet",
	"rangeStart": "the node's block comes from the pool",
	"rangeEnd":   "the node's block comes from the pool",
	"range":      "the node's block comes from the pool",
	"ranges":     "the node's block comes from the pool",
	"gateway":    "the gateway is the pool's spec.gateway",
	"routes":     "routes are the pool's spec.routes",
	"addresses":  "request addresses with runtimeConfig ips, args.cni.ips or CNI_ARGS IP",
	"dns":        "nv-ipam returns no DNS settings",
	"dataDir":    "the node daemon owns the allocations",
	"exclude":    "exclusions are the pool's spec.exclusions",
}

// IPAMConf is the ipam object of the network configuration, and the content
// of <confDir>/nv-ipam.conf.
type IPAMConf struct {
	// Type must be "nv-ipam" (not read from the conf file).
	Type string `json:"type,omitempty"`
	// PoolName is one pool, or two separated by a comma (dual stack).
	PoolName string `json:"poolName,omitempty"`
	// PoolType is "ippool" or "cidrpool", in any case.
	PoolType string `json:"poolType,omitempty"`
	// DaemonSocket is the daemon's address, unix:///path or tcp://host:port.
	DaemonSocket string `json:"daemonSocket,omitempty"`
	// DaemonCallTimeoutSeconds bounds every call to the daemon.
	DaemonCallTimeoutSeconds int `json:"daemonCallTimeoutSeconds,omitempty"`
	// ConfDir is where ConfFileName is read from.
	ConfDir string `json:"confDir,omitempty"`
	// LogFile is the plugin's log file.
	LogFile string `json:"logFile,omitempty"`
	// LogLevel is one of verbose, debug, info, warning, error, panic.
	LogLevel string `json:"logLevel,omitempty"`
	// ForcePoolName, when true, requires poolName: the network's name is
	// not used as the pool's.
	ForcePoolName *bool `json:"forcePoolName,omitempty"`
}

// overlay sets the fields of c that are empty from from.
func (c *IPAMConf) overlay(from *IPAMConf) {
	set := func(to *string, v string) {
		if *to == "" {
			*to = v
		}
	}
	set(&c.PoolName, from.PoolName)
	set(&c.PoolType, from.PoolType)
	set(&c.DaemonSocket, from.DaemonSocket)
	set(&c.ConfDir, from.ConfDir)
	set(&c.LogFile, from.LogFile)
	set(&c.LogLevel, from.LogLevel)
	if c.DaemonCallTimeoutSeconds == 0 {
		c.DaemonCallTimeoutSeconds = from.DaemonCallTimeoutSeconds
	}
	if c.ForcePoolName == nil {
		c.ForcePoolName = from.ForcePoolName
	}
}

// cniArgs are the network configuration's args.cni: NVIDIA's per-call
// requests, set by Multus from the pod's network selection.
type cniArgs struct {
	IPs                    []string `json:"ips"`
	PoolNames              []string `json:"poolNames"`
	PoolType               string   `json:"poolType"`
	AllocateDefaultGateway bool     `json:"allocateDefaultGateway"`
	AllocateIPWithIndex    *int32   `json:"allocateIPWithIndex"`
}

// netConf is the part of the network configuration the plugin reads.
type netConf struct {
	CNIVersion string          `json:"cniVersion"`
	Name       string          `json:"name"`
	IPAM       json.RawMessage `json:"ipam"`
	DeviceID   string          `json:"deviceID"`
	// RuntimeConfig holds the runtime's capability arguments.
	RuntimeConfig struct {
		IPs      []string `json:"ips"`
		DeviceID string   `json:"deviceID"`
	} `json:"runtimeConfig"`
	Args *struct {
		CNI *cniArgs `json:"cni"`
	} `json:"args"`
}

// Config is a loaded and checked configuration: everything a command needs.
type Config struct {
	// CNIVersion is the network configuration's cniVersion: the result's.
	CNIVersion string
	// Name is the network's name.
	Name string
	// IPAM is the merged ipam configuration (network over file over
	// defaults).
	IPAM IPAMConf
	// Pools are the pool names, one or two.
	Pools []string
	// PoolType is PoolTypeIPPool or PoolTypeCIDRPool.
	PoolType string
	// RequestedIPs are the addresses asked for exactly.
	RequestedIPs []netip.Addr
	// Pod names the pod (from CNI_ARGS).
	Pod PodArgs
	// DeviceID is the interface's PCI device, when the runtime gives one.
	DeviceID string
	// AllocateDefaultGateway asks for the pool's gateway address itself.
	AllocateDefaultGateway bool
	// AllocateIPWithIndex asks for the address at that offset of the
	// node's block.
	AllocateIPWithIndex *int32
}

// PoolTypeProto is PoolType in the node API's form.
func (c *Config) PoolTypeProto() nodev1.PoolType {
	if c.PoolType == PoolTypeCIDRPool {
		return nodev1.PoolType_POOL_TYPE_CIDRPOOL
	}
	return nodev1.PoolType_POOL_TYPE_IPPOOL
}

// configError is a CNI error about the network configuration.
func configError(format string, a ...any) *types.Error {
	return types.NewError(types.ErrInvalidNetworkConfig, capDetail(fmt.Sprintf(format, a...)), "")
}

// LoadConfig reads the network configuration stdin (the runtime's stdin),
// overlays it on <confDir>/nv-ipam.conf and the defaults, and reads the
// requested addresses and the pod from it and from cniArgs (CNI_ARGS).
// needPod says whether K8S_POD_NAME and K8S_POD_NAMESPACE must be given.
// Errors are *types.Error: ErrDecodingFailure for JSON that does not
// decode, ErrUnsupportedField for another IPAM's key,
// ErrInvalidEnvironmentVariables for CNI_ARGS, ErrInvalidNetworkConfig for
// the rest.
func LoadConfig(stdin []byte, cniArgsEnv string, needPod bool) (*Config, error) {
	if len(stdin) > MaxConfigBytes {
		return nil, configError("network configuration: %d bytes, at most %d", len(stdin), MaxConfigBytes)
	}
	var n netConf
	if err := json.Unmarshal(stdin, &n); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "network configuration: not a JSON object of the CNI form", capDetail(err.Error()))
	}
	if len(n.IPAM) == 0 || bytes.Equal(n.IPAM, []byte("null")) {
		return nil, configError("network configuration: the ipam object is missing")
	}
	var ipam IPAMConf
	if err := json.Unmarshal(n.IPAM, &ipam); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "network configuration: ipam does not decode", capDetail(err.Error()))
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(n.IPAM, &keys); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "network configuration: ipam is not an object", capDetail(err.Error()))
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if why, bad := unsupportedIPAMKeys[k]; bad {
			return nil, types.NewError(types.ErrUnsupportedField,
				capDetail(fmt.Sprintf("ipam.%s: %s is not supported by nv-ipam", k, string(keys[k]))), why)
		}
	}
	if ipam.Type != PluginType {
		return nil, configError("ipam.type: %q, want %q", ipam.Type, PluginType)
	}

	if ipam.ConfDir == "" {
		ipam.ConfDir = DefaultConfDir
	}
	if err := checkPath("ipam.confDir", ipam.ConfDir); err != nil {
		return nil, err
	}
	file, err := readConfFile(filepath.Join(ipam.ConfDir, ConfFileName))
	if err != nil {
		return nil, err
	}
	if file != nil {
		ipam.overlay(file)
	}
	ipam.overlay(&IPAMConf{
		PoolType:                 PoolTypeIPPool,
		DaemonSocket:             DefaultDaemonSocket,
		DaemonCallTimeoutSeconds: DefaultDaemonCallTimeoutSeconds,
		LogFile:                  DefaultLogFile,
		LogLevel:                 DefaultLogLevel,
		ForcePoolName:            new(bool),
	})
	if err := checkIPAM(&ipam); err != nil {
		return nil, err
	}

	c := &Config{CNIVersion: n.CNIVersion, Name: n.Name, IPAM: ipam, DeviceID: n.RuntimeConfig.DeviceID}
	if c.CNIVersion == "" {
		// A configuration without cniVersion is 0.1.0, as skel reads it.
		c.CNIVersion = "0.1.0"
	}
	if c.DeviceID == "" {
		c.DeviceID = n.DeviceID
	}
	if len(c.DeviceID) > validation.DNS1123SubdomainMaxLength {
		return nil, configError("deviceID: %d characters, at most %d", len(c.DeviceID), validation.DNS1123SubdomainMaxLength)
	}
	var args cniArgs
	if n.Args != nil && n.Args.CNI != nil {
		args = *n.Args.CNI
	}
	if c.Pools, err = pools(&n, &ipam, &args); err != nil {
		return nil, err
	}
	c.PoolType = strings.ToLower(ipam.PoolType)
	if args.PoolType != "" {
		c.PoolType = strings.ToLower(args.PoolType)
	}
	if c.PoolType != PoolTypeIPPool && c.PoolType != PoolTypeCIDRPool {
		return nil, configError("poolType: %q, want %s or %s", c.PoolType, PoolTypeIPPool, PoolTypeCIDRPool)
	}

	env, err := ParseCNIArgs(cniArgsEnv)
	if err != nil {
		return nil, err
	}
	if needPod {
		if env.Name == "" {
			return nil, types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_ARGS: K8S_POD_NAME is missing: the runtime must name the pod", "")
		}
		if env.Namespace == "" {
			return nil, types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_ARGS: K8S_POD_NAMESPACE is missing: the runtime must name the pod", "")
		}
	}
	c.Pod = env.PodArgs

	// Requested addresses: runtimeConfig ips, else args.cni.ips, else
	// CNI_ARGS IP.
	requested, source := n.RuntimeConfig.IPs, "runtimeConfig.ips"
	if len(requested) == 0 {
		requested, source = args.IPs, "args.cni.ips"
	}
	if len(requested) == 0 && env.IP != "" {
		requested, source = []string{env.IP}, "CNI_ARGS IP"
	}
	if len(requested) > len(c.Pools) {
		return nil, configError("%s: %d addresses for %d pools, at most one per pool", source, len(requested), len(c.Pools))
	}
	for i, s := range requested {
		a, err := parseRequestedIP(s)
		if err != nil {
			return nil, configError("%s[%d]: %q is not an IP address", source, i, s)
		}
		c.RequestedIPs = append(c.RequestedIPs, a)
	}

	c.AllocateDefaultGateway = args.AllocateDefaultGateway
	c.AllocateIPWithIndex = args.AllocateIPWithIndex
	if c.AllocateIPWithIndex != nil && *c.AllocateIPWithIndex < 0 {
		return nil, configError("args.cni.allocateIPWithIndex: %d is negative", *c.AllocateIPWithIndex)
	}
	if c.AllocateDefaultGateway && len(c.RequestedIPs) > 0 {
		return nil, configError("args.cni.allocateDefaultGateway cannot be used with requested addresses (%s)", source)
	}
	if c.AllocateDefaultGateway && c.AllocateIPWithIndex != nil {
		return nil, configError("args.cni.allocateDefaultGateway cannot be used with args.cni.allocateIPWithIndex")
	}
	if c.AllocateIPWithIndex != nil && len(c.RequestedIPs) > 0 {
		return nil, configError("args.cni.allocateIPWithIndex cannot be used with requested addresses (%s)", source)
	}
	return c, nil
}

// readConfFile reads path, nil when it does not exist.
func readConfFile(path string) (*IPAMConf, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, types.NewError(types.ErrIOFailure, "conf file "+path+": cannot be opened", capDetail(err.Error()))
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfFileBytes+1))
	if err != nil {
		return nil, types.NewError(types.ErrIOFailure, "conf file "+path+": cannot be read", capDetail(err.Error()))
	}
	if len(data) > MaxConfFileBytes {
		return nil, configError("conf file %s: more than %d bytes", path, MaxConfFileBytes)
	}
	var c IPAMConf
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "conf file "+path+": not a JSON object of nv-ipam keys", capDetail(err.Error()))
	}
	return &c, nil
}

// checkPath checks a file or directory setting.
func checkPath(field, p string) error {
	if len(p) > maxPathLen {
		return configError("%s: %d characters, at most %d", field, len(p), maxPathLen)
	}
	if strings.ContainsRune(p, 0) {
		return configError("%s: contains a NUL byte", field)
	}
	return nil
}

// checkIPAM checks the merged settings.
func checkIPAM(c *IPAMConf) error {
	if err := checkPath("ipam.logFile", c.LogFile); err != nil {
		return err
	}
	if !slices.Contains(logLevels, strings.ToLower(c.LogLevel)) {
		return configError("ipam.logLevel: %q, want one of %s", c.LogLevel, strings.Join(logLevels, ", "))
	}
	if c.DaemonCallTimeoutSeconds < 0 || c.DaemonCallTimeoutSeconds > MaxDaemonCallTimeoutSeconds {
		return configError("ipam.daemonCallTimeoutSeconds: %d, want 1 to %d", c.DaemonCallTimeoutSeconds, MaxDaemonCallTimeoutSeconds)
	}
	if _, err := DialTarget(c.DaemonSocket); err != nil {
		return configError("ipam.daemonSocket: %v", err)
	}
	return nil
}

// pools returns the pool names: args.cni.poolNames, else ipam.poolName
// split at commas, else (unless forcePoolName) the network's name.
func pools(n *netConf, ipam *IPAMConf, args *cniArgs) ([]string, error) {
	var names []string
	field := "ipam.poolName"
	switch {
	case len(args.PoolNames) > 0:
		names, field = args.PoolNames, "args.cni.poolNames"
	case ipam.PoolName != "":
		names = strings.Split(ipam.PoolName, ",")
		for i := range names {
			names[i] = strings.TrimSpace(names[i])
		}
	case !*ipam.ForcePoolName:
		names, field = []string{n.Name}, "name (the network's name is the pool's: ipam.poolName is not set)"
	default:
		return nil, configError("ipam.poolName: missing, and forcePoolName is set")
	}
	if len(names) > MaxPools {
		return nil, configError("%s: %d pools, at most %d (one IPv4 and one IPv6 pool)", field, len(names), MaxPools)
	}
	for i, p := range names {
		if p == "" {
			return nil, configError("%s: pool %d is empty", field, i)
		}
		if errs := validation.IsDNS1123Subdomain(p); len(errs) > 0 {
			return nil, configError("%s: %q is not a pool name: %s", field, p, strings.Join(errs, "; "))
		}
	}
	if len(names) == 2 && names[0] == names[1] {
		return nil, configError("%s: pool %q is named twice", field, names[0])
	}
	return names, nil
}

// parseRequestedIP reads an address, with or without a prefix length.
func parseRequestedIP(s string) (netip.Addr, error) {
	s, _, _ = strings.Cut(s, "/")
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, err
	}
	if a.Zone() != "" {
		return netip.Addr{}, errors.New("zoned address")
	}
	return a.Unmap(), nil
}

// maxDetail caps the length of error messages and details the plugin
// prints, whatever the daemon or the input held.
const maxDetail = 512

// capDetail shortens s to maxDetail bytes.
func capDetail(s string) string {
	if len(s) <= maxDetail {
		return s
	}
	cut := maxDetail
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
