package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	resourcepb "github.com/nephio-project/ipam/api/proto/resource"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server/authz"
)

// Default limits of the Watch streams open at once. Every open Watch
// costs the server memory (its goroutine, HTTP/2 stream and a backlog of
// up to the watch buffer's events) and, worse, a send on every change it
// matches: with 3,000 unfiltered streams open, an Allocate took 100 ms
// instead of 0.2 ms. A client needs one Watch per cache it keeps current
// (per network instance or owner it follows, or one for everything); the
// project's clients open one or two.
const (
	// DefaultMaxWatchesPerConn bounds the Watch streams open at once on
	// one connection: far more than a process needs, few enough that one
	// connection adds little to every change's cost.
	DefaultMaxWatchesPerConn = 64
	// DefaultMaxWatchesPerIdentity bounds the Watch streams open at once
	// of one caller over all its connections: room for several replicas
	// or processes sharing an identity (four connections at the
	// per-connection limit).
	DefaultMaxWatchesPerIdentity = 256
)

// watchMethod is the full name of the IPAM Watch method, and
// resourceWatchMethod of Nephio's resource API's WatchClaim, which runs
// one: both count against the same limits.
const (
	watchMethod         = ipamv1.IPAM_Watch_FullMethodName
	resourceWatchMethod = resourcepb.Resource_WatchClaim_FullMethodName
)

// watchLimits refuses, with ResourceExhausted naming the limit and its
// flag, a Watch stream beyond the streams that may be open at once on its
// connection or of its caller. A stream's slots are given back when its
// handler returns, however it ends.
//
// A connection is named by its peer address (IP and port), unique among
// the open TCP connections. The caller is the authenticated principal,
// named by its first name (a certificate's URI SAN before its DNS SANs
// and common name, a certificate before a token). An anonymous caller
// (the server has neither a client CA nor a policy, or the caller
// presents neither a certificate nor a token) is named by its IP address
// instead, or the /64 of an IPv6 address, which a single host commonly
// holds: one budget shared by every anonymous client would let one of
// them take it all and lock the others out.
type watchLimits struct {
	perConn, perCaller int // 0: unlimited
	log                *slog.Logger
	logs               refusalLog

	mu       sync.Mutex
	byConn   map[string]int // open Watch streams by connection
	byCaller map[string]int // open Watch streams by caller
}

// newWatchLimits returns the limits of cfg: 0 stands for the default and
// a negative limit for none.
func newWatchLimits(cfg Config, log *slog.Logger) *watchLimits {
	limit := func(n, def int) int {
		switch {
		case n == 0:
			return def
		case n < 0:
			return 0
		}
		return n
	}
	return &watchLimits{
		perConn:   limit(cfg.MaxWatchesPerConn, DefaultMaxWatchesPerConn),
		perCaller: limit(cfg.MaxWatchesPerIdentity, DefaultMaxWatchesPerIdentity),
		log:       log, byConn: map[string]int{}, byCaller: map[string]int{},
	}
}

// stream is a stream interceptor that holds a Watch stream's slots while
// its handler runs, or refuses it; other streams pass. It runs after the
// authenticator, which names the caller.
func (l *watchLimits) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod != watchMethod && info.FullMethod != resourceWatchMethod {
		return handler(srv, ss)
	}
	conn, caller := l.names(ss.Context())
	if err := l.acquire(conn, caller); err != nil {
		if n, ok := l.logs.allow(time.Now()); ok {
			l.log.Warn("refused a Watch stream", "peer", conn, "caller", caller, "reason", err.Error(), "suppressed_before", n)
		}
		return toStatus(err)
	}
	defer l.release(conn, caller)
	return handler(srv, ss)
}

// names returns the names of the connection and of the caller of ctx.
func (l *watchLimits) names(ctx context.Context) (conn, caller string) {
	conn = "unknown"
	if pe, ok := peer.FromContext(ctx); ok && pe.Addr != nil {
		conn = pe.Addr.String()
	}
	return conn, callerName(principalOf(ctx), conn)
}

// callerName names, for the limits on what one caller may hold open, the
// caller pr calling from addr (host:port): its first name, or when it is
// anonymous (or not authenticated at all) its address group.
func callerName(pr authz.Principal, addr string) string {
	if len(pr.Names) > 0 && pr.Names[0] != authz.Anonymous {
		return pr.String()
	}
	return "anonymous from " + addrGroup(addr)
}

// addrGroup is the IP address of a host:port, or its /64 for IPv6; the
// address itself when it is not host:port.
func addrGroup(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		return netip.PrefixFrom(ip, 64).Masked().String()
	}
	return ip.String()
}

// acquire takes a slot of the connection and one of the caller, or
// returns which limit is reached.
func (l *watchLimits) acquire(conn, caller string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perConn > 0 && l.byConn[conn] >= l.perConn {
		return &codedError{sentinel: ipam.ErrExhausted, msg: fmt.Sprintf(
			"too many Watch streams on this connection: at most %d may be open at once (ipam-server --max-watches-per-conn); close one first", l.perConn)}
	}
	if l.perCaller > 0 && l.byCaller[caller] >= l.perCaller {
		return &codedError{sentinel: ipam.ErrExhausted, msg: fmt.Sprintf(
			"too many Watch streams of caller %s: at most %d may be open at once (ipam-server --max-watches-per-identity); close one first", ipam.Quote(caller), l.perCaller)}
	}
	l.byConn[conn]++
	l.byCaller[caller]++
	return nil
}

// release gives back the slots acquire took.
func (l *watchLimits) release(conn, caller string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	countDown(l.byConn, conn)
	countDown(l.byCaller, caller)
}

// countDown takes one from m[k], deleting it at zero.
func countDown(m map[string]int, k string) {
	if m[k] <= 1 {
		delete(m, k)
		return
	}
	m[k]--
}
