package cni

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ipamnodev1 "github.com/nephio-project/ipam/api/proto/ipam/node/v1"
	nodev1 "github.com/nephio-project/ipam/api/proto/nvidia/ipam/node/v1"
)

// faultDaemon is a node API server that answers what a test tells it: it
// produces the answers and failures the real daemon (ipam-node, driven in
// the end-to-end test) cannot: malformed answers, internal errors, hangs.
type faultDaemon struct {
	nodev1.UnimplementedIPAMServiceServer
	allocate func(context.Context, *nodev1.AllocateRequest) (*nodev1.AllocateResponse, error)
	dealloc  func(context.Context, *nodev1.DeallocateRequest) (*nodev1.DeallocateResponse, error)
	check    func(context.Context, *nodev1.IsAllocatedRequest) (*nodev1.IsAllocatedResponse, error)
	got      chan *nodev1.IPAMParameters
	// node, when set, serves ipam.node.v1.NodeAllocations too; without it
	// the daemon is NVIDIA's, which answers Unimplemented.
	node *faultNode
}

// faultNode is the project's NodeAllocations service of a faultDaemon.
type faultNode struct {
	ipamnodev1.UnimplementedNodeAllocationsServer
	gc     func(context.Context, *ipamnodev1.GarbageCollectRequest) (*ipamnodev1.GarbageCollectResponse, error)
	status func(context.Context, *ipamnodev1.PoolStatusRequest) (*ipamnodev1.PoolStatusResponse, error)
	check  func(context.Context, *ipamnodev1.CheckRequest) (*ipamnodev1.CheckResponse, error)
	got    chan proto.Message
}

func (n *faultNode) GarbageCollect(ctx context.Context, r *ipamnodev1.GarbageCollectRequest) (*ipamnodev1.GarbageCollectResponse, error) {
	n.got <- r
	return n.gc(ctx, r)
}

func (n *faultNode) PoolStatus(ctx context.Context, r *ipamnodev1.PoolStatusRequest) (*ipamnodev1.PoolStatusResponse, error) {
	n.got <- r
	return n.status(ctx, r)
}

func (n *faultNode) Check(ctx context.Context, r *ipamnodev1.CheckRequest) (*ipamnodev1.CheckResponse, error) {
	n.got <- r
	return n.check(ctx, r)
}

func (d *faultDaemon) Allocate(ctx context.Context, r *nodev1.AllocateRequest) (*nodev1.AllocateResponse, error) {
	d.record(r.GetParameters())
	return d.allocate(ctx, r)
}

func (d *faultDaemon) Deallocate(ctx context.Context, r *nodev1.DeallocateRequest) (*nodev1.DeallocateResponse, error) {
	d.record(r.GetParameters())
	return d.dealloc(ctx, r)
}

func (d *faultDaemon) IsAllocated(ctx context.Context, r *nodev1.IsAllocatedRequest) (*nodev1.IsAllocatedResponse, error) {
	d.record(r.GetParameters())
	return d.check(ctx, r)
}

func (d *faultDaemon) record(p *nodev1.IPAMParameters) {
	select {
	case d.got <- p:
	default:
	}
}

