// Package grpcdecode makes a gRPC server answer a request that does not
// decode with InvalidArgument naming the field at fault, where gRPC alone
// answers Internal ("grpc: failed to unmarshal the received message"),
// which reads as a server fault and names nothing. Both of the project's
// gRPC servers use it: ipam-server and ipam-node's node API.
//
// gRPC-go turns every error of a codec's Unmarshal into codes.Internal
// before any interceptor runs, so the codec cannot answer the error
// itself. Instead Codec keeps the error against the message being decoded
// and reports success; its interceptors, outermost on the server's chains
// (unary and stream), take the error out and answer it before anything
// else sees the message. Every decoded message passes through one of
// them, so no error is kept beyond its call.
package grpcdecode

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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

// Codec wraps a server codec (gRPC's proto codec, or one built on it) so
// that every request it cannot decode is answered InvalidArgument (see
// Error). Install it with grpc.ForceServerCodecV2(c), and c.Unary and
// c.Stream first in grpc.ChainUnaryInterceptor and
// grpc.ChainStreamInterceptor (ServerOptions does both).
type Codec struct {
	inner   encoding.CodecV2
	pending sync.Map // the message being decoded (a pointer) → its error
}

// New wraps inner.
func New(inner encoding.CodecV2) *Codec { return &Codec{inner: inner} }

// ServerOptions are the options that install a Codec over gRPC's proto
// codec; given before any other interceptor option, its interceptors are
// the outermost.
func ServerOptions() []grpc.ServerOption {
	c := New(encoding.GetCodecV2("proto"))
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(c),
		grpc.ChainUnaryInterceptor(c.Unary),
		grpc.ChainStreamInterceptor(c.Stream),
	}
}

// Marshal encodes with the inner codec.
func (c *Codec) Marshal(v any) (mem.BufferSlice, error) { return c.inner.Marshal(v) }

// Name is the inner codec's name (the content subtype, "proto").
func (c *Codec) Name() string { return c.inner.Name() }

// Unmarshal decodes with the inner codec. When that fails on a protobuf
// message, the error (Error's status) is kept for the interceptors and
// Unmarshal reports success; other failures are returned as they are.
func (c *Codec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.inner.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return err
	}
	c.pending.Store(v, Error(data.Materialize(), m, err))
	return nil
}

// take returns and forgets the error kept for message v, if any.
func (c *Codec) take(v any) error {
	if err, ok := c.pending.LoadAndDelete(v); ok {
		return err.(error)
	}
	return nil
}

// Unary answers the error kept for the request, if any.
func (c *Codec) Unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := c.take(req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// Stream makes each message the handler receives answer the error kept
// for it, if any.
func (c *Codec) Stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &stream{ServerStream: ss, codec: c})
}

// stream is a server stream whose RecvMsg answers the codec's error.
type stream struct {
	grpc.ServerStream
	codec *Codec
}

// RecvMsg receives m and returns the error the codec kept for it.
func (s *stream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		_ = s.codec.take(m)
		return err
	}
	return s.codec.take(m)
}

// Error is the status of a request b that did not decode into m (err):
// InvalidArgument naming the first field at fault, such as
// "allocations[1].labels: holds invalid UTF-8" or
// "allocation.key: does not decode: truncated field 2 (a length past the
// end)"; "request: does not decode as ipam.v1.AllocateRequest: ..." when
// no field is to blame (a malformed tag at the top level).
func Error(b []byte, m proto.Message, err error) error {
	md := m.ProtoReflect().Descriptor()
	if path, why := fault(b, md, 0); why != "" {
		if path == "" {
			return status.Errorf(codes.InvalidArgument, "request: does not decode as %s: %s", md.FullName(), why)
		}
		return status.Error(codes.InvalidArgument, path+": "+why)
	}
	return status.Errorf(codes.InvalidArgument, "request: does not decode as %s: %s", md.FullName(), words(err))
}

// parseWhy words protowire's parse error n.
func parseWhy(n int) string { return words(protowire.ParseError(n)) }

// words is err's message without protobuf-go's "proto:" prefix, whose
// space protobuf-go makes a no-break space at random to keep callers from
// matching its messages: a client reads the same words every time.
func words(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "proto:"); i >= 0 {
		msg = msg[:i] + strings.TrimLeft(msg[i+len("proto:"):], " \u00a0")
	}
	return msg
}

// maxDepth bounds how deep fault follows nested messages; protobuf-go
// refuses deeper nesting anyway.
const maxDepth = 100

// fault returns the path of the first field of b, an encoded message of
// md, that does not decode ("allocations[2].key.name"; a map is named
// without its key, "" for the message itself) and why, or "", "" when
// it finds none.
func fault(b []byte, md protoreflect.MessageDescriptor, depth int) (path, why string) {
	if depth > maxDepth {
		return "", fmt.Sprintf("nested more than %d messages deep", maxDepth)
	}
	var seen map[protowire.Number]int // occurrences of repeated fields
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", "malformed tag: " + parseWhy(n)
		}
		b = b[n:]
		fd := md.Fields().ByNumber(num)
		name := fieldName(fd, num, seen)
		if fd != nil && fd.IsList() {
			if seen == nil {
				seen = map[protowire.Number]int{}
			}
			seen[num]++
		}
		if fd == nil || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return name, "malformed value: " + parseWhy(n)
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return name, "malformed value: " + parseWhy(n)
		}
		b = b[n:]
		switch {
		case fd.Kind() == protoreflect.StringKind:
			if !utf8.Valid(v) {
				return name, "holds invalid UTF-8"
			}
		case fd.IsMap(): // an entry's key or value is named by the map
			if _, why := fault(v, fd.Message(), depth+1); why != "" {
				return name, why
			}
		case fd.Kind() == protoreflect.MessageKind:
			if sub, why := fault(v, fd.Message(), depth+1); why != "" {
				if sub == "" {
					return name, why
				}
				return name + "." + sub, why
			}
		case fd.IsList() && fd.Kind() != protoreflect.BytesKind: // packed scalars
			if why := packed(v, fd.Kind()); why != "" {
				return name, why
			}
		}
	}
	return "", ""
}

// fieldName names field fd (number num when unknown), with the index of
// a repeated field's occurrence.
func fieldName(fd protoreflect.FieldDescriptor, num protowire.Number, seen map[protowire.Number]int) string {
	if fd == nil {
		return "field " + strconv.Itoa(int(num))
	}
	name := string(fd.Name())
	if fd.IsList() {
		name += "[" + strconv.Itoa(seen[num]) + "]"
	}
	return name
}

// packed reports why v is not a packed list of scalars of kind k, or "".
func packed(v []byte, k protoreflect.Kind) string {
	var typ protowire.Type
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		typ = protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		typ = protowire.Fixed64Type
	default:
		typ = protowire.VarintType
	}
	for len(v) > 0 {
		n := protowire.ConsumeFieldValue(1, typ, v)
		if n < 0 {
			return "malformed packed value: " + parseWhy(n)
		}
		v = v[n:]
	}
	return ""
}
