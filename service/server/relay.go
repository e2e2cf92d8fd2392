package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/grpcdecode"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server/authz"
)

// The relay: a replica that does not hold the write lead sends the
// changes it is asked for to the leader over one Replica.Forward stream,
// as many calls per message as are waiting, and the leader streams the
// answers back, as many per message as are ready. Compared with one
// unary call per change, the replicas save a stream, its headers and,
// when calls come in bursts (as they do, since the leader answers a
// whole transaction's changes at once), messages and system calls.

// Relay limits: calls per message and in flight per stream (the leader
// stops reading a stream that has this many unanswered), bytes of the
// requests of one message, and the largest request relayed (a larger one
// is forwarded as its own unary call).
const (
	relayMaxCalls        = 1024
	relayMaxBatchBytes   = 4 << 20
	relayMaxRequestBytes = 64 << 10
)

// relayKeptWorkers bounds the goroutines that stay, once their call is
// answered, to run the next relayed calls: a call runs deep in the
// handler's stack, and a goroutine started per call grows its stack
// again every time (over a quarter of the relay's CPU under load).
const relayKeptWorkers = 256

// relayServer serves Replica.Forward on the leader: each relayed call
// runs through the same interceptors (call gate, authentication) and
// handler as the same IPAM call made directly, with the caller's
// credentials it carries. Under mTLS only replicas the policy names may
// open a stream (replica), and the caller's certificate names a call
// carries are believed because they do (see authenticator).
type relayServer struct {
	ipamv1.UnimplementedReplicaServer
	replica  func(authz.Principal) bool // nil: anyone may relay (plaintext: calls carry tokens only)
	applied  func() int64               // the revision the store has applied (nil: none)
	svc      ipamv1.IPAMServer
	chain    grpc.UnaryServerInterceptor
	handlers map[string]grpc.MethodHandler // the write methods of IPAM by full name
	quit     chan struct{}                 // closed when the server stops
	quitOnce sync.Once
	idle     chan func()  // hands a call to a worker waiting for one
	workers  atomic.Int64 // kept workers
}

func newRelayServer(svc ipamv1.IPAMServer, interceptors []grpc.UnaryServerInterceptor, replica func(authz.Principal) bool, applied func() int64) *relayServer {
	r := &relayServer{replica: replica, applied: applied, svc: svc, chain: chainUnary(interceptors), handlers: map[string]grpc.MethodHandler{},
		quit: make(chan struct{}), idle: make(chan func())}
	for _, m := range ipamv1.IPAM_ServiceDesc.Methods {
		full := "/" + ipamv1.IPAM_ServiceDesc.ServiceName + "/" + m.MethodName
		if _, write := writeMethods[full]; write {
			r.handlers[full] = m.Handler
		}
	}
	return r
}

// close ends the relay streams once the calls they run are answered;
// calls that arrive meanwhile are answered Unavailable, so the replica
// that relayed them makes them itself. Without it a graceful stop would
// wait for the other replicas to close their streams.
func (r *relayServer) close() { r.quitOnce.Do(func() { close(r.quit) }) }

// chainUnary returns one interceptor running interceptors in order, as
// grpc.ChainUnaryInterceptor does for the calls the server receives.
func chainUnary(interceptors []grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		var next func(i int) grpc.UnaryHandler
		next = func(i int) grpc.UnaryHandler {
			if i == len(interceptors) {
				return handler
			}
			return func(ctx context.Context, req any) (any, error) {
				return interceptors[i](ctx, req, info, next(i+1))
			}
		}
		return next(0)(ctx, req)
	}
}

