package daemon

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	ipamnodev1 "github.com/nephio-project/ipam/api/proto/ipam/node/v1"
	nodev1 "github.com/nephio-project/ipam/api/proto/nvidia/ipam/node/v1"
	"github.com/nephio-project/ipam/service/node/nodeipam"
)

// serve starts the node API over a fresh engine on a unix socket in a
// temporary directory and returns a client connection to it.
func serve(t testing.TB) (*nodeipam.Engine, *grpc.ClientConn) {
	t.Helper()
	dir := t.TempDir()
	e, err := nodeipam.Open(filepath.Join(dir, "store"), nodeipam.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "run", "daemon.sock")
	l, err := listen("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(ServerOptions()...)
	api := NewServer(e, logr.Discard(), NewMetrics(e))
	nodev1.RegisterIPAMServiceServer(srv, api)
	ipamnodev1.RegisterNodeAllocationsServer(srv, NewAllocations(api))
	go func() { _ = srv.Serve(l) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(); srv.Stop(); _ = e.Close() })
	return e, conn
}

func seed(t testing.TB, e *nodeipam.Engine) {
	t.Helper()
	b := &nodeipam.Block{Network: netip.MustParsePrefix("192.168.0.0/16"), Start: netip.MustParseAddr("192.168.0.25"),
		End: netip.MustParseAddr("192.168.0.48"), Gateway: netip.MustParseAddr("192.168.0.1"), DefaultGateway: true}
	if _, err := e.SetPool(context.Background(), nodeipam.PoolKey{Type: nodeipam.IPPool, Name: "pool1"}, b); err != nil {
		t.Fatal(err)
	}
}

func params(cid string, pools ...string) *nodev1.IPAMParameters {
	return &nodev1.IPAMParameters{Pools: pools, CniContainerid: cid, CniIfname: "net1",
		Metadata: &nodev1.IPAMMetadata{K8SPodName: "pod", K8SPodNamespace: "default", K8SPodUid: "u1"}}
}

