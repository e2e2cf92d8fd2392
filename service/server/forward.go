package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/grpcopt"
)

// leaderStore is a store whose replicas elect one of them to make every
// change (the etcd store's write lead).
type leaderStore interface {
	// Lead campaigns for the lead, advertising addr to the other replicas.
	Lead(addr string)
	// Leader returns the address of the replica holding the lead and
	// whether it is this one.
	Leader() (addr string, self bool)
	// Depose ends the lead of the replica at addr, whose process is gone,
	// if it still holds it; it reports whether it did.
	Depose(addr string) (bool, error)
	// Applied returns the revision of the store this replica has applied.
	Applied() int64
	// WaitApplied waits until this replica has applied revision rev.
	WaitApplied(ctx context.Context, rev int64) error
}

// revisionTrailer carries, on the answer of a forwarded unary call, the
// revision the leader had applied once it answered (ForwardedAnswer's
// revision for relayed calls).
const revisionTrailer = "ipam-revision"

// maxCatchUpWait bounds how long a replica that forwarded a change waits
// to apply the leader's revision before it answers anyway: the change is
// committed, only this replica's reads may not show it yet.
const maxCatchUpWait = 5 * time.Second

// probeTimeout bounds the fresh connection a replica opens to a leader it
// failed to reach (forwarder.suspect), and probeInterval is the least
// time between two such probes.
const (
	probeTimeout  = time.Second
	probeInterval = 100 * time.Millisecond
)

// forwardedHeader marks a call one replica forwarded to another, which
// serves it itself.
const forwardedHeader = "ipam-forwarded-by"

// forwardedForHeader carries, on a call one replica forwards to another
// under mTLS, the names of the caller's client certificate, one value
// each (binary: a name may be any UTF-8); the authenticator believes it
// from policy-named replicas only.
const forwardedForHeader = "ipam-forwarded-for-bin"

// writeMethods are the IPAM methods that change something, with the type
// of their answer.
var writeMethods = map[string]func() proto.Message{
	ipamv1.IPAM_CreateNetworkInstance_FullMethodName: func() proto.Message { return new(ipamv1.CreateNetworkInstanceResponse) },
	ipamv1.IPAM_DeleteNetworkInstance_FullMethodName: func() proto.Message { return new(ipamv1.DeleteResponse) },
	ipamv1.IPAM_CreatePrefix_FullMethodName:          func() proto.Message { return new(ipamv1.CreatePrefixResponse) },
	ipamv1.IPAM_DeletePrefix_FullMethodName:          func() proto.Message { return new(ipamv1.DeleteResponse) },
	ipamv1.IPAM_CreateRange_FullMethodName:           func() proto.Message { return new(ipamv1.CreateRangeResponse) },
	ipamv1.IPAM_DeleteRange_FullMethodName:           func() proto.Message { return new(ipamv1.DeleteResponse) },
	ipamv1.IPAM_Allocate_FullMethodName:              func() proto.Message { return new(ipamv1.AllocateResponse) },
	ipamv1.IPAM_Release_FullMethodName:               func() proto.Message { return new(ipamv1.DeleteResponse) },
	ipamv1.IPAM_Sync_FullMethodName:                  func() proto.Message { return new(ipamv1.SyncResponse) },
}

// forwarder sends the changes a replica is asked for to the replica that
// holds the write lead, which pipelines them with everyone else's; reads
// are served where they arrive. Changes go over the relay stream
// (relay.go), a request too large for it as its own unary call. A replica
// that holds the lead, does not know the leader, or cannot reach it
// (Unavailable) makes the change itself: the store's compare on its head
// keeps that safe, and calls are idempotent by key. The caller was
// authenticated here; its bearer token goes along and, under mTLS, the
// names of its client certificate, which the leader believes because
// this replica presents its own certificate, one the policy names as a
// replica: the leader authorizes the same caller. Replicas forward over
// plaintext gRPC, or under mTLS when the policy names them (see
// replicaCreds).
type forwarder struct {
	store     leaderStore
	self      string                           // this replica's advertised address
	creds     credentials.TransportCredentials // how it dials the leader
	log       *slog.Logger
	forwarded prometheus.Counter
	fellBack  prometheus.Counter

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	relays map[string]*relayClient

	probing   atomic.Bool  // a probe of the leader runs (suspect)
	lastProbe atomic.Int64 // unix nanoseconds: when the last one started
	// refused reports whether a fresh connection to addr is refused; a
	// test replaces it to count probes.
	refused func(addr string) bool
}

