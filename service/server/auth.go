package server

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
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

// principalOf returns the Principal the authenticator put in ctx.
func principalOf(ctx context.Context) authz.Principal {
	p, _ := ctx.Value(principalKey{}).(authz.Principal)
	return p
}

// authenticate returns the caller of ctx, or an Unauthenticated status
// saying why it is refused.
func (a *authenticator) authenticate(ctx context.Context, method string) (authz.Principal, error) {
	pe, _ := peer.FromContext(ctx)
	var certs []*x509.Certificate
	if pe != nil {
		if ti, ok := pe.AuthInfo.(credentials.TLSInfo); ok {
			certs = ti.State.PeerCertificates
		}
	}
	pr, err := a.identify(certs, metadata.ValueFromIncomingContext(ctx, "authorization"))
	if err != nil {
		addr := "unknown"
		if pe != nil && pe.Addr != nil {
			addr = pe.Addr.String()
		}
		a.refused(addr, method, err)
		return pr, status.Error(codes.Unauthenticated, err.Error())
	}
	return pr, nil
}

// identify returns the caller that presents certs (its TLS peer chain,
// leaf first) and the values of its authorization header, or why it is
// refused.
func (a *authenticator) identify(certs []*x509.Certificate, auth []string) (authz.Principal, error) {
	var pr authz.Principal
	if a.clientCAs != nil {
		names, err := a.verifyCerts(certs)
		if err != nil {
			return pr, fmt.Errorf("ipam-server requires a client certificate signed by its client CA (mTLS): %w", err)
		}
		pr.Names = names
	}
	if a.policy != nil && len(auth) > 0 {
		tok, ok := strings.CutPrefix(auth[0], "Bearer ")
		if !ok || len(auth) > 1 {
			return pr, errors.New("the authorization header is not one \"Bearer TOKEN\"")
		}
		id, err := a.policy.Token(tok)
		if err != nil {
			return pr, err
		}
		pr.Names = append(pr.Names, id)
	}
	if len(pr.Names) == 0 {
		pr.Names = []string{authz.Anonymous}
	}
	return pr, nil
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
	var certs []*x509.Certificate
	if r.TLS != nil {
		certs = r.TLS.PeerCertificates
	}
	pr, err := a.identify(certs, r.Header.Values("Authorization"))
	if err != nil {
		a.refused(r.RemoteAddr, "web "+r.URL.Path, err)
		return &web.UnauthenticatedError{Err: err}
	}
	if a.policy != nil {
		if err := a.policy.Read(pr); err != nil {
			a.refused(r.RemoteAddr, "web "+r.URL.Path, err)
			return err
		}
	}
	return nil
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
	pr, err := a.authenticate(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return handler(context.WithValue(ctx, principalKey{}, pr), req)
}

// stream authenticates a stream and puts its Principal in the context.
func (a *authenticator) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	pr, err := a.authenticate(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return handler(srv, &principalStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), principalKey{}, pr)})
}

type principalStream struct {
	grpc.ServerStream
	ctx context.Context
}

// Context returns the stream's context with its Principal.
func (s *principalStream) Context() context.Context { return s.ctx }
