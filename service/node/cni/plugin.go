// Package cni is nv-ipam, the CNI IPAM plugin of NVIDIA's IPAM: the
// container runtime runs it for ADD, DEL, CHECK, GC, STATUS and VERSION;
// it reads NVIDIA's configuration keys and asks the node daemon
// (ipam-node) over the node API (nvidia.ipam.node.v1.IPAMService) for the
// container's addresses. It keeps no state of its own.
package cni

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	ipamnodev1 "github.com/nephio-project/ipam/api/proto/ipam/node/v1"
	nodev1 "github.com/nephio-project/ipam/api/proto/nvidia/ipam/node/v1"
)

// Version is the plugin's version; the build may set it with
// -ldflags '-X github.com/nephio-project/ipam/service/node/cni.Version=...'.
var Version = ""

// Name is the plugin's binary name and its ipam "type".
const Name = PluginType

// STATUS error codes of the CNI spec.
const (
	// ErrPluginNotAvailable: the plugin cannot serve ADD.
	ErrPluginNotAvailable uint = 50
)

// Plugin runs the CNI commands. The zero value writes to the process's
// stdout and stderr.
type Plugin struct {
	// Stdout receives the result (nil: os.Stdout).
	Stdout io.Writer
	// Stderr receives log lines when the log file cannot be opened (nil:
	// os.Stderr).
	Stderr io.Writer
}

// About is the line the plugin prints on stderr when run without
// CNI_COMMAND.
func About() string {
	return fmt.Sprintf("%s CNI IPAM plugin %s (NVIDIA node API nvidia.ipam.node.v1)", Name, versionString())
}

func versionString() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return s.Value[:12]
			}
		}
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return v
		}
	}
	return "dev"
}

// Main runs the plugin as a process: it dispatches CNI_COMMAND, prints the
// result or the error JSON on stdout, and exits 1 on error.
func Main() {
	p := &Plugin{}
	skel.PluginMainFuncs(p.Funcs(), version.All, About())
}

// Funcs are the plugin's commands for skel.
func (p *Plugin) Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: p.Add, Del: p.Del, Check: p.Check, GC: p.GC, Status: p.Status}
}

func (p *Plugin) stdout() io.Writer {
	if p.Stdout == nil {
		return os.Stdout
	}
	return p.Stdout
}

func (p *Plugin) stderr() io.Writer {
	if p.Stderr == nil {
		return os.Stderr
	}
	return p.Stderr
}

// call is one command's loaded configuration and logger.
type call struct {
	cfg    *Config
	log    *slog.Logger
	closer func()
}

// start loads the configuration and opens the log.
func (p *Plugin) start(cmd string, args *skel.CmdArgs, needPod bool) (*call, error) {
	cfg, err := LoadConfig(args.StdinData, args.Args, needPod)
	if err != nil {
		return nil, err
	}
	log, closeLog := OpenLog(cfg.IPAM.LogFile, cfg.IPAM.LogLevel, p.stderr())
	log = log.With("cmd", cmd, "containerID", args.ContainerID, "ifName", args.IfName)
	log.Info("call", "netns", args.Netns, "pools", cfg.Pools, "poolType", cfg.PoolType,
		"pod", cfg.Pod.Namespace+"/"+cfg.Pod.Name, "podUID", cfg.Pod.UID)
	log.Log(context.Background(), levelVerbose, "input", "cniArgs", args.Args, "stdin", string(args.StdinData))
	return &call{cfg: cfg, log: log, closer: closeLog}, nil
}

// fail logs err and returns it.
func (c *call) fail(err *types.Error) error {
	c.log.Error("failed", "code", err.Code, "error", err.Msg, "details", err.Details)
	c.closer()
	return err
}

// done logs success.
func (c *call) done(attrs ...any) error {
	c.log.Info("succeeded", attrs...)
	c.closer()
	return nil
}

