// Package ipamfn is the KRM function ipam-fn as a library: it reads its
// functionConfig, connects to ipam-server and runs the package engine
// (functions/engine) over the ResourceList, which turns the IPAM resources
// of a kpt package (NetworkInstance, IPPrefix, IPAllocation of
// ipam.nephio.org/v1alpha1) into one Sync call and writes the results back into their status. The
// ipam-fn binary runs it under kpt fn render.
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

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	"github.com/nephio-project/ipam/functions/engine"
)

// EnvServer is the environment variable that names the ipam-server address
// when the functionConfig does not (data.server wins).
const EnvServer = "IPAM_SERVER"

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
	// means engine.DefaultTimeout.
	Timeout time.Duration
	// TLSCA, TLSCert and TLSKey are PEM file paths: the CA that signed the
	// server certificate, and the client certificate and key for mTLS.
	// With none set the connection is plaintext.
	TLSCA, TLSCert, TLSKey string
	// TokenFile holds the bearer token that identifies the function to
	// ipam-server's authorization policy.
	TokenFile string
	// Source says where the package lives (a URL of its directory in
	// Git), sent to ipam-server for people. Empty: the root Kptfile's
	// ipam.nephio.org/source annotation, if any.
	Source string
}

// Options are the settings of cfg that the package engine needs.
func (c Config) Options() engine.Options {
	return engine.Options{Server: c.Server, Owner: c.Owner, Prune: c.Prune, Timeout: c.Timeout, Source: c.Source,
		ServerHint: "set data.server (host:port) in the functionConfig or the " + EnvServer + " environment variable"}
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

// configKeys are the settings of the functionConfig.
var configKeys = []string{"server", "owner", "prune", "timeout", "tlsCA", "tlsCert", "tlsKey", "tokenFile", "source"}

// ParseConfig reads the functionConfig: a ConfigMap whose data holds
// server, owner, prune, timeout, tlsCA, tlsCert, tlsKey, tokenFile and
// source, or
// an IPAMConfig (ipam.nephio.org/v1alpha1) with the same fields under spec,
// where an unknown field is an error. getenv (nil means no environment)
// supplies IPAM_SERVER when server is not set. An empty functionConfig is
// valid: every field takes its default.
func ParseConfig(fc *fn.KubeObject, getenv func(string) string) (Config, error) {
	cfg := Config{Prune: true, Timeout: engine.DefaultTimeout}
	var data map[string]string
	prefix := "data."
	if fc != nil && !fc.IsEmpty() {
		var err error
		switch {
		case fc.GetKind() == "ConfigMap":
			data, _, err = fc.NestedStringMap("data")
			if err != nil {
				return cfg, &ConfigError{Field: "data", Msg: "must map names to strings (quote values such as \"true\")"}
			}
		case engine.IsConfig(fc):
			prefix = "spec."
			if data, err = ipamConfigData(fc); err != nil {
				return cfg, err
			}
		default:
			return cfg, &ConfigError{Field: "kind", Msg: fmt.Sprintf("%s is not supported; use a ConfigMap with data.server or an %s %s with spec.server",
				fc.GetKind(), ipamv1alpha1.APIVersion, engine.KindIPAMConfig)}
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
				errs = append(errs, &ConfigError{Field: prefix + "prune", Msg: fmt.Sprintf("%q is not \"true\" or \"false\"", v)})
			}
			cfg.Prune = b
		case "timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				errs = append(errs, &ConfigError{Field: prefix + "timeout", Msg: fmt.Sprintf("%q is not a positive duration such as 10s", v)})
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
		case "source":
			cfg.Source = v
		}
	}
	if cfg.Server == "" && getenv != nil {
		cfg.Server = strings.TrimSpace(getenv(EnvServer))
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		errs = append(errs, &ConfigError{Field: prefix + "tlsCert", Msg: "tlsCert and tlsKey go together"})
	}
	return cfg, errors.Join(errs...)
}

// ipamConfigData reads the spec of an IPAMConfig as the ConfigMap's data:
// strings, prune a boolean; any other field is an error naming it.
func ipamConfigData(fc *fn.KubeObject) (map[string]string, error) {
	var spec map[string]any
	if _, err := fc.NestedResource(&spec, "spec"); err != nil {
		return nil, &ConfigError{Field: "spec", Msg: "must be a map of settings"}
	}
	data := map[string]string{}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(spec)) {
		switch v := spec[k]; {
		case !slices.Contains(configKeys, k):
			errs = append(errs, &ConfigError{Field: "spec." + k, Msg: "unknown field (" + strings.Join(configKeys, ", ") + ")"})
		case k == "prune":
			b, ok := v.(bool)
			if !ok {
				errs = append(errs, &ConfigError{Field: "spec.prune", Msg: fmt.Sprintf("%v is not true or false", v)})
				continue
			}
			data[k] = strconv.FormatBool(b)
		default:
			str, ok := v.(string)
			if !ok {
				errs = append(errs, &ConfigError{Field: "spec." + k, Msg: fmt.Sprintf("%v must be a string", v)})
				continue
			}
			data[k] = str
		}
	}
	return data, errors.Join(errs...)
}
