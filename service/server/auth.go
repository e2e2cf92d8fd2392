package server

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server/authz"
	"github.com/nephio-project/ipam/service/server/web"
)

// authenticator turns a call's client certificate and bearer token into a
// Principal. With a client CA it verifies the certificate itself instead
// of letting the TLS handshake refuse it, so that a refused client learns
// why (Unauthenticated with the reason) and the server logs who.
//
// A change another replica forwards (forwardedHeader) under mTLS carries
// the names of its caller's certificate (forwardedForHeader, or the
// relayed call's caller_names), which the forwarding replica verified:
// when the certificate of the replica itself is one the policy names as
// a replica, the call is made as that caller (its names, plus the
// identity of the bearer token it carries), never as the replica. Anyone
// else stating a caller's names is refused (PermissionDenied).
type authenticator struct {
	clientCAs *x509.CertPool // nil: no client certificates (no mTLS)
	policy    *authz.Policy  // nil: no tokens, everything allowed
	log       *slog.Logger
	logs      refusalLog

	mu    sync.Mutex
	certs map[[sha256.Size]byte]verified // verified leaf certificates
}

// verified is the outcome of verifying one client certificate.
type verified struct {
	names []string
	err   error
	until time.Time // verify again after this
}

// maxCachedCerts bounds the verification cache; it is emptied when full.
const maxCachedCerts = 4096

// reverify is how long a verification is reused.
const reverify = time.Minute

type principalKey struct{}

// caller is what the authenticator puts in a call's context.
type caller struct {
	principal authz.Principal
	certNames []string // the names of the caller's client certificate (mTLS), as verified
}

// principalOf returns the Principal the authenticator put in ctx.
func principalOf(ctx context.Context) authz.Principal {
	c, _ := ctx.Value(principalKey{}).(caller)
	return c.principal
}

// certNamesOf returns the names of the client certificate of the caller
// of ctx, as the authenticator verified them (or a replica stated them);
// nil without mTLS.
func certNamesOf(ctx context.Context) []string {
	c, _ := ctx.Value(principalKey{}).(caller)
	return c.certNames
}

// errNotAReplica refuses a caller that states another caller's identity
// without being a replica the policy names.
var errNotAReplica = fmt.Errorf("%w: only a replica named under replicas in the authorization policy, presenting its client certificate, may state who a forwarded call's caller is (%s)", authz.ErrDenied, forwardedForHeader)

// authenticate returns the caller of ctx, or an Unauthenticated (or, for
// a stated identity it does not believe, PermissionDenied) status saying
// why it is refused.
func (a *authenticator) authenticate(ctx context.Context, method string) (caller, error) {
	pe, _ := peer.FromContext(ctx)
	var certs []*x509.Certificate
	if pe != nil {
		if ti, ok := pe.AuthInfo.(credentials.TLSInfo); ok {
			certs = ti.State.PeerCertificates
		}
	}
	var fwd *forwardedCaller
	stated := metadata.ValueFromIncomingContext(ctx, forwardedForHeader)
	if len(stated) > 0 || len(metadata.ValueFromIncomingContext(ctx, forwardedHeader)) > 0 {
		fwd = &forwardedCaller{names: stated, stated: len(stated) > 0}
	}
	c, err := a.identify(certs, metadata.ValueFromIncomingContext(ctx, "authorization"), fwd)
	if err != nil {
		addr := "unknown"
		if pe != nil && pe.Addr != nil {
			addr = pe.Addr.String()
		}
		a.refused(addr, method, err)
		if errors.Is(err, authz.ErrDenied) {
			return c, status.Error(codes.PermissionDenied, err.Error())
		}
		return c, status.Error(codes.Unauthenticated, err.Error())
	}
	return c, nil
}

// forwardedCaller is what a call another replica forwarded says of its
// caller: the names of its certificate (none when it had none) and
// whether any were stated.
type forwardedCaller struct {
	names  []string
	stated bool
}

// identify returns the caller that presents certs (its TLS peer chain,
// leaf first) and the values of its authorization header, or why it is
// refused. fwd is what a forwarded call says of its caller (nil for a
// call that does not claim to be forwarded): believed only from a
// replica, whose certs name one of the policy's replicas.
func (a *authenticator) identify(certs []*x509.Certificate, auth []string, fwd *forwardedCaller) (caller, error) {
	var c caller
	if a.clientCAs != nil {
		names, err := a.verifyCerts(certs)
		if err != nil {
			return c, fmt.Errorf("ipam-server requires a client certificate signed by its client CA (mTLS): %w", err)
		}
		if fwd != nil && a.policy != nil && a.policy.Replica(authz.Principal{Names: names}) {
			names = fwd.names // the forwarding replica's caller, never the replica itself
		} else if fwd != nil && fwd.stated {
			return c, errNotAReplica
		}
		c.certNames = names
	} else if fwd != nil && fwd.stated {
		return c, errNotAReplica
	}
	pr := authz.Principal{Names: c.certNames}
	if a.policy != nil && len(auth) > 0 {
		tok, ok := strings.CutPrefix(auth[0], "Bearer ")
		if !ok || len(auth) > 1 {
			return c, errors.New("the authorization header is not one \"Bearer TOKEN\"")
		}
		id, err := a.policy.Token(tok)
		if err != nil {
			return c, err
		}
		pr.Names = append(slices.Clip(pr.Names), id) // a copy: certNames may be the verification cache's
	}
	if len(pr.Names) == 0 {
		pr.Names = []string{authz.Anonymous}
	}
	c.principal = pr
	return c, nil
}

