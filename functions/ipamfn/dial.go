package ipamfn

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/nephio-project/ipam/service/grpcopt"
)

// Dial returns a client connection to cfg.Server: TLS when any of the TLS
// files is set, plaintext otherwise. It does not wait for the server; the
// first call does, within the run's timeout.
func Dial(cfg Config) (*grpc.ClientConn, error) {
	if cfg.Server == "" {
		return nil, fmt.Errorf("ipam-fn: no ipam-server address: set data.server (host:port) in the functionConfig or the %s environment variable", EnvServer)
	}
	creds, err := transportCredentials(cfg)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(cfg.Server, append(grpcopt.DialOptions(),
		grpc.WithTransportCredentials(creds),
		grpc.WithUserAgent("ipam-fn"))...)
	if err != nil {
		return nil, fmt.Errorf("ipam-fn: ipam-server address %q: %w", cfg.Server, err)
	}
	return conn, nil
}

func transportCredentials(cfg Config) (credentials.TransportCredentials, error) {
	if cfg.TLSCA == "" && cfg.TLSCert == "" && cfg.TLSKey == "" {
		return insecure.NewCredentials(), nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.TLSCA != "" {
		pem, err := os.ReadFile(cfg.TLSCA)
		if err != nil {
			return nil, &ConfigError{Field: "data.tlsCA", Msg: err.Error()}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &ConfigError{Field: "data.tlsCA", Msg: cfg.TLSCA + " holds no PEM certificate"}
		}
		tc.RootCAs = pool
	}
	if cfg.TLSCert != "" || cfg.TLSKey != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, &ConfigError{Field: "data.tlsCert", Msg: err.Error()}
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(tc), nil
}
