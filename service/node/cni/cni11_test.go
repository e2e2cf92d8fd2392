package cni

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	ipamnodev1 "github.com/nephio-project/ipam/api/proto/ipam/node/v1"
	nodev1 "github.com/nephio-project/ipam/api/proto/nvidia/ipam/node/v1"
)

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGC: GC sends the network's pools and its valid attachments to the
// daemon's GarbageCollect; a daemon without it (NVIDIA's) fails the GC
// with ErrDaemonLacksCall, saying so.
func TestGC(t *testing.T) {
	node := &faultNode{gc: func(context.Context, *ipamnodev1.GarbageCollectRequest) (*ipamnodev1.GarbageCollectResponse, error) {
		return &ipamnodev1.GarbageCollectResponse{Released: []*ipamnodev1.Released{{Pool: "pool1", Ip: "192.168.0.26/16", Attachment: &ipamnodev1.Attachment{ContainerId: "gone", Ifname: "eth0"}}}}, nil
	}}
	sock := serveFault(t, &faultDaemon{node: node}, healthpb.HealthCheckResponse_SERVING)
	args, logFile := cmdArgs(t, sock, "1.1.0", `"poolName":"pool1","poolType":"CIDRPool"`)
	args.StdinData = bytes.Replace(args.StdinData, []byte(`"name"`),
		[]byte(`"cni.dev/valid-attachments":[{"containerID":"c1","ifname":"eth0"},{"containerID":"c2","ifname":"net1"}],"name"`), 1)
	if err := (&Plugin{}).GC(args); err != nil {
		t.Fatalf("GC: %v", err)
	}
	got := (<-node.got).(*ipamnodev1.GarbageCollectRequest)
	if got.GetPoolType() != nodev1.PoolType_POOL_TYPE_CIDRPOOL || len(got.GetPools()) != 1 || got.GetPools()[0] != "pool1" ||
		len(got.GetValidAttachments()) != 2 || got.GetValidAttachments()[1].GetContainerId() != "c2" || got.GetValidAttachments()[1].GetIfname() != "net1" {
		t.Fatalf("request %v", got)
	}
	if log := readFile(t, logFile); !strings.Contains(log, "192.168.0.26/16 eth0/gone") {
		t.Errorf("the log does not name what was released:\n%s", log)
	}

	sock = serveFault(t, &faultDaemon{}, healthpb.HealthCheckResponse_SERVING)
	args, _ = cmdArgs(t, sock, "1.1.0", "")
	err := (&Plugin{}).GC(args)
	if err == nil || cniCode(t, err) != ErrDaemonLacksCall || !strings.Contains(err.Error(), "nothing was released") {
		t.Fatalf("GC against NVIDIA's daemon: %v, want code %d", err, ErrDaemonLacksCall)
	}
}

// TestStatusPools: STATUS is not ready (50) when the node holds no block
// of a pool of the network, ready when it holds them all, and ready when
// the daemon cannot say (NVIDIA's).
func TestStatusPools(t *testing.T) {
	answer := func(ready bool) *faultNode {
		return &faultNode{status: func(_ context.Context, r *ipamnodev1.PoolStatusRequest) (*ipamnodev1.PoolStatusResponse, error) {
			out := &ipamnodev1.PoolStatusResponse{}
			for _, p := range r.GetPools() {
				out.Pools = append(out.Pools, &ipamnodev1.PoolState{Pool: p, Ready: ready || p == "pool-v4", Reason: "IPPool \"" + p + "\": this node holds no block of the pool (yet)"})
			}
			return out, nil
		}}
	}
	for _, tc := range []struct {
		name string
		node *faultNode
		code uint
	}{
		{"every pool has a block", answer(true), 0},
		{"one pool has none", answer(false), ErrPluginNotAvailable},
		{"NVIDIA's daemon", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := serveFault(t, &faultDaemon{node: tc.node}, healthpb.HealthCheckResponse_SERVING)
			args, _ := cmdArgs(t, sock, "1.1.0", `"poolName":"pool-v4,pool-v6"`)
			err := (&Plugin{}).Status(args)
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("Status: %v", err)
				}
				return
			}
			if err == nil || cniCode(t, err) != tc.code || !strings.Contains(err.Error(), `pool "pool-v6"`) || !strings.Contains(err.Error(), "no block") {
				t.Fatalf("Status: %v, want code %d naming pool-v6", err, tc.code)
			}
		})
	}
}