// params is the node API's request for the call.
func (c *call) params(args *skel.CmdArgs) *nodev1.IPAMParameters {
	req := &nodev1.IPAMParameters{
		Pools:          c.cfg.Pools,
		CniContainerid: args.ContainerID,
		CniIfname:      args.IfName,
		PoolType:       c.cfg.PoolTypeProto(),
		Metadata: &nodev1.IPAMMetadata{
			K8SPodName:      c.cfg.Pod.Name,
			K8SPodNamespace: c.cfg.Pod.Namespace,
			K8SPodUid:       c.cfg.Pod.UID,
			DeviceId:        c.cfg.DeviceID,
		},
		Features: &nodev1.IPAMFeatures{
			AllocateDefaultGateway: c.cfg.AllocateDefaultGateway,
			AllocateIpWithIndex:    c.cfg.AllocateIPWithIndex,
		},
	}
	for _, a := range c.cfg.RequestedIPs {
		req.RequestedIps = append(req.RequestedIps, a.String())
	}
	if req.Metadata.K8SPodUid == "" && req.Metadata.K8SPodName != "" {
		c.log.Warn("CNI_ARGS has no K8S_POD_UID: the daemon matches the pod by name only")
	}
	return req
}

// dial dials the daemon and runs fn within daemonCallTimeoutSeconds.
func (c *call) dial(fn func(context.Context, *grpc.ClientConn) error) error {
	conn, err := Dial(c.cfg.IPAM.DaemonSocket)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(c.cfg.IPAM.DaemonCallTimeoutSeconds)*time.Second)
	defer cancel()
	return fn(ctx, conn)
}

// invoke runs fn on NVIDIA's node API of the daemon.
func (c *call) invoke(fn func(context.Context, nodev1.IPAMServiceClient) error) error {
	return c.dial(func(ctx context.Context, conn *grpc.ClientConn) error {
		return fn(ctx, nodev1.NewIPAMServiceClient(conn))
	})
}

// invokeNode runs fn on the project's ipam.node.v1.NodeAllocations of the
// daemon (NVIDIA's daemon answers Unimplemented).
func (c *call) invokeNode(fn func(context.Context, ipamnodev1.NodeAllocationsClient) error) error {
	return c.dial(func(ctx context.Context, conn *grpc.ClientConn) error {
		return fn(ctx, ipamnodev1.NewNodeAllocationsClient(conn))
	})
}

// holdsAlready tells, after Allocate answered AlreadyExists, whether the
// container's interface itself already holds what it asked for (NVIDIA's
// daemon answers a repeated ADD so) rather than another container: the
// daemon's Check when it serves one, else IsAllocated.
func (c *call) holdsAlready(args *skel.CmdArgs) bool {
	err := c.invokeNode(func(ctx context.Context, cl ipamnodev1.NodeAllocationsClient) error {
		_, err := cl.Check(ctx, &ipamnodev1.CheckRequest{Parameters: c.params(args)})
		return err
	})
	if status.Code(err) == codes.Unimplemented {
		err = c.invoke(func(ctx context.Context, cl nodev1.IPAMServiceClient) error {
			_, err := cl.IsAllocated(ctx, &nodev1.IsAllocatedRequest{Parameters: c.params(args)})
			return err
		})
	}
	return err == nil
}

// Add is CNI ADD: Allocate, and the result on stdout.
func (p *Plugin) Add(args *skel.CmdArgs) error {
	c, err := p.start("ADD", args, true)
	if err != nil {
		return err
	}
	var resp *nodev1.AllocateResponse
	if err := c.invoke(func(ctx context.Context, cl nodev1.IPAMServiceClient) (err error) {
		resp, err = cl.Allocate(ctx, &nodev1.AllocateRequest{Parameters: c.params(args)})
		return err
	}); err != nil {
		if status.Code(err) == codes.AlreadyExists && c.holdsAlready(args) {
			return c.fail(types.NewError(ErrContainerHoldsAddress, "nv-ipam: container "+quote(args.ContainerID)+" interface "+quote(args.IfName)+
				" already holds an address in the pools; the daemon hands out no second one (DEL the interface first)", capDetail(status.Convert(err).Message())))
		}
		return c.fail(daemonError("Allocate", c.cfg.IPAM.DaemonSocket, err))
	}
	res, terr := toResult(c.cfg.Pools, resp)
	if terr != nil {
		return c.fail(terr)
	}
	out, err := res.GetAsVersion(c.cfg.CNIVersion)
	if err != nil {
		return c.fail(types.NewError(types.ErrIncompatibleCNIVersion, "nv-ipam: the result cannot be written as cniVersion "+quote(c.cfg.CNIVersion), capDetail(err.Error())))
	}
	if err := out.PrintTo(p.stdout()); err != nil {
		return c.fail(types.NewError(types.ErrIOFailure, "nv-ipam: the result cannot be written to stdout", capDetail(err.Error())))
	}
	ips := make([]string, 0, len(res.IPs))
	for _, ip := range res.IPs {
		ips = append(ips, ip.Address.String())
	}
	return c.done("ips", ips)
}

