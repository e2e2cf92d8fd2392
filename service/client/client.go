// Package client is how every front reaches ipam-server: ipam-fn, the
// Porch injector, the controllers and ipamctl dial through it, so they
// share one set of transport options, one TLS/mTLS rule and one way to
// present a bearer token.
//
// The rule: with none of CA, Cert and Key set the connection is
// plaintext; with any of them it is TLS, verified by CA (the system roots
// without one), and Cert with Key add a client certificate (mTLS). A
// token, read from TokenFile, is sent as "authorization: Bearer <token>"
// on every call, and only over TLS or to a loopback address, where no one
// can read it on the way.
package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/nephio-project/ipam/service/grpcopt"
)

// MaxTokenSize bounds a token file.
const MaxTokenSize = 4 << 10

// Option names one setting of Config in an OptionError, so that each
// front can name it as its users write it (--tls-ca, data.tlsCA).
type Option string

// The settings an OptionError names.
const (
	OptServer Option = "server"
	OptCA     Option = "ca"
	OptCert   Option = "cert"
	OptKey    Option = "key"
	OptToken  Option = "token"
)

// OptionError is a setting of Config that cannot be used.
type OptionError struct {
	Option Option
	Err    error
}

// Error names the setting and the problem.
func (e *OptionError) Error() string { return string(e.Option) + ": " + e.Err.Error() }

// Unwrap returns the problem.
func (e *OptionError) Unwrap() error { return e.Err }

// Config is how a front reaches ipam-server.
type Config struct {
	// Server is the address, host:port.
	Server string
	// CA, Cert and Key are PEM files: the CA that signed the server's
	// certificate, and the client certificate and key for mTLS.
	CA, Cert, Key string
	// TokenFile holds a bearer token that identifies the client to the
	// server's authorization policy.
	TokenFile string
	// UserAgent names the front in the server's logs.
	UserAgent string
}

// TLS reports whether the connection uses TLS.
func (c Config) TLS() bool { return c.CA != "" || c.Cert != "" || c.Key != "" }

// DialOptions returns the dial options of c: the shared transport
// options, the transport credentials and the token, if any.
func DialOptions(c Config) ([]grpc.DialOption, error) {
	if c.Server == "" {
		return nil, &OptionError{Option: OptServer, Err: errors.New("the address of ipam-server (host:port) is required")}
	}
	creds, err := transportCredentials(c)
	if err != nil {
		return nil, err
	}
	opts := append(grpcopt.DialOptions(), grpc.WithTransportCredentials(creds))
	if c.UserAgent != "" {
		opts = append(opts, grpc.WithUserAgent(c.UserAgent))
	}
	if c.TokenFile != "" {
		tok, err := readToken(c.TokenFile)
		if err != nil {
			return nil, &OptionError{Option: OptToken, Err: err}
		}
		if !c.TLS() && !Loopback(c.Server) {
			return nil, &OptionError{Option: OptToken, Err: fmt.Errorf("a token is sent only over TLS or to a loopback address, and %s is neither: set a CA", c.Server)}
		}
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: tok, secure: c.TLS()}))
	}
	return opts, nil
}

// Dial returns a client connection to c.Server. It does not wait for the
// server; the first call does.
func Dial(c Config) (*grpc.ClientConn, error) {
	opts, err := DialOptions(c)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(c.Server, opts...)
	if err != nil {
		return nil, &OptionError{Option: OptServer, Err: fmt.Errorf("%q: %w", c.Server, err)}
	}
	return conn, nil
}

func transportCredentials(c Config) (credentials.TransportCredentials, error) {
	if !c.TLS() {
		return insecure.NewCredentials(), nil
	}
	tc, err := TLSConfig(c.CA, c.Cert, c.Key)
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(tc), nil
}

// TLSConfig is the client TLS configuration of PEM files: the CA that
// signs the server's certificate (empty: the system's roots) and the
// client certificate and key for mTLS (both or neither). Its errors are
// *OptionError naming OptCA or OptCert. Every client of the project that
// speaks TLS (to ipam-server, to etcd) builds its configuration here.
func TLSConfig(ca, cert, key string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, &OptionError{Option: OptCA, Err: err}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &OptionError{Option: OptCA, Err: fmt.Errorf("%s holds no PEM certificate", ca)}
		}
		tc.RootCAs = pool
	}
	if cert != "" || key != "" {
		if cert == "" || key == "" {
			return nil, &OptionError{Option: OptCert, Err: errors.New("the client certificate and key go together")}
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, &OptionError{Option: OptCert, Err: err}
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// readToken reads a token file: one line, surrounding white space dropped.
func readToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	b := make([]byte, MaxTokenSize+1)
	n, _ := f.Read(b)
	if n > MaxTokenSize {
		return "", fmt.Errorf("%s is larger than %d bytes", path, MaxTokenSize)
	}
	tok := strings.TrimSpace(string(b[:n]))
	if tok == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	for _, r := range tok {
		if r <= ' ' || r > '~' {
			return "", fmt.Errorf("%s holds a character a token cannot have (printable ASCII without spaces)", path)
		}
	}
	return tok, nil
}

// Loopback reports whether addr (host:port) names a loopback address.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// bearer sends the token on every call.
type bearer struct {
	token  string
	secure bool
}

// GetRequestMetadata returns the authorization header.
func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity is true over TLS; a plaintext connection is
// allowed only to loopback addresses (checked by DialOptions).
func (b bearer) RequireTransportSecurity() bool { return b.secure }
