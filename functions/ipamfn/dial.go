package ipamfn

import (
	"errors"
	"fmt"

	"google.golang.org/grpc"

	"github.com/nephio-project/ipam/service/client"
)

// configFields names each client setting as the functionConfig writes it.
var configFields = map[client.Option]string{
	client.OptServer: "data.server",
	client.OptCA:     "data.tlsCA",
	client.OptCert:   "data.tlsCert",
	client.OptKey:    "data.tlsKey",
	client.OptToken:  "data.tokenFile",
}

// Dial returns a client connection to cfg.Server (see package client for
// the TLS and token rules). It does not wait for the server; the first
// call does, within the run's timeout.
func Dial(cfg Config) (*grpc.ClientConn, error) {
	if cfg.Server == "" {
		return nil, fmt.Errorf("ipam-fn: no ipam-server address: set data.server (host:port) in the functionConfig or the %s environment variable", EnvServer)
	}
	conn, err := client.Dial(client.Config{Server: cfg.Server, CA: cfg.TLSCA, Cert: cfg.TLSCert, Key: cfg.TLSKey,
		TokenFile: cfg.TokenFile, UserAgent: "ipam-fn"})
	var oe *client.OptionError
	if errors.As(err, &oe) {
		return nil, &ConfigError{Field: configFields[oe.Option], Msg: oe.Err.Error()}
	}
	return conn, err
}