// Del is CNI DEL: Deallocate. Releasing what is not held succeeds, and so
// does a pool the node holds no block of (any more). A daemon that does not
// answer fails the DEL with ErrTryAgainLater: the runtime retries it, and
// the addresses are not leaked (NVIDIA's plugin fails it too).
func (p *Plugin) Del(args *skel.CmdArgs) error {
	c, err := p.start("DEL", args, true)
	if err != nil {
		return err
	}
	if err := c.invoke(func(ctx context.Context, cl nodev1.IPAMServiceClient) error {
		_, err := cl.Deallocate(ctx, &nodev1.DeallocateRequest{Parameters: c.params(args)})
		return err
	}); err != nil {
		if status.Code(err) == codes.NotFound {
			return c.done("note", "the daemon knows no such pool: nothing to release", "details", capDetail(status.Convert(err).Message()))
		}
		return c.fail(daemonError("Deallocate", c.cfg.IPAM.DaemonSocket, err))
	}
	return c.done()
}

// Check is CNI CHECK: the daemon's Check (ipam.node.v1.NodeAllocations)
// verifies that the container's interface still holds the addresses of
// its result (prevResult), each still inside the node's block. A daemon
// that does not serve it (NVIDIA's) is asked IsAllocated instead, which
// only says whether the interface holds an address in every pool.
func (p *Plugin) Check(args *skel.CmdArgs) error {
	c, err := p.start("CHECK", args, true)
	if err != nil {
		return err
	}
	req := c.params(args)
	prev, terr := prevResultIPs(args.StdinData, len(c.cfg.Pools))
	if terr != nil {
		return c.fail(terr)
	}
	if prev != nil {
		req.RequestedIps = prev
	}
	err = c.invokeNode(func(ctx context.Context, cl ipamnodev1.NodeAllocationsClient) error {
		_, err := cl.Check(ctx, &ipamnodev1.CheckRequest{Parameters: req})
		return err
	})
	switch {
	case err == nil:
		return c.done("ips", req.RequestedIps)
	case status.Code(err) != codes.Unimplemented:
		return c.fail(daemonError("Check", c.cfg.IPAM.DaemonSocket, err))
	}
	if err := c.invoke(func(ctx context.Context, cl nodev1.IPAMServiceClient) error {
		_, err := cl.IsAllocated(ctx, &nodev1.IsAllocatedRequest{Parameters: c.params(args)})
		return err
	}); err != nil {
		return c.fail(daemonError("IsAllocated", c.cfg.IPAM.DaemonSocket, err))
	}
	return c.done("note", "the daemon serves no ipam.node.v1.NodeAllocations: only checked that the interface holds an address in every pool")
}

// GC is CNI GC (spec 1.1.0): the daemon's GarbageCollect
// (ipam.node.v1.NodeAllocations) releases every allocation the node holds
// in the network's pools whose container and interface are not among
// cni.dev/valid-attachments. A daemon that does not serve it (NVIDIA's)
// fails the GC with ErrDaemonLacksCall, nothing released.
func (p *Plugin) GC(args *skel.CmdArgs) error {
	c, err := p.start("GC", args, false)
	if err != nil {
		return err
	}
	valid, terr := validAttachments(args.StdinData)
	if terr != nil {
		return c.fail(terr)
	}
	var resp *ipamnodev1.GarbageCollectResponse
	if err := c.invokeNode(func(ctx context.Context, cl ipamnodev1.NodeAllocationsClient) (err error) {
		resp, err = cl.GarbageCollect(ctx, &ipamnodev1.GarbageCollectRequest{PoolType: c.cfg.PoolTypeProto(), Pools: c.cfg.Pools, ValidAttachments: valid},
			grpc.MaxCallRecvMsgSize(maxGCResponseBytes))
		return err
	}); err != nil {
		if status.Code(err) == codes.Unimplemented {
			return c.fail(types.NewError(ErrDaemonLacksCall, "nv-ipam: GC: the daemon at "+c.cfg.IPAM.DaemonSocket+
				" does not serve ipam.node.v1.NodeAllocations (NVIDIA's daemon?): nothing was released", capDetail(status.Convert(err).Message())))
		}
		return c.fail(daemonError("GarbageCollect", c.cfg.IPAM.DaemonSocket, err))
	}
	released := make([]string, 0, len(resp.GetReleased()))
	for _, r := range resp.GetReleased() {
		released = append(released, r.GetPool()+" "+r.GetIp()+" "+r.GetAttachment().GetIfname()+"/"+r.GetAttachment().GetContainerId())
	}
	return c.done("valid", len(valid), "released", released)
}

