package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/grpcdecode"
)

// Admission control: the memory of the requests in flight is bounded in
// total, not only per request. Each IPAM call is charged
// RequestMemoryFactor times the encoded size of its request, from the
// moment its request has been received until its handler returns, and a
// call that does not fit in the budget (--max-inflight-bytes) waits for
// room, at most the admission wait (--inflight-wait), and is then refused
// ResourceExhausted with a RetryInfo detail. The charge is taken before
// the request is decoded, so a refused request costs its encoded bytes
// only.
//
// Requests of at least smallRequestBytes may use the budget less its
// reserve (an eighth); smaller ones (Get, List, Allocate, a package's
// Sync) may use all of it, so they are answered while large ones wait.
//
// The encoded size is known only once the whole request is received,
// and gRPC receives a unary request when the method's handler asks for
// it (dec), before the interceptors run: the budget wraps the handlers
// (serviceDesc), and a custom codec (admissionCodec) hands them the
// received buffers to weigh before decoding. The methods whose valid
// requests can be large (bulkMethods) take one of maxBulkReceives
// receive slots before their request is received and keep it until it
// is charged, so that at most that many large requests are held encoded
// beyond the budget. A request of another method is received before it
// is weighed, then charged as any other. Relayed calls (Replica.Forward,
// whose calls are of 64 KiB at most) and streams' messages are not
// charged.

// RequestMemoryFactor is what a request is charged per byte of its
// encoded form: the memory that decoding and applying it takes at its
// peak, heap and garbage collection headroom included, per encoded byte
// (measured by BenchmarkSyncMemory and TestMemoryBudgetUnderLoad).
const RequestMemoryFactor = 9

// DefaultMaxInflightBytes is the default memory budget of requests in
// flight: with it and the received requests not yet charged, ipam-server
// stays under 1 GB while it is flooded with requests of the largest size.
const DefaultMaxInflightBytes = 512 << 20

// DefaultInflightWait is how long a request that does not fit in the
// budget waits for room before it is refused.
const DefaultInflightWait = 2 * time.Second

// smallRequestBytes is the encoded size under which a request may use
// the budget's reserve.
const smallRequestBytes = 64 << 10

// maxBulkReceives bounds the requests of bulkMethods being received (or
// received and waiting for room in the budget) at once, and
// maxBulkQueue those waiting for a receive slot: each holds what its
// client sent before it was read, up to a call's flow-control window
// (grpcopt.StreamWindow); one more is refused at once.
const (
	maxBulkReceives = 4
	maxBulkQueue    = 8
)

// bulkMethods are the IPAM methods whose valid requests can reach the
// message limit.
var bulkMethods = map[string]bool{
	ipamv1.IPAM_Sync_FullMethodName:                  true,
	ipamv1.IPAM_CreateNetworkInstance_FullMethodName: true,
	ipamv1.IPAM_CreatePrefix_FullMethodName:          true,
	ipamv1.IPAM_CreateRange_FullMethodName:           true,
}

// admission is the server-wide budget of request memory in flight.
type admission struct {
	limit    int64 // bytes; the whole budget, for small requests
	bulk     int64 // the budget of requests of smallRequestBytes or more
	wait     time.Duration
	inflight atomic.Int64 // charged bytes
	large    atomic.Int64 // of which charged to requests of smallRequestBytes or more
	receives chan struct{}
	queued   atomic.Int64 // requests waiting for a receive slot
	refused  atomic.Uint64

	waiting atomic.Int64 // requests waiting for room
	mu      sync.Mutex
	freed   chan struct{} // closed (and replaced) when room is freed while requests wait, under mu
}