// shortDir is a temp dir with a short path: unix socket paths are limited
// to 108 bytes.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "nvipam")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// serveFault serves d (and a health service in state hs) on a unix socket
// and returns its daemonSocket address.
func serveFault(t *testing.T, d *faultDaemon, hs healthpb.HealthCheckResponse_ServingStatus) string {
	t.Helper()
	sock := filepath.Join(shortDir(t), "d.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	d.got = make(chan *nodev1.IPAMParameters, 1)
	nodev1.RegisterIPAMServiceServer(srv, d)
	if d.node != nil {
		d.node.got = make(chan proto.Message, 4)
		ipamnodev1.RegisterNodeAllocationsServer(srv, d.node)
	}
	if hs != healthpb.HealthCheckResponse_UNKNOWN {
		h := health.NewServer()
		h.SetServingStatus("", hs)
		healthpb.RegisterHealthServer(srv, h)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return "unix://" + sock
}

// cmdArgs is a call's arguments with a configuration using socket, and
// the log file it names.
func cmdArgs(t *testing.T, socket, cniVersion, ipam string) (*skel.CmdArgs, string) {
	t.Helper()
	dir := t.TempDir()
	logFile := filepath.Join(dir, "log", "nv-ipam.log")
	conf := `{"cniVersion":"` + cniVersion + `","name":"pool1","type":"bridge","ipam":{"type":"nv-ipam","confDir":"` + dir +
		`","logFile":"` + logFile + `","logLevel":"verbose","daemonSocket":"` + socket + `","daemonCallTimeoutSeconds":1`
	if ipam != "" {
		conf += "," + ipam
	}
	conf += "}}"
	return &skel.CmdArgs{ContainerID: "c1", Netns: "/var/run/netns/none", IfName: "eth0", Args: podArgs, StdinData: []byte(conf)}, logFile
}

func dualStackAnswer(context.Context, *nodev1.AllocateRequest) (*nodev1.AllocateResponse, error) {
	return &nodev1.AllocateResponse{Allocations: []*nodev1.AllocationInfo{
		{Pool: "pool-v4", Ip: "192.168.0.25/16", Gateway: "192.168.0.1", Routes: []*nodev1.Route{{Dest: "10.10.0.0/16"}, {Dest: "0.0.0.0/0"}, {Dest: "10.10.0.0/16"}}},
		{Pool: "pool-v6", Ip: "fd00::25/64"},
	}}, nil
}

// TestAddResult: the request carries the call's parameters; the result
// has the addresses, gateways and deduplicated routes, no interface, in
// the configuration's cniVersion; the log file is created with the call.
func TestAddResult(t *testing.T) {
	d := &faultDaemon{allocate: dualStackAnswer}
	sock := serveFault(t, d, healthpb.HealthCheckResponse_SERVING)
	var out bytes.Buffer
	p := &Plugin{Stdout: &out}
	args, logFile := cmdArgs(t, sock, "1.0.0", `"poolName":"pool-v4,pool-v6","poolType":"ippool"`)
	args.StdinData = bytes.Replace(args.StdinData, []byte(`"name"`), []byte(`"runtimeConfig":{"deviceID":"0000:01:00.2"},"name"`), 1)
	if err := p.Add(args); err != nil {
		t.Fatalf("Add: %v", err)
	}
	got := <-d.got
	if got.GetCniContainerid() != "c1" || got.GetCniIfname() != "eth0" || got.GetPoolType() != nodev1.PoolType_POOL_TYPE_IPPOOL ||
		got.GetMetadata().GetK8SPodName() != "pod-a" || got.GetMetadata().GetK8SPodNamespace() != "ns-a" ||
		got.GetMetadata().GetK8SPodUid() != "uid-a" || got.GetMetadata().GetDeviceId() != "0000:01:00.2" || len(got.GetPools()) != 2 {
		t.Errorf("request %v", got)
	}
	var res current.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("result %s: %v", out.String(), err)
	}
	if res.CNIVersion != "1.0.0" || len(res.IPs) != 2 || res.IPs[0].Address.String() != "192.168.0.25/16" || res.IPs[0].Gateway.String() != "192.168.0.1" ||
		res.IPs[0].Interface != nil || res.IPs[1].Address.String() != "fd00::25/64" || res.IPs[1].Gateway != nil {
		t.Errorf("result %s", out.String())
	}
	if len(res.Routes) != 2 || res.Routes[0].Dst.String() != "10.10.0.0/16" || res.Routes[1].Dst.String() != "0.0.0.0/0" || res.Routes[1].GW.String() != "192.168.0.1" {
		t.Errorf("routes %s", out.String())
	}
	logData, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"cmd":"ADD"`, `"containerID":"c1"`, `"level":"VERBOSE"`, `"msg":"succeeded"`, "192.168.0.25/16"} {
		if !bytes.Contains(logData, []byte(want)) {
			t.Errorf("log has no %s:\n%s", want, logData)
		}
	}
}

// TestAddResultVersions: the result is converted to every version the
// plugin supports.
func TestAddResultVersions(t *testing.T) {
	sock := serveFault(t, &faultDaemon{allocate: dualStackAnswer}, healthpb.HealthCheckResponse_SERVING)
	for _, v := range []string{"0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		t.Run(v, func(t *testing.T) {
			var out bytes.Buffer
			args, _ := cmdArgs(t, sock, v, `"poolName":"pool-v4,pool-v6"`)
			if err := (&Plugin{Stdout: &out}).Add(args); err != nil {
				t.Fatalf("Add: %v", err)
			}
			var res struct {
				CNIVersion string `json:"cniVersion"`
			}
			if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.CNIVersion != v {
				t.Fatalf("result %s: %v", out.String(), err)
			}
			if !strings.Contains(out.String(), "192.168.0.25") || !strings.Contains(out.String(), "fd00::25") {
				t.Fatalf("result %s", out.String())
			}
		})
	}
}

// TestDaemonFaults: answers and failures only a faulty daemon produces
// become CNI errors with the documented codes, nothing on stdout.
func TestDaemonFaults(t *testing.T) {
	answer := func(a ...*nodev1.AllocationInfo) func(context.Context, *nodev1.AllocateRequest) (*nodev1.AllocateResponse, error) {
		return func(context.Context, *nodev1.AllocateRequest) (*nodev1.AllocateResponse, error) {
			return &nodev1.AllocateResponse{Allocations: a}, nil
		}
	}
	fail := func(c codes.Code, msg string) func(context.Context, *nodev1.AllocateRequest) (*nodev1.AllocateResponse, error) {
		return func(context.Context, *nodev1.AllocateRequest) (*nodev1.AllocateResponse, error) {
			return nil, status.Error(c, msg)
		}
	}
	hang := func(ctx context.Context, _ *nodev1.AllocateRequest) (*nodev1.AllocateResponse, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	tests := []struct {
		name     string
		allocate func(context.Context, *nodev1.AllocateRequest) (*nodev1.AllocateResponse, error)
		code     uint
		msgHas   string
	}{
		{"no allocation", answer(), ErrBadDaemonAnswer, "0 allocations for 1 pools"},
		{"another pool", answer(&nodev1.AllocationInfo{Pool: "other", Ip: "10.0.0.2/24"}), ErrBadDaemonAnswer, `"other"`},
		{"ip without length", answer(&nodev1.AllocationInfo{Pool: "pool1", Ip: "10.0.0.2"}), ErrBadDaemonAnswer, "address/length"},
		{"gateway of the other family", answer(&nodev1.AllocationInfo{Pool: "pool1", Ip: "10.0.0.2/24", Gateway: "fd00::1"}), ErrBadDaemonAnswer, "gateway"},
		{"routes without gateway", answer(&nodev1.AllocationInfo{Pool: "pool1", Ip: "10.0.0.2/24", Routes: []*nodev1.Route{{Dest: "0.0.0.0/0"}}}), ErrBadDaemonAnswer, "without a gateway"},
		{"bad route", answer(&nodev1.AllocationInfo{Pool: "pool1", Ip: "10.0.0.2/24", Gateway: "10.0.0.1", Routes: []*nodev1.Route{{Dest: "::/0"}}}), ErrBadDaemonAnswer, "route"},
		{"internal", fail(codes.Internal, "disk on fire"), 999, "Internal"},
		{"huge message capped", fail(codes.Internal, strings.Repeat("x", 10000)), 999, "Internal"},
		{"hangs past the timeout", hang, 11, "in time"},
		{"answer too large", answer(&nodev1.AllocationInfo{Pool: "pool1", Ip: "10.0.0.2/24", Gateway: strings.Repeat("x", 70<<10)}), ErrBadDaemonAnswer, "too large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sock := serveFault(t, &faultDaemon{allocate: tc.allocate}, healthpb.HealthCheckResponse_SERVING)
			var out bytes.Buffer
			args, _ := cmdArgs(t, sock, "1.0.0", "")
			err := (&Plugin{Stdout: &out}).Add(args)
			if err == nil {
				t.Fatalf("Add succeeded: %s", out.String())
			}
			if code := cniCode(t, err); code != tc.code || !strings.Contains(err.Error(), tc.msgHas) {
				t.Fatalf("error %d %q, want %d naming %q", code, err, tc.code, tc.msgHas)
			}
			if len(err.Error()) > 3*maxDetail {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			if out.Len() != 0 {
				t.Fatalf("stdout %q", out.String())
			}
		})
	}
}

// TestUnreachableDaemon: with nothing listening, ADD, DEL, CHECK and GC
// fail with ErrTryAgainLater (11), STATUS with 50.
func TestUnreachableDaemon(t *testing.T) {
	sock := "unix://" + filepath.Join(shortDir(t), "none.sock")
	p := &Plugin{Stdout: &bytes.Buffer{}}
	for name, fn := range map[string]func(*skel.CmdArgs) error{"ADD": p.Add, "DEL": p.Del, "CHECK": p.Check, "GC": p.GC} {
		args, _ := cmdArgs(t, sock, "1.0.0", "")
		if err := fn(args); err == nil || cniCode(t, err) != 11 || !strings.Contains(err.Error(), "unavailable") {
			t.Errorf("%s: %v, want code 11", name, err)
		}
	}
	args, _ := cmdArgs(t, sock, "1.1.0", "")
	if err := p.Status(args); err == nil || cniCode(t, err) != ErrPluginNotAvailable {
		t.Errorf("STATUS: %v, want code 50", err)
	}
}

// TestStatus: STATUS follows the daemon's health service; a daemon without
// one counts as answering.
func TestStatus(t *testing.T) {
	tests := []struct {
		health healthpb.HealthCheckResponse_ServingStatus
		code   uint
	}{
		{healthpb.HealthCheckResponse_SERVING, 0},
		{healthpb.HealthCheckResponse_NOT_SERVING, ErrPluginNotAvailable},
		{healthpb.HealthCheckResponse_UNKNOWN, 0}, // no health service registered
	}
	for _, tc := range tests {
		t.Run(tc.health.String(), func(t *testing.T) {
			sock := serveFault(t, &faultDaemon{}, tc.health)
			args, _ := cmdArgs(t, sock, "1.1.0", "")
			err := (&Plugin{}).Status(args)
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("Status: %v", err)
				}
				return
			}
			if err == nil || cniCode(t, err) != tc.code {
				t.Fatalf("Status: %v, want code %d", err, tc.code)
			}
		})
	}
}

// TestUnwritableLog: a log file that cannot be opened does not fail the
// call; the plugin says so on stderr, never on stdout.
func TestUnwritableLog(t *testing.T) {
	sock := serveFault(t, &faultDaemon{allocate: dualStackAnswer}, healthpb.HealthCheckResponse_SERVING)
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	args, _ := cmdArgs(t, sock, "1.0.0", `"poolName":"pool-v4,pool-v6"`)
	args.StdinData = bytes.Replace(args.StdinData, []byte(`"logLevel"`), []byte(`"logFile":"`+blocker+`/sub/log","logLevel"`), 1)
	var out, errOut bytes.Buffer
	if err := (&Plugin{Stdout: &out, Stderr: &errOut}).Add(args); err != nil {
		t.Fatalf("Add: %v", err)
	}
	if !json.Valid(out.Bytes()) || !strings.Contains(errOut.String(), "log file cannot be opened") {
		t.Fatalf("stdout %q stderr %q", out.String(), errOut.String())
	}
}

// TestStatusTCP: a tcp://host:port daemonSocket reaches the daemon.
func TestStatusTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	h := health.NewServer()
	healthpb.RegisterHealthServer(srv, h)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	args, _ := cmdArgs(t, "tcp://"+l.Addr().String(), "1.1.0", "")
	if err := (&Plugin{}).Status(args); err != nil {
		t.Fatalf("Status over tcp: %v", err)
	}
}

// TestLogRotation: a log file past its limit is moved to <logFile>.1 when
// the plugin starts, and the new lines go to a fresh file.
func TestLogRotation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "nv-ipam.log")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxLogFileBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	log, closeLog := OpenLog(file, "info", os.Stderr)
	log.Info("after rotation")
	closeLog()
	if st, err := os.Stat(file + ".1"); err != nil || st.Size() != maxLogFileBytes+1 {
		t.Fatalf("old log not moved: %v", err)
	}
	data, err := os.ReadFile(file)
	if err != nil || !bytes.Contains(data, []byte("after rotation")) || len(data) > 1024 {
		t.Fatalf("new log: %v %q", err, data)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 {
		t.Fatalf("log mode %v", st.Mode())
	}
}