// Status is CNI STATUS (spec 1.1.0): success when the daemon answers a
// gRPC health check on daemonSocket (a daemon without the health service
// answers Unimplemented, which also counts), ErrPluginNotAvailable (50)
// otherwise.
func (p *Plugin) Status(args *skel.CmdArgs) error {
	c, err := p.start("STATUS", args, false)
	if err != nil {
		return err
	}
	var resp *healthpb.HealthCheckResponse
	conn, err := Dial(c.cfg.IPAM.DaemonSocket)
	if err != nil {
		return c.fail(types.NewError(ErrPluginNotAvailable, "nv-ipam: the daemon at "+c.cfg.IPAM.DaemonSocket+" cannot be dialled", capDetail(err.Error())))
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(c.cfg.IPAM.DaemonCallTimeoutSeconds)*time.Second)
	defer cancel()
	resp, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	switch {
	case status.Code(err) == codes.Unimplemented:
		return c.done("note", "the daemon answers (it serves no health service)")
	case err != nil:
		return c.fail(types.NewError(ErrPluginNotAvailable, "nv-ipam: the daemon at "+c.cfg.IPAM.DaemonSocket+" does not answer", capDetail(status.Convert(err).Message())))
	case resp.GetStatus() != healthpb.HealthCheckResponse_SERVING:
		return c.fail(types.NewError(ErrPluginNotAvailable, "nv-ipam: the daemon at "+c.cfg.IPAM.DaemonSocket+" is "+resp.GetStatus().String(), ""))
	}
	return c.poolStatus()
}

// poolStatus is STATUS's second question: does the node hold a block of
// every pool of the network? A daemon that cannot say (NVIDIA's) counts
// as ready.
func (c *call) poolStatus() error {
	var resp *ipamnodev1.PoolStatusResponse
	err := c.invokeNode(func(ctx context.Context, cl ipamnodev1.NodeAllocationsClient) (err error) {
		resp, err = cl.PoolStatus(ctx, &ipamnodev1.PoolStatusRequest{PoolType: c.cfg.PoolTypeProto(), Pools: c.cfg.Pools})
		return err
	})
	switch {
	case status.Code(err) == codes.Unimplemented:
		return c.done("note", "the daemon serves no ipam.node.v1.NodeAllocations: it cannot say whether the node holds a block of the pools")
	case err != nil:
		return c.fail(types.NewError(ErrPluginNotAvailable, "nv-ipam: the daemon at "+c.cfg.IPAM.DaemonSocket+" does not answer PoolStatus", capDetail(status.Convert(err).Message())))
	case len(resp.GetPools()) != len(c.cfg.Pools):
		return c.fail(types.NewError(ErrPluginNotAvailable, "nv-ipam: unexpected answer from the daemon", fmt.Sprintf("%d pool states for %d pools", len(resp.GetPools()), len(c.cfg.Pools))))
	}
	for i, st := range resp.GetPools() {
		if !st.GetReady() {
			return c.fail(types.NewError(ErrPluginNotAvailable, "nv-ipam: not ready: pool "+quote(c.cfg.Pools[i])+" cannot hand out addresses on this node", capDetail(st.GetReason())))
		}
	}
	return c.done("pools", c.cfg.Pools)
}