// Forward serves one relay stream: it runs the calls it receives
// concurrently (at most relayMaxCalls unanswered) and sends their answers
// as they come, batched. It ends when the other replica closes its side
// or the server stops, once every call it received is answered.
func (r *relayServer) Forward(stream ipamv1.Replica_ForwardServer) error {
	ctx := stream.Context()
	if r.replica != nil && !r.replica(principalOf(ctx)) {
		return status.Errorf(codes.PermissionDenied, "relay: identity %s is not one of the replicas the authorization policy names; only replicas relay calls", ipam.Quote(principalOf(ctx).String()))
	}
	answers := make(chan *ipamv1.ForwardedAnswer, relayMaxCalls)
	var running atomic.Int64
	received := make(chan error, 1)
	go func() { received <- r.receive(ctx, stream, answers, &running) }()
	ended, quit := received, r.quit // nil once they fired
	finishing := false
	for {
		if finishing && running.Load() == 0 && len(answers) == 0 {
			return nil
		}
		var recheck <-chan time.Time
		if finishing {
			recheck = time.After(10 * time.Millisecond)
		}
		select {
		case a := <-answers:
			runtime.Gosched() // the answers of one transaction come together: let them in
			batch := []*ipamv1.ForwardedAnswer{a}
			for more := true; more && len(batch) < relayMaxCalls; {
				select {
				case a := <-answers:
					batch = append(batch, a)
				default:
					more = false
				}
			}
			if err := stream.Send(&ipamv1.ForwardResponse{Answers: batch}); err != nil {
				return err
			}
		case err := <-ended:
			if err != nil {
				return err // the stream is broken: the answers cannot go back
			}
			ended, finishing = nil, true
		case <-quit:
			quit, finishing = nil, true
		case <-recheck:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// receive reads the stream's calls and runs each on a worker (spawn),
// which puts its answer in answers; it returns when the other replica
// closes its side (nil) or the stream fails. running counts the calls
// not yet in answers.
func (r *relayServer) receive(ctx context.Context, stream ipamv1.Replica_ForwardServer, answers chan<- *ipamv1.ForwardedAnswer, running *atomic.Int64) error {
	slots := make(chan struct{}, relayMaxCalls)
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(req.GetCalls()) > relayMaxCalls {
			return status.Errorf(codes.InvalidArgument, "relay: %d calls in one message; at most %d", len(req.GetCalls()), relayMaxCalls)
		}
		for _, c := range req.GetCalls() {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			running.Add(1)
			r.spawn(func() {
				defer func() { <-slots }()
				a := errorAnswer(c.GetId(), errRelayStopping)
				select {
				case <-r.quit:
				default:
					a = r.run(ctx, c)
				}
				select {
				case answers <- a:
				case <-ctx.Done(): // Forward returned: nobody sends it
				}
				running.Add(-1)
			})
		}
	}
}

// spawn runs call on a kept worker that waits for one, or on a new
// goroutine, which stays as a worker if fewer than relayKeptWorkers are
// kept. Kept workers end when the server stops.
func (r *relayServer) spawn(call func()) {
	select {
	case r.idle <- call:
		return
	default:
	}
	keep := r.workers.Add(1) <= relayKeptWorkers
	if !keep {
		r.workers.Add(-1)
	}
	go func() {
		for {
			call()
			if !keep {
				return
			}
			select {
			case call = <-r.idle:
			case <-r.quit:
				r.workers.Add(-1)
				return
			}
		}
	}()
}

// errRelayStopping answers the calls relayed to a server that stops.
var errRelayStopping = status.Error(codes.Unavailable, "relay: ipam-server is stopping")

// run makes one relayed call and returns its answer.
func (r *relayServer) run(ctx context.Context, c *ipamv1.ForwardedCall) *ipamv1.ForwardedAnswer {
	handler, ok := r.handlers[c.GetMethod()]
	if !ok {
		return errorAnswer(c.GetId(), status.Errorf(codes.InvalidArgument, "relay: method %.100q cannot be relayed: only IPAM's changing methods can", c.GetMethod()))
	}
	md := metadata.Pairs(forwardedHeader, relayedBy)
	if c.GetAuthorization() != "" {
		md.Set("authorization", c.GetAuthorization())
	}
	if names := c.GetCallerNames(); len(names) > 0 {
		md.Set(forwardedForHeader, names...)
	}
	ctx = metadata.NewIncomingContext(ctx, md)
	if ms := c.GetTimeoutMs(); ms > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
		defer cancel()
	}
	resp, err := handler(r.svc, ctx, func(m any) error {
		if err := proto.Unmarshal(c.GetRequest(), m.(proto.Message)); err != nil {
			why := status.Convert(grpcdecode.Error(c.GetRequest(), m.(proto.Message), err)).Message()
			return status.Errorf(codes.InvalidArgument, "relay: decoding the %s request: %s", c.GetMethod(), why)
		}
		return nil
	}, r.chain)
	if err != nil {
		return errorAnswer(c.GetId(), err)
	}
	b, err := proto.Marshal(resp.(proto.Message))
	if err != nil {
		return errorAnswer(c.GetId(), status.Errorf(codes.Internal, "relay: encoding the %s answer: %v", c.GetMethod(), err))
	}
	var rev int64
	if r.applied != nil {
		rev = r.applied()
	}
	return &ipamv1.ForwardedAnswer{Id: c.GetId(), Response: b, Revision: rev}
}

// relayedBy is the forwardedHeader value of the calls the relay server
// makes.
const relayedBy = "relay"

// errorAnswer is the answer of a call that failed with err.
func errorAnswer(id uint64, err error) *ipamv1.ForwardedAnswer {
	st := status.Convert(err).Proto()
	return &ipamv1.ForwardedAnswer{Id: id, Code: st.GetCode(), Message: st.GetMessage(), Details: st.GetDetails()}
}

// answerResult turns a relayed call's answer into what the call returns:
// its answer message (made by answer) or its error.
func answerResult(a *ipamv1.ForwardedAnswer, answer func() proto.Message) (proto.Message, error) {
	if a.GetCode() != int32(codes.OK) {
		return nil, status.FromProto(&spb.Status{Code: a.GetCode(), Message: a.GetMessage(), Details: a.GetDetails()}).Err()
	}
	resp := answer()
	if err := proto.Unmarshal(a.GetResponse(), resp); err != nil {
		return nil, status.Errorf(codes.Internal, "relay: decoding the answer: %v", err)
	}
	return resp, nil
}

// relayClient is one relay stream of a replica to the write lead: calls
// queue, one goroutine opens the stream and sends what is queued as one
// message, another hands each answer to its caller. When the stream
// cannot be opened or breaks, every call waiting on it is answered
// Unavailable (the forwarder then makes it itself) and the stream is not
// used again.
type relayClient struct {
	cancel context.CancelFunc
	wake   chan struct{}

	mu      sync.Mutex
	broken  error
	next    uint64
	queue   []*ipamv1.ForwardedCall
	pending map[uint64]chan *ipamv1.ForwardedAnswer
}

// newRelayClient starts a relay stream on conn. It does not wait for the
// connection: calls queue until the stream is open.
func newRelayClient(conn grpc.ClientConnInterface) *relayClient {
	ctx, cancel := context.WithCancel(context.Background())
	c := &relayClient{cancel: cancel, wake: make(chan struct{}, 1), pending: map[uint64]chan *ipamv1.ForwardedAnswer{}}
	go func() {
		stream, err := ipamv1.NewReplicaClient(conn).Forward(ctx)
		if err != nil {
			c.fail(fmt.Errorf("opening the relay to the write lead: %w", err))
			return
		}
		go c.receive(stream)
		c.send(ctx, stream)
	}()
	return c
}

// call relays a call of method (request encoded in req, the caller's
// authorization header auth and certificate names certNames) and waits
// for its answer or the end of ctx.
func (c *relayClient) call(ctx context.Context, method string, req []byte, auth string, certNames []string) (*ipamv1.ForwardedAnswer, error) {
	fc := &ipamv1.ForwardedCall{Method: method, Request: req, Authorization: auth, CallerNames: certNames}
	if dl, ok := ctx.Deadline(); ok {
		fc.TimeoutMs = max(time.Until(dl).Milliseconds(), 1)
	}
	ch := make(chan *ipamv1.ForwardedAnswer, 1)
	c.mu.Lock()
	if c.broken != nil {
		c.mu.Unlock()
		return nil, status.Errorf(codes.Unavailable, "relay to the write lead: %v", c.broken)
	}
	c.next++
	fc.Id = c.next
	c.pending[fc.Id] = ch
	c.queue = append(c.queue, fc)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	select {
	case a := <-ch:
		return a, nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, fc.Id)
		c.mu.Unlock()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// send sends the queued calls, as many per message as the limits allow.
func (c *relayClient) send(ctx context.Context, stream ipamv1.Replica_ForwardClient) {
	for {
		select {
		case <-c.wake:
		case <-ctx.Done():
			return
		}
		runtime.Gosched() // calls come in bursts: let the rest of one in
		for {
			c.mu.Lock()
			n, size := 0, 0
			for n < len(c.queue) && n < relayMaxCalls && (n == 0 || size+len(c.queue[n].GetRequest()) <= relayMaxBatchBytes) {
				size += len(c.queue[n].GetRequest())
				n++
			}
			batch := append([]*ipamv1.ForwardedCall(nil), c.queue[:n]...)
			c.queue = append(c.queue[:0], c.queue[n:]...)
			c.mu.Unlock()
			if n == 0 {
				break
			}
			if err := stream.Send(&ipamv1.ForwardRequest{Calls: batch}); err != nil {
				c.fail(err)
				return
			}
		}
	}
}

// receive hands the answers to their callers until the stream ends.
func (c *relayClient) receive(stream ipamv1.Replica_ForwardClient) {
	for {
		resp, err := stream.Recv()
		if err != nil {
			c.fail(err)
			return
		}
		c.mu.Lock()
		for _, a := range resp.GetAnswers() {
			if ch := c.pending[a.GetId()]; ch != nil {
				ch <- a
				delete(c.pending, a.GetId())
			}
		}
		c.mu.Unlock()
	}
}

// fail breaks the stream for why: the calls waiting on it are answered
// Unavailable.
func (c *relayClient) fail(why error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return
	}
	if why == nil || errors.Is(why, io.EOF) {
		why = errors.New("the stream ended")
	}
	c.broken = why
	for id, ch := range c.pending {
		ch <- &ipamv1.ForwardedAnswer{Id: id, Code: int32(codes.Unavailable), Message: "relay to the write lead: " + status.Convert(why).Message()}
	}
	c.pending = nil
	c.queue = nil
	c.cancel()
}

// usable reports whether calls can still be relayed on c.
func (c *relayClient) usable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken == nil
}