// verifyCerts verifies a client's certificate chain (leaf first) against
// the client CAs and returns the names the leaf carries.
func (a *authenticator) verifyCerts(certs []*x509.Certificate) ([]string, error) {
	if len(certs) == 0 {
		return nil, errors.New("no client certificate was presented")
	}
	leaf := certs[0]
	sum := sha256.Sum256(leaf.Raw)
	now := time.Now()
	a.mu.Lock()
	v, ok := a.certs[sum]
	a.mu.Unlock()
	if ok && now.Before(v.until) {
		return v.names, v.err
	}
	v = verified{until: now.Add(reverify)}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: a.clientCAs, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		v.err = fmt.Errorf("certificate %s: %w", ipam.Quote(leaf.Subject.String()), err)
	} else {
		v.names = certNames(leaf)
		if leaf.NotAfter.Before(v.until) {
			v.until = leaf.NotAfter
		}
	}
	a.mu.Lock()
	if len(a.certs) >= maxCachedCerts {
		clear(a.certs)
	}
	a.certs[sum] = v
	a.mu.Unlock()
	return v.names, v.err
}

// authorizeHTTP refuses a web view request whose caller is unknown
// (web.UnauthenticatedError) or may not read.
func (a *authenticator) authorizeHTTP(r *http.Request) error {
	c, err := a.identify(httpCerts(r), r.Header.Values("Authorization"), nil)
	if err != nil {
		a.refused(r.RemoteAddr, "web "+r.URL.Path, err)
		return &web.UnauthenticatedError{Err: err}
	}
	if a.policy != nil {
		if err := a.policy.Read(c.principal); err != nil {
			a.refused(r.RemoteAddr, "web "+r.URL.Path, err)
			return err
		}
	}
	return nil
}

// clientHTTP names the client of an authorized web view request, for
// the limit on its live-update streams, as a Watch's caller is named.
func (a *authenticator) clientHTTP(r *http.Request) string {
	c, err := a.identify(httpCerts(r), r.Header.Values("Authorization"), nil)
	if err != nil {
		c = caller{}
	}
	return callerName(c.principal, r.RemoteAddr)
}

// httpCerts is the TLS peer chain of an HTTP request, leaf first.
func httpCerts(r *http.Request) []*x509.Certificate {
	if r.TLS == nil {
		return nil
	}
	return r.TLS.PeerCertificates
}

// certNames are the names a verified certificate goes by: its URI SANs,
// DNS SANs and common name, most specific first.
func certNames(c *x509.Certificate) []string {
	var names []string
	for _, u := range c.URIs {
		names = append(names, "uri:"+u.String())
	}
	for _, d := range c.DNSNames {
		names = append(names, "dns:"+d)
	}
	if c.Subject.CommonName != "" {
		names = append(names, "cn:"+c.Subject.CommonName)
	}
	return names
}

// refused logs a refused caller, at most refusalLogBurst lines per
// refusalLogWindow so that a flood of bad clients cannot fill the log.
func (a *authenticator) refused(addr, method string, err error) {
	if a.log == nil {
		return
	}
	if n, ok := a.logs.allow(time.Now()); ok {
		a.log.Warn("refused a caller", "peer", addr, "method", method, "reason", err.Error(), "suppressed_before", n)
	}
}

// refusalLog limits the refusal log lines.
type refusalLog struct {
	mu         sync.Mutex
	window     time.Time
	n          int
	suppressed atomic.Int64
}

const (
	refusalLogWindow = 10 * time.Second
	refusalLogBurst  = 20
)

// allow reports whether a line may be logged now and how many were
// suppressed since the last one that was.
func (l *refusalLog) allow(now time.Time) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.window) > refusalLogWindow {
		l.window, l.n = now, 0
	}
	if l.n >= refusalLogBurst {
		l.suppressed.Add(1)
		return 0, false
	}
	l.n++
	return l.suppressed.Swap(0), true
}

// unary authenticates a call and puts its Principal in the context.
func (a *authenticator) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	c, err := a.authenticate(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return handler(context.WithValue(ctx, principalKey{}, c), req)
}

// stream authenticates a stream and puts its Principal in the context.
func (a *authenticator) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	c, err := a.authenticate(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return handler(srv, &principalStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), principalKey{}, c)})
}

type principalStream struct {
	grpc.ServerStream
	ctx context.Context
}

// Context returns the stream's context with its Principal.
func (s *principalStream) Context() context.Context { return s.ctx }
