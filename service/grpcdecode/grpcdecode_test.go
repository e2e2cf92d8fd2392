package grpcdecode_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/grpcdecode"
)

// rawCodec sends requests as the bytes given and drops answers, so that a
// test can send what protobuf-go refuses to encode.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(mem.BufferSlice, any) error { return nil }
func (rawCodec) Name() string                         { return "proto" }

// unimplemented answers every IPAM call Unimplemented: a request that
// decodes reaches it, one that does not never does.
type unimplemented struct{ ipamv1.UnimplementedIPAMServer }

// serve starts a real gRPC server with ServerOptions on a loopback port
// and returns a client connection to it.
func serve(t testing.TB) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpcdecode.ServerOptions()...)
	ipamv1.RegisterIPAMServer(gs, unimplemented{})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func enc(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMalformedRequests sends malformed protobuf over a real gRPC
// connection, unary and on a stream: each is answered InvalidArgument
// naming the field at fault, never Internal, and the connection serves
// the next call.
func TestMalformedRequests(t *testing.T) {
	conn := serve(t)
	ctx := context.Background()
	key := enc(t, &ipamv1.Key{Owner: "o", Name: "a"})
	alloc := func(inner []byte) []byte { // AllocateRequest{allocation: {key: inner}}
		a := protowire.AppendTag(nil, 1, protowire.BytesType)
		a = protowire.AppendBytes(a, inner)
		b := protowire.AppendTag(nil, 1, protowire.BytesType)
		return protowire.AppendBytes(b, a)
	}
	for _, tc := range []struct {
		name   string
		method string
		req    []byte
		want   string
	}{
		{"a tag of field number 0", ipamv1.IPAM_Allocate_FullMethodName, []byte{0x00, 0x01},
			"request: does not decode as ipam.v1.AllocateRequest: malformed tag"},
		{"a truncated varint tag", ipamv1.IPAM_Allocate_FullMethodName, []byte{0x80},
			"request: does not decode as ipam.v1.AllocateRequest: malformed tag"},
		{"a length past the end", ipamv1.IPAM_Allocate_FullMethodName, []byte{0x0a, 0x7f, 0x01},
			"allocation: malformed value"},
		{"a truncated nested key", ipamv1.IPAM_Allocate_FullMethodName, alloc(key[:len(key)-1]),
			"allocation.key.name: malformed value"},
		{"invalid UTF-8 in a nested name", ipamv1.IPAM_Allocate_FullMethodName,
			alloc(protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), []byte{0xff})),
			"allocation.key.name: holds invalid UTF-8"},
		{"a group that never ends", ipamv1.IPAM_Release_FullMethodName, protowire.AppendTag(nil, 9, protowire.StartGroupType),
			"field 9: malformed value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := proto.Unmarshal(tc.req, new(ipamv1.AllocateRequest)); err == nil && tc.method == ipamv1.IPAM_Allocate_FullMethodName {
				t.Fatal("the request decodes")
			}
			err := conn.Invoke(ctx, tc.method, tc.req, new(struct{}), grpc.ForceCodecV2(rawCodec{}))
			if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), tc.want) {
				t.Fatalf("got %v, want InvalidArgument %q", err, tc.want)
			}
		})
	}
	t.Run("on a stream", func(t *testing.T) {
		cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, ipamv1.IPAM_Watch_FullMethodName, grpc.ForceCodecV2(rawCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg([]byte{0x0a, 0x05, 'a'}); err != nil {
			t.Fatal(err)
		}
		_ = cs.CloseSend()
		err = cs.RecvMsg(new(struct{}))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "malformed value") {
			t.Fatalf("got %v, want InvalidArgument", err)
		}
	})
	// A request that decodes reaches the service.
	_, err := ipamv1.NewIPAMClient(conn).Allocate(ctx, &ipamv1.AllocateRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("a valid request: %v, want the service's Unimplemented", err)
	}
}

// FuzzRequest sends arbitrary bytes as an Allocate request to a real
// server: a request protobuf-go cannot decode is answered InvalidArgument,
// one it can reaches the service, and nothing is answered Internal.
func FuzzRequest(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x00})
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x05})
	f.Add(enc(f, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: &ipamv1.Key{Name: "a"}, Labels: map[string]string{"k": "v"}}}))
	conn := serve(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		err := conn.Invoke(context.Background(), ipamv1.IPAM_Allocate_FullMethodName, b, new(struct{}), grpc.ForceCodecV2(rawCodec{}))
		want := codes.Unimplemented
		if proto.Unmarshal(b, new(ipamv1.AllocateRequest)) != nil {
			want = codes.InvalidArgument
		}
		if got := status.Code(err); got != want {
			t.Fatalf("%x: got %v, want %v", b, err, want)
		}
	})
}

// FuzzError: Error is InvalidArgument for any bytes and message, and its
// message stays short.
func FuzzError(f *testing.F) {
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x05})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range []proto.Message{new(ipamv1.SyncRequest), new(ipamv1.ListRequest)} {
			err := grpcdecode.Error(b, m, errors.New("proto: cannot parse"))
			if status.Code(err) != codes.InvalidArgument || len(status.Convert(err).Message()) > 512 {
				t.Fatalf("%x: %v", b, err)
			}
		}
	})
}
