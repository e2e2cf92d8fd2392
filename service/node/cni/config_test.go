package cni

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

const podArgs = "IgnoreUnknown=1;K8S_POD_NAME=pod-a;K8S_POD_NAMESPACE=ns-a;K8S_POD_UID=uid-a"

// netConfJSON is a network configuration with ipam (a JSON object's body)
// and extra top-level keys, whose confDir is dir.
func netConfJSON(dir, ipam, extra string) string {
	s := `{"cniVersion":"1.0.0","name":"pool1","type":"bridge",` + extra
	if extra != "" {
		s += ","
	}
	s += `"ipam":{"type":"nv-ipam","confDir":"` + dir + `"`
	if ipam != "" {
		s += "," + ipam
	}
	return s + "}}"
}

// cniCode returns err's CNI code, failing when err is not a non-nil
// *types.Error.
func cniCode(t testing.TB, err error) uint {
	t.Helper()
	var e *types.Error
	if !errors.As(err, &e) || e == nil {
		t.Fatalf("error %#v is not a *types.Error", err)
	}
	if e.Msg == "" {
		t.Fatalf("error %#v has no message", e)
	}
	return e.Code
}

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name    string
		ipam    string // the ipam object's keys besides type and confDir
		extra   string // top-level keys
		file    string // <confDir>/nv-ipam.conf, none when empty
		args    string // CNI_ARGS
		noPod   bool   // needPod false
		code    uint   // the CNI error code, 0: success
		errHas  string // part of the error's message
		check   func(t *testing.T, c *Config)
		rawConf string // the whole configuration instead of netConfJSON
	}{
		{name: "defaults, the network's name is the pool's", args: podArgs, check: func(t *testing.T, c *Config) {
			if !slices.Equal(c.Pools, []string{"pool1"}) || c.PoolType != PoolTypeIPPool {
				t.Errorf("pools %v type %s", c.Pools, c.PoolType)
			}
			if c.IPAM.DaemonSocket != DefaultDaemonSocket || c.IPAM.DaemonCallTimeoutSeconds != 5 ||
				c.IPAM.LogFile != DefaultLogFile || c.IPAM.LogLevel != "info" || *c.IPAM.ForcePoolName {
				t.Errorf("defaults %+v", c.IPAM)
			}
			if c.Pod != (PodArgs{Name: "pod-a", Namespace: "ns-a", UID: "uid-a"}) {
				t.Errorf("pod %+v", c.Pod)
			}
		}},
		{name: "dual stack", ipam: `"poolName":"pool-v4,pool-v6","poolType":"CIDRPool"`, args: podArgs, check: func(t *testing.T, c *Config) {
			if !slices.Equal(c.Pools, []string{"pool-v4", "pool-v6"}) || c.PoolType != PoolTypeCIDRPool {
				t.Errorf("pools %v type %s", c.Pools, c.PoolType)
			}
		}},
		{name: "spaces around pool names", ipam: `"poolName":" pool-v4 , pool-v6"`, args: podArgs, check: func(t *testing.T, c *Config) {
			if !slices.Equal(c.Pools, []string{"pool-v4", "pool-v6"}) {
				t.Errorf("pools %q", c.Pools)
			}
		}},
		{name: "no cniVersion is 0.1.0", rawConf: `{"name":"pool1","ipam":{"type":"nv-ipam","confDir":"/nonexistent"}}`, args: podArgs, check: func(t *testing.T, c *Config) {
			if c.CNIVersion != "0.1.0" {
				t.Errorf("cniVersion %q", c.CNIVersion)
			}
		}},
		{name: "three pools", ipam: `"poolName":"a,b,c"`, args: podArgs, code: 7, errHas: "at most 2"},
		{name: "empty pool", ipam: `"poolName":"a,"`, args: podArgs, code: 7, errHas: "pool 1 is empty"},
		{name: "same pool twice", ipam: `"poolName":"a,a"`, args: podArgs, code: 7, errHas: "named twice"},
		{name: "bad pool name", ipam: `"poolName":"Pool A"`, args: podArgs, code: 7, errHas: "not a pool name"},
		{name: "forcePoolName without poolName", ipam: `"forcePoolName":true`, args: podArgs, code: 7, errHas: "forcePoolName"},
		{name: "forcePoolName from the file", file: `{"forcePoolName":true}`, args: podArgs, code: 7, errHas: "forcePoolName"},
		{name: "network's forcePoolName false wins over the file", ipam: `"forcePoolName":false`, file: `{"forcePoolName":true}`, args: podArgs},
		{name: "unknown poolType", ipam: `"poolType":"subnet"`, args: podArgs, code: 7, errHas: "poolType"},
		{name: "args.cni overrides pools and type", ipam: `"poolName":"x"`, extra: `"args":{"cni":{"poolNames":["p4","p6"],"poolType":"cidrpool"}}`, args: podArgs,
			check: func(t *testing.T, c *Config) {
				if !slices.Equal(c.Pools, []string{"p4", "p6"}) || c.PoolType != PoolTypeCIDRPool {
					t.Errorf("pools %v type %s", c.Pools, c.PoolType)
				}
			}},
		{name: "args without cni", extra: `"args":{"other":1}`, args: podArgs},
		{name: "args null", extra: `"args":null`, args: podArgs},
		{name: "no ipam", rawConf: `{"cniVersion":"1.0.0","name":"n"}`, args: podArgs, code: 7, errHas: "ipam object is missing"},
		{name: "ipam null", rawConf: `{"cniVersion":"1.0.0","name":"n","ipam":null}`, args: podArgs, code: 7},
		{name: "ipam a string", rawConf: `{"cniVersion":"1.0.0","name":"n","ipam":"nv-ipam"}`, args: podArgs, code: 6},
		{name: "not JSON", rawConf: `{"name":`, args: podArgs, code: 6},
		{name: "wrong type", rawConf: `{"cniVersion":"1.0.0","name":"n","ipam":{"type":"host-local"}}`, args: podArgs, code: 7, errHas: `want "nv-ipam"`},
		{name: "host-local's routes", ipam: `"routes":[{"dst":"0.0.0.0/0"}]`, args: podArgs, code: 2, errHas: "ipam.routes"},
		{name: "unknown key ignored", ipam: `"somethingElse":1`, args: podArgs},
		{name: "file under the network's keys", ipam: `"logLevel":"error"`, file: `{"daemonSocket":"tcp://127.0.0.1:9999","logLevel":"debug","daemonCallTimeoutSeconds":9}`, args: podArgs,
			check: func(t *testing.T, c *Config) {
				if c.IPAM.LogLevel != "error" || c.IPAM.DaemonSocket != "tcp://127.0.0.1:9999" || c.IPAM.DaemonCallTimeoutSeconds != 9 {
					t.Errorf("merged %+v", c.IPAM)
				}
			}},
		{name: "file not JSON", file: `daemonSocket: x`, args: podArgs, code: 7, errHas: "nv-ipam.conf"},
		{name: "file too large", file: `{"logLevel":"` + strings.Repeat("x", MaxConfFileBytes) + `"}`, args: podArgs, code: 7, errHas: "more than"},
		{name: "runtimeConfig ips first", extra: `"runtimeConfig":{"ips":["192.168.0.30/16"]},"args":{"cni":{"ips":["192.168.0.31"]}}`, args: podArgs + ";IP=192.168.0.32",
			check: func(t *testing.T, c *Config) {
				if !slices.Equal(c.RequestedIPs, []netip.Addr{netip.MustParseAddr("192.168.0.30")}) {
					t.Errorf("requested %v", c.RequestedIPs)
				}
			}},
		{name: "args.cni.ips second", extra: `"args":{"cni":{"ips":["192.168.0.31"]}}`, args: podArgs + ";IP=192.168.0.32",
			check: func(t *testing.T, c *Config) {
				if !slices.Equal(c.RequestedIPs, []netip.Addr{netip.MustParseAddr("192.168.0.31")}) {
					t.Errorf("requested %v", c.RequestedIPs)
				}
			}},
		{name: "CNI_ARGS IP last", args: podArgs + ";IP=fd00::5",
			check: func(t *testing.T, c *Config) {
				if !slices.Equal(c.RequestedIPs, []netip.Addr{netip.MustParseAddr("fd00::5")}) {
					t.Errorf("requested %v", c.RequestedIPs)
				}
			}},
		{name: "requested ip not an address", extra: `"runtimeConfig":{"ips":["300.1.1.1"]}`, args: podArgs, code: 7, errHas: "runtimeConfig.ips[0]"},
		{name: "more requested ips than pools", extra: `"runtimeConfig":{"ips":["10.0.0.1","10.0.0.2"]}`, args: podArgs, code: 7, errHas: "at most one per pool"},
		{name: "no pod name", args: "K8S_POD_NAMESPACE=ns", code: 4, errHas: "K8S_POD_NAME"},
		{name: "no pod namespace", args: "K8S_POD_NAME=p", code: 4, errHas: "K8S_POD_NAMESPACE"},
		{name: "no pod needed (GC, STATUS)", noPod: true},
		{name: "CNI_ARGS pair without =", args: podArgs + ";junk", code: 4, errHas: "KEY=VALUE"},
		{name: "CNI_ARGS key twice", args: podArgs + ";K8S_POD_NAME=other", code: 4, errHas: "twice"},
		{name: "timeout negative", ipam: `"daemonCallTimeoutSeconds":-1`, args: podArgs, code: 7, errHas: "daemonCallTimeoutSeconds"},
		{name: "timeout too long", ipam: `"daemonCallTimeoutSeconds":301`, args: podArgs, code: 7, errHas: "daemonCallTimeoutSeconds"},
		{name: "socket without scheme", ipam: `"daemonSocket":"/run/x.sock"`, args: podArgs, code: 7, errHas: "daemonSocket"},
		{name: "relative unix socket", ipam: `"daemonSocket":"unix://run/x.sock"`, args: podArgs, code: 7, errHas: "daemonSocket"},
		{name: "tcp without port", ipam: `"daemonSocket":"tcp://127.0.0.1"`, args: podArgs, code: 7, errHas: "daemonSocket"},
		{name: "log level", ipam: `"logLevel":"loud"`, args: podArgs, code: 7, errHas: "logLevel"},
		{name: "log level in capitals", ipam: `"logLevel":"DEBUG"`, args: podArgs},
		{name: "default gateway and ips", extra: `"args":{"cni":{"allocateDefaultGateway":true,"ips":["10.0.0.1"]}}`, args: podArgs, code: 7, errHas: "allocateDefaultGateway"},
		{name: "default gateway and index", extra: `"args":{"cni":{"allocateDefaultGateway":true,"allocateIPWithIndex":2}}`, args: podArgs, code: 7, errHas: "allocateIPWithIndex"},
		{name: "negative index", extra: `"args":{"cni":{"allocateIPWithIndex":-1}}`, args: podArgs, code: 7, errHas: "negative"},
		{name: "index", extra: `"args":{"cni":{"allocateIPWithIndex":3}}`, args: podArgs, check: func(t *testing.T, c *Config) {
			if c.AllocateIPWithIndex == nil || *c.AllocateIPWithIndex != 3 {
				t.Errorf("index %v", c.AllocateIPWithIndex)
			}
		}},
		{name: "device id from runtimeConfig first", extra: `"deviceID":"0000:01:00.1","runtimeConfig":{"deviceID":"0000:02:00.1"}`, args: podArgs, check: func(t *testing.T, c *Config) {
			if c.DeviceID != "0000:02:00.1" {
				t.Errorf("device %q", c.DeviceID)
			}
		}},
		{name: "device id top-level", extra: `"deviceID":"0000:01:00.1"`, args: podArgs, check: func(t *testing.T, c *Config) {
			if c.DeviceID != "0000:01:00.1" {
				t.Errorf("device %q", c.DeviceID)
			}
		}},
		{name: "huge stdin", ipam: `"x":"` + strings.Repeat("y", MaxConfigBytes) + `"`, args: podArgs, code: 7, errHas: "at most"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.file != "" {
				if err := os.WriteFile(filepath.Join(dir, ConfFileName), []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			conf := tc.rawConf
			if conf == "" {
				conf = netConfJSON(dir, tc.ipam, tc.extra)
			}
			c, err := LoadConfig([]byte(conf), tc.args, !tc.noPod)
			if tc.code != 0 {
				if err == nil {
					t.Fatalf("no error, want code %d", tc.code)
				}
				if got := cniCode(t, err); got != tc.code {
					t.Fatalf("code %d (%v), want %d", got, err, tc.code)
				}
				if !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("error %q does not name %q", err, tc.errHas)
				}
				if len(err.Error()) > 2*maxDetail+8 {
					t.Fatalf("error is %d bytes long", len(err.Error()))
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func TestDialTarget(t *testing.T) {
	tests := []struct{ in, want string }{
		{"unix:///var/lib/cni/nv-ipam/daemon.sock", "unix:///var/lib/cni/nv-ipam/daemon.sock"},
		{"tcp://127.0.0.1:9090", "passthrough:///127.0.0.1:9090"},
		{"tcp://[::1]:9090", "passthrough:///[::1]:9090"},
		{"tcp://localhost:9090/", "passthrough:///localhost:9090"},
		{"unix://relative", ""},
		{"unix:///a?b", ""},
		{"tcp://:9090", ""},
		{"tcp://h:0", ""},
		{"tcp://h:99999", ""},
		{"tcp://user@h:1", ""},
		{"http://h:1", ""},
		{"/abs/path", ""},
		{"", ""},
		{"unix:///" + strings.Repeat("a", maxSocketLen), ""},
	}
	for _, tc := range tests {
		got, err := DialTarget(tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("DialTarget(%q) = %q, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("DialTarget(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestCapDetail(t *testing.T) {
	long := strings.Repeat("é", maxDetail)
	got := capDetail(long)
	if len(got) > maxDetail+len("…") || !strings.HasSuffix(got, "…") {
		t.Fatalf("capDetail: %d bytes", len(got))
	}
	if strings.ContainsRune(strings.TrimSuffix(got, "…"), '\uFFFD') {
		t.Fatal("capDetail cut a rune")
	}
	if capDetail("short") != "short" {
		t.Fatal("capDetail changed a short string")
	}
}

// FuzzLoadConfig: any stdin and CNI_ARGS give a config or a *types.Error
// with a known code and a bounded message, never a panic.
func FuzzLoadConfig(f *testing.F) {
	dir := f.TempDir()
	f.Add([]byte(netConfJSON(dir, `"poolName":"a,b"`, `"runtimeConfig":{"ips":["10.0.0.1"]}`)), podArgs)
	f.Add([]byte(netConfJSON(dir, `"poolType":"cidrpool","daemonSocket":"tcp://h:1"`, `"args":{"cni":{"poolNames":["x"],"allocateIPWithIndex":1}}`)), podArgs+";IP=::1")
	f.Add([]byte(`{"name":"x","ipam":{"type":"nv-ipam","routes":1}}`), "")
	f.Add([]byte(`{"args":{"cni":null},"ipam":{}}`), "K8S_POD_NAME")
	f.Add([]byte(`[]`), ";;=")
	known := []uint{2, 4, 5, 6, 7}
	f.Fuzz(func(t *testing.T, stdin []byte, args string) {
		c, err := LoadConfig(stdin, args, true)
		if err != nil {
			if code := cniCode(t, err); !slices.Contains(known, code) {
				t.Fatalf("code %d: %v", code, err)
			}
			if len(err.Error()) > 4*maxDetail {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			return
		}
		if len(c.Pools) == 0 || len(c.Pools) > MaxPools || len(c.RequestedIPs) > len(c.Pools) {
			t.Fatalf("config %+v", c)
		}
		if c.Pod.Name == "" || c.Pod.Namespace == "" {
			t.Fatalf("no pod in %+v", c)
		}
		if _, err := DialTarget(c.IPAM.DaemonSocket); err != nil {
			t.Fatalf("socket %q: %v", c.IPAM.DaemonSocket, err)
		}
	})
}
