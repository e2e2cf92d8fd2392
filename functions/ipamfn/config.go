// Package ipamfn is the KRM function ipam-fn as a library: it turns the
// IPAM resources of a kpt package (NetworkInstance, IPPrefix, IPAllocation
// of ipam.nephio.org/v1alpha1) into one Sync call to ipam-server and writes
// the results back into their status. The ipam-fn binary runs it under
// kpt fn render; the Porch injector calls Process directly.
package ipamfn

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kptdev/krm-functions-sdk/go/fn"
)

// EnvServer is the environment variable that names the ipam-server address
// when the functionConfig does not (data.server wins).
const EnvServer = "IPAM_SERVER"

// DefaultTimeout bounds one run's call to ipam-server when the
// functionConfig sets no data.timeout.
const DefaultTimeout = 10 * time.Second

// Config is what one run needs to know: where the server is, how to reach
// it, and whose objects the package declares.
type Config struct {
	// Server is the ipam-server address, host:port.
	Server string
	// Owner is the owner of every object the package declares. Empty means
	// the name of the package's root Kptfile.
	Owner string
	// Prune releases the owner's objects that the package no longer
	// declares. ParseConfig defaults it to true.
	Prune bool
	// Timeout bounds the call to ipam-server, connecting included. Zero
	// means DefaultTimeout.
	Timeout time.Duration
	// TLSCA, TLSCert and TLSKey are PEM file paths: the CA that signed the
	// server certificate, and the client certificate and key for mTLS.
	// With none set the connection is plaintext.
	TLSCA, TLSCert, TLSKey string
	// TokenFile holds the bearer token that identifies the function to
	// ipam-server's authorization policy.
	TokenFile string
	// Now is the clock of condition lastTransitionTime; nil means time.Now.
	Now func() time.Time
}

// ConfigError is a functionConfig field that cannot be used.
type ConfigError struct {
	// Field is the path of the field, e.g. data.timeout.
	Field string
	// Msg says what is wrong with it.
	Msg string
}

// Error renders the field and the problem.
func (e *ConfigError) Error() string {
	return "ipam-fn: functionConfig " + e.Field + ": " + e.Msg
}

// ParseConfig reads the functionConfig, a ConfigMap whose data holds
// server, owner, prune, timeout, tlsCA, tlsCert, tlsKey and tokenFile. getenv (nil
// means no environment) supplies IPAM_SERVER when data.server is not set.
// An empty functionConfig is valid: every field takes its default.
func ParseConfig(fc *fn.KubeObject, getenv func(string) string) (Config, error) {
	cfg := Config{Prune: true, Timeout: DefaultTimeout}
	var data map[string]string
	if fc != nil && !fc.IsEmpty() {
		if kind := fc.GetKind(); kind != "ConfigMap" {
			return cfg, &ConfigError{Field: "kind", Msg: fmt.Sprintf("%s is not supported; use a ConfigMap with data.server", kind)}
		}
		var err error
		data, _, err = fc.NestedStringMap("data")
		if err != nil {
			return cfg, &ConfigError{Field: "data", Msg: "must map names to strings (quote values such as \"true\")"}
		}
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(data)) {
		v := strings.TrimSpace(data[k])
		switch k {
		case "server":
			cfg.Server = v
		case "owner":
			cfg.Owner = v
		case "prune":
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, &ConfigError{Field: "data.prune", Msg: fmt.Sprintf("%q is not \"true\" or \"false\"", v)})
			}
			cfg.Prune = b
		case "timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				errs = append(errs, &ConfigError{Field: "data.timeout", Msg: fmt.Sprintf("%q is not a positive duration such as 10s", v)})
			} else {
				cfg.Timeout = d
			}
		case "tlsCA":
			cfg.TLSCA = v
		case "tlsCert":
			cfg.TLSCert = v
		case "tlsKey":
			cfg.TLSKey = v
		case "tokenFile":
			cfg.TokenFile = v
		}
	}
	if cfg.Server == "" && getenv != nil {
		cfg.Server = strings.TrimSpace(getenv(EnvServer))
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		errs = append(errs, &ConfigError{Field: "data.tlsCert", Msg: "tlsCert and tlsKey go together"})
	}
	return cfg, errors.Join(errs...)
}

func (c Config) timeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

func (c Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}