func TestNodeAPI(t *testing.T) {
	ctx := context.Background()
	e, conn := serve(t)
	seed(t, e)
	c := nodev1.NewIPAMServiceClient(conn)
	res, err := c.Allocate(ctx, &nodev1.AllocateRequest{Parameters: params("c1", "pool1")})
	if err != nil {
		t.Fatal(err)
	}
	a := res.GetAllocations()[0]
	if a.GetIp() != "192.168.0.25/16" || a.GetGateway() != "192.168.0.1" || a.GetPool() != "pool1" ||
		a.GetPoolType() != nodev1.PoolType_POOL_TYPE_IPPOOL || len(a.GetRoutes()) != 1 || a.GetRoutes()[0].GetDest() != "0.0.0.0/0" {
		t.Fatalf("Allocate: %v", res)
	}
	if _, err := c.IsAllocated(ctx, &nodev1.IsAllocatedRequest{Parameters: params("c1", "pool1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Deallocate(ctx, &nodev1.DeallocateRequest{Parameters: params("c1", "pool1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.IsAllocated(ctx, &nodev1.IsAllocatedRequest{Parameters: params("c1", "pool1")}); status.Code(err) != codes.NotFound {
		t.Fatalf("IsAllocated after Deallocate: %v", err)
	}
	if _, err := c.Deallocate(ctx, &nodev1.DeallocateRequest{Parameters: params("c1", "pool1")}); err != nil {
		t.Fatalf("Deallocate again: %v", err)
	}
	for _, tc := range []struct {
		name string
		p    *nodev1.IPAMParameters
		code codes.Code
	}{
		{"no parameters", nil, codes.InvalidArgument},
		{"unknown pool", params("c1", "nope"), codes.NotFound},
		{"three pools", params("c1", "a", "b", "c"), codes.InvalidArgument},
		{"duplicate pool", params("c1", "pool1", "pool1"), codes.InvalidArgument},
		{"bad pool type", func() *nodev1.IPAMParameters { p := params("c1", "pool1"); p.PoolType = 7; return p }(), codes.InvalidArgument},
		{"long ifname", func() *nodev1.IPAMParameters { p := params("c1", "pool1"); p.CniIfname = "0123456789abcdef"; return p }(), codes.InvalidArgument},
		{"no container", params("", "pool1"), codes.InvalidArgument},
		{"outside block", func() *nodev1.IPAMParameters {
			p := params("c1", "pool1")
			p.RequestedIps = []string{"192.168.0.49"}
			return p
		}(), codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Allocate(ctx, &nodev1.AllocateRequest{Parameters: tc.p})
			if status.Code(err) != tc.code {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
			if len(status.Convert(err).Message()) > maxMessage+3 {
				t.Fatalf("message not capped")
			}
		})
	}
	// Held by another container: AlreadyExists.
	p := params("c2", "pool1")
	p.RequestedIps = []string{"192.168.0.30"}
	if _, err := c.Allocate(ctx, &nodev1.AllocateRequest{Parameters: p}); err != nil {
		t.Fatal(err)
	}
	p = params("c3", "pool1")
	p.RequestedIps = []string{"192.168.0.30"}
	if _, err := c.Allocate(ctx, &nodev1.AllocateRequest{Parameters: p}); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("held by c2: %v", err)
	}
}

// TestWireFormat sends an Allocate built by hand with protowire, field
// numbers as the proto documents them, and decodes the answer the same
// way: the package, service and field numbers are NVIDIA's.
func TestWireFormat(t *testing.T) {
	e, conn := serve(t)
	seed(t, e)
	var meta, params, req []byte
	meta = protowire.AppendTag(meta, 1, protowire.BytesType)
	meta = protowire.AppendString(meta, "pod")
	meta = protowire.AppendTag(meta, 2, protowire.BytesType)
	meta = protowire.AppendString(meta, "default")
	params = protowire.AppendTag(params, 1, protowire.BytesType)
	params = protowire.AppendString(params, "pool1")
	params = protowire.AppendTag(params, 2, protowire.BytesType)
	params = protowire.AppendString(params, "wire1")
	params = protowire.AppendTag(params, 3, protowire.BytesType)
	params = protowire.AppendString(params, "eth0")
	params = protowire.AppendTag(params, 4, protowire.BytesType)
	params = protowire.AppendBytes(params, meta)
	params = protowire.AppendTag(params, 5, protowire.VarintType)
	params = protowire.AppendVarint(params, 1)
	req = protowire.AppendTag(req, 1, protowire.BytesType)
	req = protowire.AppendBytes(req, params)
	var out rawMsg
	in := rawMsg(req)
	if err := conn.Invoke(context.Background(), "/nvidia.ipam.node.v1.IPAMService/Allocate", &in, &out, grpc.ForceCodecV2(rawCodec{})); err != nil {
		t.Fatal(err)
	}
	// AllocateResponse{1: AllocationInfo{1: pool, 2: ip, 3: gateway, 4: pool_type, 5: Route{1: dest}}}
	fields := map[protowire.Number]string{}
	num, typ, n := protowire.ConsumeTag(out)
	if num != 1 || typ != protowire.BytesType {
		t.Fatalf("answer starts with field %d type %d", num, typ)
	}
	info, _ := protowire.ConsumeBytes(out[n:])
	for len(info) > 0 {
		num, typ, n := protowire.ConsumeTag(info)
		info = info[n:]
		switch typ {
		case protowire.BytesType:
			v, m := protowire.ConsumeBytes(info)
			fields[num] = string(v)
			info = info[m:]
		case protowire.VarintType:
			v, m := protowire.ConsumeVarint(info)
			fields[num] = string(rune('0' + v))
			info = info[m:]
		default:
			t.Fatalf("field %d of type %d", num, typ)
		}
	}
	if fields[1] != "pool1" || fields[2] != "192.168.0.25/16" || fields[3] != "192.168.0.1" || fields[4] != "1" {
		t.Fatalf("decoded %q", fields)
	}
	var route []byte
	route = protowire.AppendTag(route, 1, protowire.BytesType)
	route = protowire.AppendString(route, "0.0.0.0/0")
	if fields[5] != string(route) {
		t.Fatalf("route %q", fields[5])
	}
}

type rawMsg []byte

type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*(v.(*rawMsg)))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*(v.(*rawMsg)) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// TestMalformedRequest: a request that is not protobuf, cut short or with
// invalid UTF-8, is answered InvalidArgument naming the field (gRPC alone
// answers Internal), on a unix socket as the plugin calls it.
func TestMalformedRequest(t *testing.T) {
	e, conn := serve(t)
	seed(t, e)
	params := protowire.AppendTag(nil, 2, protowire.BytesType)
	params = protowire.AppendBytes(params, []byte{'c', 0xff})
	utf := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), params)
	for _, tc := range []struct {
		name string
		req  rawMsg
		want string
	}{
		{"a bad tag", rawMsg{0x00}, "request: does not decode as nvidia.ipam.node.v1.AllocateRequest: malformed tag: invalid field number"},
		{"cut short", rawMsg{0x0a, 0x10, 0x0a}, "parameters: malformed value: unexpected EOF"},
		{"invalid UTF-8", rawMsg(utf), "parameters.cni_containerid: holds invalid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out rawMsg
			err := conn.Invoke(context.Background(), nodev1.IPAMService_Allocate_FullMethodName, &tc.req, &out, grpc.ForceCodecV2(rawCodec{}))
			if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != tc.want {
				t.Fatalf("got %v, want InvalidArgument %q", err, tc.want)
			}
		})
	}
}