// newAdmission returns a budget of limit bytes (no bound when limit < 0)
// whose requests wait at most wait for room.
func newAdmission(limit int64, wait time.Duration) *admission {
	if limit == 0 {
		limit = DefaultMaxInflightBytes
	}
	if wait <= 0 {
		wait = DefaultInflightWait
	}
	ad := &admission{limit: limit, bulk: limit - limit/8, wait: wait, freed: make(chan struct{})}
	if limit > 0 {
		ad.receives = make(chan struct{}, maxBulkReceives)
	}
	return ad
}

// cost is what a request of size encoded bytes is charged: a request
// that would be charged more than its share of the budget (the large
// requests' share, or all of it) is charged the whole share, so that it
// runs alone.
func (ad *admission) cost(size int) int64 {
	c := int64(size) * RequestMemoryFactor
	if size >= smallRequestBytes {
		return min(c, ad.bulk)
	}
	return min(c, ad.limit)
}

// tryCharge charges cost if it fits.
func (ad *admission) tryCharge(cost int64, small bool) bool {
	if !small {
		for {
			cur := ad.large.Load()
			if cur+cost > ad.bulk {
				return false
			}
			if ad.large.CompareAndSwap(cur, cur+cost) {
				break
			}
		}
	}
	for {
		cur := ad.inflight.Load()
		if cur+cost > ad.limit {
			if !small {
				ad.large.Add(-cost)
				ad.wake()
			}
			return false
		}
		if ad.inflight.CompareAndSwap(cur, cur+cost) {
			return true
		}
	}
}

// charge charges a request of size encoded bytes, waiting at most the
// admission wait for room, and returns what to release when its call
// ends.
func (ad *admission) charge(ctx context.Context, size int) (charged, error) {
	if ad.limit < 0 {
		return charged{}, nil
	}
	ch := charged{cost: ad.cost(size), small: size < smallRequestBytes}
	if ad.tryCharge(ch.cost, ch.small) {
		return ch, nil
	}
	timer := time.NewTimer(ad.wait)
	defer timer.Stop()
	// A release that does not see this request waiting freed its room
	// before the request's next try, which sees it.
	ad.waiting.Add(1)
	defer ad.waiting.Add(-1)
	for {
		ad.mu.Lock()
		freed := ad.freed
		ad.mu.Unlock()
		if ad.tryCharge(ch.cost, ch.small) {
			return ch, nil
		}
		select {
		case <-freed:
		case <-timer.C:
			return charged{}, ad.refuse(fmt.Sprintf("its request of %d bytes does not fit in the memory budget of requests in flight (%d bytes)", size, ad.limit))
		case <-ctx.Done():
			return charged{}, status.FromContextError(ctx.Err()).Err()
		}
	}
}

// charged is what a call was charged.
type charged struct {
	cost  int64
	small bool
}

// release gives back what a call was charged.
func (ad *admission) release(ch charged) {
	if ch.cost == 0 {
		return
	}
	if !ch.small {
		ad.large.Add(-ch.cost)
	}
	ad.inflight.Add(-ch.cost)
	ad.wake()
}

// wake wakes the requests waiting for room, if any.
func (ad *admission) wake() {
	if ad.waiting.Load() > 0 {
		ad.mu.Lock()
		close(ad.freed)
		ad.freed = make(chan struct{})
		ad.mu.Unlock()
	}
}

// startReceive takes a receive slot for a request of a bulk method,
// waiting at most the admission wait; done gives it back.
func (ad *admission) startReceive(ctx context.Context) (done func(), err error) {
	if ad.receives == nil {
		return func() {}, nil
	}
	select {
	case ad.receives <- struct{}{}:
		return ad.endReceive, nil
	default:
	}
	if ad.queued.Add(1) > maxBulkQueue {
		ad.queued.Add(-1)
		return nil, ad.refuse(fmt.Sprintf("%d large requests are being received and %d wait", maxBulkReceives, maxBulkQueue))
	}
	defer ad.queued.Add(-1)
	timer := time.NewTimer(ad.wait)
	defer timer.Stop()
	select {
	case ad.receives <- struct{}{}:
		return ad.endReceive, nil
	case <-timer.C:
		return nil, ad.refuse(fmt.Sprintf("%d large requests are being received or wait for memory", maxBulkReceives))
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

func (ad *admission) endReceive() { <-ad.receives }

// refuse counts a refusal and returns its ResourceExhausted status, with
// a RetryInfo detail.
func (ad *admission) refuse(why string) error {
	ad.refused.Add(1)
	st := status.Newf(codes.ResourceExhausted, "ipam-server is busy: %s; retry after %v", why, ad.wait)
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(ad.wait)}); err == nil {
		st = d
	}
	return st.Err()
}