func newForwarder(store leaderStore, self string, creds credentials.TransportCredentials, log *slog.Logger, m *Metrics) *forwarder {
	return &forwarder{store: store, self: self, creds: creds, log: log, conns: map[string]*grpc.ClientConn{}, relays: map[string]*relayClient{}, refused: connRefused,
		forwarded: m.forwards.WithLabelValues("forwarded"), fellBack: m.forwards.WithLabelValues("committed_here")}
}

// unary forwards write calls to the leader.
func (f *forwarder) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	answer, write := writeMethods[info.FullMethod]
	if !write {
		return handler(ctx, req)
	}
	if by := metadata.ValueFromIncomingContext(ctx, forwardedHeader); len(by) > 0 {
		resp, err := handler(ctx, req)
		if err == nil && by[0] != relayedBy {
			// A forwarded unary call: the replica waits for this revision.
			_ = grpc.SetTrailer(ctx, metadata.Pairs(revisionTrailer, strconv.FormatInt(f.store.Applied(), 10)))
		}
		return resp, err
	}
	leader, self := f.store.Leader()
	if self || leader == "" || leader == f.self {
		return handler(ctx, req)
	}
	resp, rev, err := f.forward(ctx, leader, info.FullMethod, req.(proto.Message), metadata.ValueFromIncomingContext(ctx, "authorization"), certNamesOf(ctx), answer)
	if status.Code(err) == codes.Unavailable && ctx.Err() == nil {
		// The leader is gone or cannot commit: this replica commits.
		f.log.Debug("the write lead is unavailable; committing here", "leader", leader, "err", err)
		f.fellBack.Inc()
		f.suspect(leader)
		return handler(ctx, req)
	}
	f.forwarded.Inc()
	if err != nil {
		return nil, err
	}
	f.catchUp(ctx, rev)
	return resp, nil
}

// catchUp waits until this replica has applied revision rev, which the
// leader had applied when it answered a forwarded change, so that a
// caller reading from the replica it wrote to sees its change. It waits
// at most maxCatchUpWait (or until ctx ends): the change is committed
// either way, so the answer goes out; only a read may then lag.
func (f *forwarder) catchUp(ctx context.Context, rev int64) {
	if rev <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, maxCatchUpWait)
	defer cancel()
	if err := f.store.WaitApplied(ctx, rev); err != nil {
		f.log.Debug("answering a forwarded change before this replica applied it", "revision", rev, "err", err)
	}
}

// suspect checks, in the background, whether the process of the leader
// at addr, which this replica failed to reach, is gone: when a fresh TCP
// connection to it is refused (nothing listens on its address: the
// kernel answers at once), the store deposes it, so that a replica that
// lives leads within moments instead of when the dead leader's lease
// expires. Anything else (the connection opens, or times out: a slow or
// unreachable leader, which may still be alive and leading) leaves the
// lead alone, to its lease. One probe runs at a time, at most one per
// probeInterval; the store deposes at most once per
// etcd.DeposeInterval.
func (f *forwarder) suspect(addr string) {
	if last := f.lastProbe.Load(); time.Since(time.Unix(0, last)) < probeInterval || !f.probing.CompareAndSwap(false, true) {
		return
	}
	f.lastProbe.Store(time.Now().UnixNano())
	go func() {
		defer f.probing.Store(false)
		if !f.refused(addr) {
			return
		}
		if leader, _ := f.store.Leader(); leader != addr {
			return // the lead moved meanwhile
		}
		deposed, err := f.store.Depose(addr)
		switch {
		case err != nil:
			f.log.Warn("the write lead refuses connections; deposing it failed", "leader", addr, "err", err)
		case deposed:
			f.log.Info("the write lead refuses connections: deposed it", "leader", addr)
		}
	}()
}