// TestCheckResult: CHECK sends the addresses of prevResult to the daemon's
// Check; an address outside the block is ErrAddressOutsideBlock (104), a
// different one ErrNoAllocation (100); NVIDIA's daemon is asked
// IsAllocated instead.
func TestCheckResult(t *testing.T) {
	const prev = `"prevResult":{"cniVersion":"1.0.0","ips":[{"address":"192.168.0.25/16","gateway":"192.168.0.1","interface":0}],"interfaces":[{"name":"eth0"}]},`
	check := func(c codes.Code) *faultNode {
		return &faultNode{check: func(context.Context, *ipamnodev1.CheckRequest) (*ipamnodev1.CheckResponse, error) {
			if c == codes.OK {
				return &ipamnodev1.CheckResponse{}, nil
			}
			return nil, status.Error(c, "IPPool \"pool1\": 192.168.0.25/16 ...")
		}}
	}
	for _, tc := range []struct {
		name string
		node *faultNode
		code uint
	}{
		{"held and inside", check(codes.OK), 0},
		{"outside the block", check(codes.FailedPrecondition), ErrAddressOutsideBlock},
		{"another address", check(codes.NotFound), ErrNoAllocation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := serveFault(t, &faultDaemon{node: tc.node}, healthpb.HealthCheckResponse_SERVING)
			args, _ := cmdArgs(t, sock, "1.1.0", "")
			args.StdinData = bytes.Replace(args.StdinData, []byte(`"name"`), []byte(prev+`"name"`), 1)
			err := (&Plugin{}).Check(args)
			got := (<-tc.node.got).(*ipamnodev1.CheckRequest)
			if ips := got.GetParameters().GetRequestedIps(); len(ips) != 1 || ips[0] != "192.168.0.25" || got.GetParameters().GetCniContainerid() != "c1" {
				t.Fatalf("request %v", got)
			}
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil || cniCode(t, err) != tc.code {
				t.Fatalf("Check: %v, want code %d", err, tc.code)
			}
		})
	}
	t.Run("NVIDIA's daemon", func(t *testing.T) {
		d := &faultDaemon{check: func(context.Context, *nodev1.IsAllocatedRequest) (*nodev1.IsAllocatedResponse, error) {
			return &nodev1.IsAllocatedResponse{}, nil
		}}
		sock := serveFault(t, d, healthpb.HealthCheckResponse_SERVING)
		args, _ := cmdArgs(t, sock, "1.1.0", "")
		args.StdinData = bytes.Replace(args.StdinData, []byte(`"name"`), []byte(prev+`"name"`), 1)
		if err := (&Plugin{}).Check(args); err != nil {
			t.Fatalf("Check: %v", err)
		}
		if got := <-d.got; got.GetCniContainerid() != "c1" {
			t.Fatalf("IsAllocated %v", got)
		}
	})
}

// TestAddAlreadyHeld: when the daemon answers Allocate with AlreadyExists
// and the container's interface holds its addresses (NVIDIA's daemon on a
// repeated ADD), the error says this container already holds an address
// (105); when it does not, a requested address is another container's
// (101).
func TestAddAlreadyHeld(t *testing.T) {
	exists := func(context.Context, *nodev1.AllocateRequest) (*nodev1.AllocateResponse, error) {
		return nil, status.Error(codes.AlreadyExists, "allocation already exists")
	}
	for _, tc := range []struct {
		name  string
		held  bool
		code  uint
		words string
	}{
		{"this container", true, ErrContainerHoldsAddress, `container "c1" interface "eth0" already holds an address`},
		{"another container", false, ErrAddressTaken, "held by another container"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &faultDaemon{allocate: exists, check: func(context.Context, *nodev1.IsAllocatedRequest) (*nodev1.IsAllocatedResponse, error) {
				if tc.held {
					return &nodev1.IsAllocatedResponse{}, nil
				}
				return nil, status.Error(codes.NotFound, "no allocation")
			}}
			sock := serveFault(t, d, healthpb.HealthCheckResponse_SERVING)
			args, _ := cmdArgs(t, sock, "1.0.0", "")
			err := (&Plugin{Stdout: &bytes.Buffer{}}).Add(args)
			if err == nil || cniCode(t, err) != tc.code || !strings.Contains(err.Error(), tc.words) {
				t.Fatalf("Add: %v, want code %d saying %q", err, tc.code, tc.words)
			}
		})
	}
}