// serviceDesc returns desc with every unary method's handler charging
// its request to the budget.
func (ad *admission) serviceDesc(desc *grpc.ServiceDesc) *grpc.ServiceDesc {
	out := *desc
	out.Methods = make([]grpc.MethodDesc, len(desc.Methods))
	for i, m := range desc.Methods {
		m.Handler = ad.handler(bulkMethods["/"+desc.ServiceName+"/"+m.MethodName], m.Handler)
		out.Methods[i] = m
	}
	return &out
}

// handler wraps a unary method's handler: the request it decodes is
// received as it is (rawRequest), charged, then decoded; the charge is
// released when the handler returns.
func (ad *admission) handler(bulk bool, h grpc.MethodHandler) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		var ch charged
		defer func() { ad.release(ch) }()
		return h(srv, ctx, func(m any) error {
			var err error
			ch, err = ad.receive(ctx, bulk, dec, m)
			return err
		}, interceptor)
	}
}

// receive receives a request into m: it takes a receive slot (bulk
// methods), receives the encoded request, charges it and decodes it.
func (ad *admission) receive(ctx context.Context, bulk bool, dec func(any) error, m any) (charged, error) {
	if bulk {
		done, err := ad.startReceive(ctx)
		if err != nil {
			return charged{}, err
		}
		defer done()
	}
	var raw rawRequest
	if err := dec(&raw); err != nil {
		return charged{}, err
	}
	defer raw.free()
	ch, err := ad.charge(ctx, raw.data.Len())
	if err != nil {
		return charged{}, err
	}
	if err := raw.decode(m); err != nil {
		ad.release(ch)
		return charged{}, err
	}
	return ch, nil
}

// rawRequest is a request as received, before decoding: the handlers of
// admission ask gRPC for one, and admissionCodec hands over the received
// buffers.
type rawRequest struct{ data mem.BufferSlice }

// decode decodes the request into m; a request that does not decode
// gets the status grpcdecode.Error gives. A request received in one buffer
// (a small one) is decoded from it; a larger one is copied into one
// array and its received buffers are released before it is decoded.
func (r *rawRequest) decode(m any) error {
	var b []byte
	if len(r.data) == 1 {
		b = r.data[0].ReadOnlyData()
	} else {
		b = r.data.Materialize()
		r.free()
	}
	msg := m.(proto.Message)
	if err := proto.Unmarshal(b, msg); err != nil {
		return grpcdecode.Error(b, msg, err)
	}
	return nil
}

// free releases the received buffers.
func (r *rawRequest) free() {
	r.data.Free()
	r.data = nil
}

// admissionCodec is gRPC's proto codec, except that it hands a
// rawRequest the received buffers instead of decoding them.
type admissionCodec struct{ proto encoding.CodecV2 }

func newAdmissionCodec() admissionCodec {
	return admissionCodec{proto: encoding.GetCodecV2("proto")}
}

// Marshal encodes v as the proto codec does.
func (c admissionCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

// Unmarshal keeps a reference to data in a rawRequest, and decodes
// anything else as the proto codec does.
func (c admissionCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawRequest); ok {
		data.Ref()
		r.data = data
		return nil
	}
	return c.proto.Unmarshal(data, v)
}

// Name is the proto codec's name.
func (admissionCodec) Name() string { return "proto" }
