package server_test

import (
	"bytes"
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server"
)

// rawCodec sends requests as the bytes given and decodes answers with
// proto (or drops them, for a *droppedAnswer), so that a test can send
// what protobuf-go refuses to encode, or a large request encoded once.
type rawCodec struct{}

// droppedAnswer is an answer rawCodec does not decode.
type droppedAnswer struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if _, ok := v.(*droppedAnswer); ok {
		return nil
	}
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}
func (rawCodec) Name() string { return "proto" }

// withInvalidUTF8 encodes m and replaces the marker "@@" in it, which
// must appear once, by two bytes that are not UTF-8.
func withInvalidUTF8(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	must(t, err)
	if bytes.Count(b, []byte("@@")) != 1 {
		t.Fatalf("the marker is not in the encoded %T once", m)
	}
	return bytes.Replace(b, []byte("@@"), []byte{0xff, 0xfe}, 1)
}

// TestInvalidUTF8 sends requests with invalid UTF-8 in a string field:
// each is answered InvalidArgument naming the field (gRPC alone answers
// Internal, naming none), on unary calls and on a stream.
func TestInvalidUTF8(t *testing.T) {
	ts := startServer(t, server.Config{})
	conn := ts.Dial(t)
	seed(t, ipamv1.NewIPAMClient(conn))
	ctx := context.Background()
	sel := map[string]string{"nephio.org/network-instance": "vpc-1"}
	for _, tc := range []struct {
		name, method string
		req          proto.Message
		want         string
	}{
		{"key of Allocate", ipamv1.IPAM_Allocate_FullMethodName,
			&ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: &ipamv1.Key{Owner: "o", Name: "a@@"}, Selector: sel}},
			"allocation.key.name: holds invalid UTF-8"},
		{"label of the second allocation of a Sync", ipamv1.IPAM_Sync_FullMethodName,
			&ipamv1.SyncRequest{Owner: "o", Allocations: []*ipamv1.Allocation{{Key: key("a"), Selector: sel}, {Key: key("b"), Selector: sel, Labels: map[string]string{"k": "v@@"}}}},
			"allocations[1].labels: holds invalid UTF-8"},
		{"page token of List", ipamv1.IPAM_List_FullMethodName,
			&ipamv1.ListRequest{Kind: allocKind, PageToken: "@@"},
			"page_token: holds invalid UTF-8"},
		{"prefix of a network instance", ipamv1.IPAM_CreateNetworkInstance_FullMethodName,
			&ipamv1.CreateNetworkInstanceRequest{NetworkInstance: &ipamv1.NetworkInstance{Key: key("v"), Prefixes: []*ipamv1.VRFPrefix{{Prefix: "10.0.0.0/8"}, {Prefix: "@@"}}}},
			"network_instance.prefixes[1].prefix: holds invalid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := conn.Invoke(ctx, tc.method, withInvalidUTF8(t, tc.req), new(ipamv1.ListResponse), grpc.ForceCodecV2(rawCodec{}))
			wantStatus(t, err, codes.InvalidArgument, tc.want)
		})
	}
	t.Run("owner of Watch", func(t *testing.T) {
		desc := &grpc.StreamDesc{StreamName: "Watch", ServerStreams: true}
		cs, err := conn.NewStream(ctx, desc, ipamv1.IPAM_Watch_FullMethodName, grpc.ForceCodecV2(rawCodec{}))
		must(t, err)
		must(t, cs.SendMsg(withInvalidUTF8(t, &ipamv1.WatchRequest{Owner: "@@"})))
		must(t, cs.CloseSend())
		wantStatus(t, cs.RecvMsg(new(ipamv1.WatchEvent)), codes.InvalidArgument, "owner: holds invalid UTF-8")
	})
	// The server still serves valid requests on the same connection.
	_, err := ipamv1.NewIPAMClient(conn).List(ctx, &ipamv1.ListRequest{Kind: allocKind})
	must(t, err)
}

// TestMalformedProtobuf sends requests that are not protobuf at all, or
// are cut short: each is answered InvalidArgument naming the field (gRPC
// alone answers Internal, "grpc: failed to unmarshal"), both where gRPC's
// codec decodes the request and where the memory budget does (Sync).
func TestMalformedProtobuf(t *testing.T) {
	ts := startServer(t, server.Config{})
	conn := ts.Dial(t)
	ctx := context.Background()
	sync, err := proto.Marshal(&ipamv1.SyncRequest{Owner: "o", Allocations: []*ipamv1.Allocation{{Key: key("a")}}})
	must(t, err)
	for _, tc := range []struct {
		name, method string
		req          []byte
		want         string
	}{
		{"a bad tag in Allocate", ipamv1.IPAM_Allocate_FullMethodName, []byte{0x00, 0x00}, "request: does not decode as ipam.v1.AllocateRequest: malformed tag: invalid field number"},
		{"a length past the end in Allocate", ipamv1.IPAM_Allocate_FullMethodName, []byte{0x0a, 0x40}, "allocation: malformed value: unexpected EOF"},
		{"a Sync cut short", ipamv1.IPAM_Sync_FullMethodName, sync[:len(sync)-1], "allocations[0]: malformed value: unexpected EOF"},
		{"a bad tag in CreatePrefix", ipamv1.IPAM_CreatePrefix_FullMethodName, []byte{0x07}, "request: does not decode as ipam.v1.CreatePrefixRequest: malformed tag: invalid field number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := conn.Invoke(ctx, tc.method, tc.req, new(ipamv1.ListResponse), grpc.ForceCodecV2(rawCodec{}))
			wantStatus(t, err, codes.InvalidArgument, tc.want)
		})
	}
	_, err = ipamv1.NewIPAMClient(conn).List(ctx, &ipamv1.ListRequest{Kind: allocKind})
	must(t, err)
}