// TestNodeAllocations: GarbageCollect, PoolStatus and Check over the
// socket, with the codes the plugin maps (FailedPrecondition outside the
// block) and the GC counted.
func TestNodeAllocations(t *testing.T) {
	e, conn := serve(t)
	seed(t, e)
	ctx := context.Background()
	api := nodev1.NewIPAMServiceClient(conn)
	for _, cid := range []string{"keep", "gone"} {
		if _, err := api.Allocate(ctx, &nodev1.AllocateRequest{Parameters: params(cid, "pool1")}); err != nil {
			t.Fatal(err)
		}
	}
	node := ipamnodev1.NewNodeAllocationsClient(conn)
	st, err := node.PoolStatus(ctx, &ipamnodev1.PoolStatusRequest{Pools: []string{"pool1", "pool2"}})
	if err != nil || len(st.GetPools()) != 2 || !st.GetPools()[0].GetReady() || st.GetPools()[1].GetReady() || st.GetPools()[1].GetReason() == "" {
		t.Fatalf("PoolStatus: %v %v", st, err)
	}
	gc, err := node.GarbageCollect(ctx, &ipamnodev1.GarbageCollectRequest{Pools: []string{"pool1"},
		ValidAttachments: []*ipamnodev1.Attachment{{ContainerId: "keep", Ifname: "net1"}}})
	if err != nil || len(gc.GetReleased()) != 1 || gc.GetReleased()[0].GetAttachment().GetContainerId() != "gone" || gc.GetReleased()[0].GetIp() != "192.168.0.26/16" {
		t.Fatalf("GarbageCollect: %v %v", gc, err)
	}
	check := func(p *nodev1.IPAMParameters) codes.Code {
		_, err := node.Check(ctx, &ipamnodev1.CheckRequest{Parameters: p})
		return status.Code(err)
	}
	keep := params("keep", "pool1")
	keep.RequestedIps = []string{"192.168.0.25"}
	if c := check(keep); c != codes.OK {
		t.Fatalf("Check of keep: %s", c)
	}
	if c := check(params("gone", "pool1")); c != codes.NotFound {
		t.Fatalf("Check of a collected interface: %s", c)
	}
	moved := &nodeipam.Block{Network: netip.MustParsePrefix("192.168.0.0/16"), Start: netip.MustParseAddr("192.168.0.100"), End: netip.MustParseAddr("192.168.0.120")}
	if _, err := e.SetPool(ctx, nodeipam.PoolKey{Type: nodeipam.IPPool, Name: "pool1"}, moved); err != nil {
		t.Fatal(err)
	}
	if c := check(keep); c != codes.FailedPrecondition {
		t.Fatalf("Check outside the block: %s, want FailedPrecondition", c)
	}
	if _, err := node.GarbageCollect(ctx, &ipamnodev1.GarbageCollectRequest{Pools: []string{"pool1"},
		ValidAttachments: []*ipamnodev1.Attachment{{ContainerId: "", Ifname: "net1"}}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("GarbageCollect of an empty container id: %v", err)
	}
}
