package server

import (
	"context"
	"strconv"
	"sync"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// utf8Codec is the server's codec: it wraps another one (gRPC's proto
// codec) so that a request with invalid UTF-8 in a string field is
// answered InvalidArgument naming the field, such as
// "allocation.key.name: holds invalid UTF-8", where gRPC would answer
// Internal ("grpc: failed to unmarshal the received message: string field
// contains invalid UTF-8", which names no field).
//
// gRPC-go turns every error of a codec's Unmarshal into codes.Internal
// before any interceptor runs, so the codec cannot answer the error
// itself. Instead it keeps the error against the message being decoded
// and reports success; its interceptors, outermost on the server's chains
// (unary and stream), take the error out and answer it before anything
// else sees the message. Every decoded message passes through one of them,
// so no error is kept beyond its call.
//
// It is installed with grpc.ForceServerCodecV2(c) and c.unary and c.stream
// first in grpc.ChainUnaryInterceptor and grpc.ChainStreamInterceptor.
type utf8Codec struct {
	inner   encoding.CodecV2
	pending sync.Map // the message being decoded (a pointer) → its error
}

// newUTF8Codec wraps inner.
func newUTF8Codec(inner encoding.CodecV2) *utf8Codec { return &utf8Codec{inner: inner} }

// Marshal encodes with the inner codec.
func (c *utf8Codec) Marshal(v any) (mem.BufferSlice, error) { return c.inner.Marshal(v) }

// Name is the inner codec's name (the content subtype, "proto").
func (c *utf8Codec) Name() string { return c.inner.Name() }

// Unmarshal decodes with the inner codec. When that fails on a string
// field of invalid UTF-8, the error is kept for the interceptors and
// Unmarshal reports success; other errors are returned as they are.
func (c *utf8Codec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.inner.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return err
	}
	field := invalidUTF8Field(data.Materialize(), m.ProtoReflect().Descriptor())
	if field == "" {
		return err
	}
	c.pending.Store(v, invalidUTF8(field))
	return nil
}

// invalidUTF8 is the status of a request whose string field holds
// invalid UTF-8.
func invalidUTF8(field string) error {
	return status.Error(codes.InvalidArgument, field+": holds invalid UTF-8")
}

// decodeError is the status of a request b that did not decode into m
// (err): InvalidArgument naming the field of invalid UTF-8, else Internal,
// as gRPC answers a request its codec cannot decode. The methods whose
// requests the memory budget weighs before decoding use it (their decode
// runs in the handler, not in the codec).
func decodeError(b []byte, m proto.Message, err error) error {
	if field := invalidUTF8Field(b, m.ProtoReflect().Descriptor()); field != "" {
		return invalidUTF8(field)
	}
	return status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
}

// take returns and forgets the error kept for message v, if any.
func (c *utf8Codec) take(v any) error {
	if err, ok := c.pending.LoadAndDelete(v); ok {
		return err.(error)
	}
	return nil
}

// unary answers the error kept for the request, if any.
func (c *utf8Codec) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := c.take(req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// stream makes each message the handler receives answer the error kept
// for it, if any.
func (c *utf8Codec) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &utf8Stream{ServerStream: ss, codec: c})
}

// utf8Stream is a server stream whose RecvMsg answers the codec's error.
type utf8Stream struct {
	grpc.ServerStream
	codec *utf8Codec
}

// RecvMsg receives m and returns the error the codec kept for it.
func (s *utf8Stream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		_ = s.codec.take(m)
		return err
	}
	return s.codec.take(m)
}

// invalidUTF8Field returns the path of the first string field of b, an
// encoded message of md, that holds invalid UTF-8
// ("allocations[2].key.name"; a map is named without its key), or "" when
// there is none or b does not parse.
func invalidUTF8Field(b []byte, md protoreflect.MessageDescriptor) string {
	var seen map[protowire.Number]int // occurrences of repeated fields
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		fd := md.Fields().ByNumber(num)
		if fd == nil || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return ""
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		name := string(fd.Name())
		if fd.IsList() {
			if seen == nil {
				seen = map[protowire.Number]int{}
			}
			name += "[" + strconv.Itoa(seen[num]) + "]"
			seen[num]++
		}
		switch {
		case fd.Kind() == protoreflect.StringKind:
			if !utf8.Valid(v) {
				return name
			}
		case fd.IsMap():
			if invalidUTF8Field(v, fd.Message()) != "" {
				return name
			}
		case fd.Kind() == protoreflect.MessageKind:
			if sub := invalidUTF8Field(v, fd.Message()); sub != "" {
				return name + "." + sub
			}
		}
	}
	return ""
}