// connRefused reports whether a fresh TCP connection to addr is refused.
func connRefused(addr string) bool {
	c, err := (&net.Dialer{Timeout: probeTimeout}).Dial("tcp", addr)
	if err == nil {
		_ = c.Close() // a probe: nothing was sent
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// forward makes the call on the leader, with the caller's authorization
// header (auth) and certificate names (certNames): relayed, or as its
// own unary call when its request is too large for the relay. It returns
// the answer and the revision the leader had applied once it answered
// (0 when unknown).
func (f *forwarder) forward(ctx context.Context, leader, method string, req proto.Message, auth, certNames []string, answer func() proto.Message) (proto.Message, int64, error) {
	b, err := proto.Marshal(req)
	if err != nil {
		return nil, 0, status.Errorf(codes.Internal, "encoding the %s request: %v", method, err)
	}
	if len(b) <= relayMaxRequestBytes && len(auth) <= 1 {
		rc, err := f.relay(leader)
		if err != nil {
			return nil, 0, status.Errorf(codes.Unavailable, "%v", err)
		}
		a, err := rc.call(ctx, method, b, strings.Join(auth, ""), certNames)
		if err != nil {
			return nil, 0, err
		}
		resp, err := answerResult(a, answer)
		return resp, a.GetRevision(), err
	}
	conn, err := f.conn(leader)
	if err != nil {
		return nil, 0, status.Errorf(codes.Unavailable, "%v", err)
	}
	out := metadata.Pairs(forwardedHeader, f.self)
	if len(auth) > 0 {
		out.Set("authorization", auth...)
	}
	if len(certNames) > 0 {
		out.Set(forwardedForHeader, certNames...)
	}
	resp := answer()
	var trailer metadata.MD
	if err := conn.Invoke(metadata.NewOutgoingContext(ctx, out), method, req, resp, grpc.Trailer(&trailer)); err != nil {
		return nil, 0, err
	}
	var rev int64
	if v := trailer.Get(revisionTrailer); len(v) == 1 {
		rev, _ = strconv.ParseInt(v[0], 10, 64) // unparsable: 0, no wait
	}
	return resp, rev, nil
}

// relay returns the relay stream to the leader at addr, opening one if
// there is none that works; relays to former leaders are closed, their
// waiting calls then made here.
func (f *forwarder) relay(addr string) (*relayClient, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for a, rc := range f.relays {
		if a != addr || !rc.usable() {
			rc.fail(errors.New("the write lead moved"))
			delete(f.relays, a)
		}
	}
	if rc := f.relays[addr]; rc != nil {
		return rc, nil
	}
	conn, err := f.connLocked(addr)
	if err != nil {
		return nil, err
	}
	rc := newRelayClient(conn)
	f.relays[addr] = rc
	return rc, nil
}

// conn returns the connection to the replica at addr.
func (f *forwarder) conn(addr string) (*grpc.ClientConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connLocked(addr)
}

func (f *forwarder) connLocked(addr string) (*grpc.ClientConn, error) {
	if c := f.conns[addr]; c != nil {
		return c, nil
	}
	c, err := grpc.NewClient(addr, append(grpcopt.DialOptions(), grpc.WithTransportCredentials(f.creds))...)
	if err != nil {
		return nil, fmt.Errorf("dialing the write lead %s: %w", addr, err)
	}
	f.conns[addr] = c
	return c, nil
}

// close closes the relays and connections to other replicas.
func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for addr, rc := range f.relays {
		rc.fail(errors.New("ipam-server is stopping"))
		delete(f.relays, addr)
	}
	for addr, c := range f.conns {
		_ = c.Close() // closing a client connection to another replica cannot lose anything
		delete(f.conns, addr)
	}
}

// advertiseAddr returns the address other replicas reach this one at:
// advertise when set, else the listener's address, its host replaced by
// the first address of a network interface that is up and not loopback
// when it listens on every address.
func advertiseAddr(advertise string, lis net.Listener) (string, error) {
	if advertise != "" {
		if _, _, err := net.SplitHostPort(advertise); err != nil {
			return "", fmt.Errorf("--advertise-addr %q: %w", advertise, err)
		}
		return advertise, nil
	}
	ap, err := netip.ParseAddrPort(lis.Addr().String())
	if err != nil {
		return lis.Addr().String(), nil
	}
	if !ap.Addr().IsUnspecified() {
		return ap.String(), nil
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("finding the address to advertise (set --advertise-addr): %w", err)
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.IsGlobalUnicast() {
				return net.JoinHostPort(ipn.IP.String(), strconv.Itoa(int(ap.Port()))), nil
			}
		}
	}
	return "", fmt.Errorf("no network interface address to advertise to the other replicas: set --advertise-addr")
}
