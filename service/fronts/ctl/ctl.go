// Package ctl is ipamctl: a command line client of ipam-server that lists,
// shows, creates and deletes network instances, prefixes, ranges and
// allocations, and prints a network instance's prefix tree with its
// utilization.
package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	ipamclient "github.com/nephio-project/ipam/service/client"
)

// DefaultServer is the server address when neither --server nor
// $IPAM_SERVER is set.
const DefaultServer = "127.0.0.1:9090"

// Exit codes of Run.
const (
	ExitOK    = 0
	ExitError = 1 // the call failed; the server's message is printed
	ExitUsage = 2 // the command line is wrong
)

const usage = `Usage: ipamctl [global flags] COMMAND

Commands:
  vrf    list|get|create|delete   network instances (VRFs)
  prefix list|get|create|delete   IPPrefixes
  range  list|get|create|delete   IP ranges
  alloc  list|get|create|delete   IPAllocations
  tree VRF                        a network instance's prefix hierarchy with utilization

Examples:
  ipamctl vrf list
  ipamctl vrf create vpc-2 --prefix 192.168.0.0/16
  ipamctl prefix create net1-prefix1 --vrf vpc-1 --prefix 10.0.1.1/24 --network net1 --label nephio.org/gateway=true
  ipamctl alloc create alloc1 --selector nephio.org/network-instance=vpc-1 --selector nephio.org/network-name=net1
  ipamctl -o yaml alloc get alloc1
  ipamctl tree vpc-1

Run "ipamctl COMMAND VERB --help" for the flags of a command.

Global flags (also accepted after the command):
`

// globals are the flags every command accepts.
type globals struct {
	server  string
	tlsCA   string
	tlsCert string
	tlsKey  string
	token   string
	output  string
	timeout time.Duration
}

func (g *globals) register(fs *flag.FlagSet) {
	def := os.Getenv("IPAM_SERVER")
	if def == "" {
		def = DefaultServer
	}
	fs.StringVar(&g.server, "server", def, "ipam-server address host:port ($IPAM_SERVER)")
	fs.StringVar(&g.tlsCA, "tls-ca", "", "PEM file of the CA that signed the server certificate (enables TLS)")
	fs.StringVar(&g.tlsCert, "tls-cert", "", "PEM file of the client certificate (mTLS; enables TLS)")
	fs.StringVar(&g.tlsKey, "tls-key", "", "PEM file of the client key (mTLS)")
	fs.StringVar(&g.token, "token-file", "", "file holding a bearer token that identifies you to ipam-server (sent over TLS or to loopback only)")
	fs.StringVar(&g.output, "o", "table", "output format: table, yaml or json")
	fs.StringVar(&g.output, "output", "table", "output format: table, yaml or json")
	fs.DurationVar(&g.timeout, "timeout", 30*time.Second, "timeout of the call")
}

// Run runs ipamctl with args (without the program name), writing results
// to stdout and errors to stderr, and returns the exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var g globals
	fs := flag.NewFlagSet("ipamctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	g.register(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return ExitUsage
	}
	cmd, err := lookup(rest)
	if err != nil {
		fmt.Fprintf(stderr, "ipamctl: %v\n\n", err)
		fs.Usage()
		return ExitUsage
	}
	words := 2
	if cmd.name == "tree" {
		words = 1
	}
	// The global flags given before the command are set again in the
	// command's flag set, so flags may come before or after the command.
	given := map[string]string{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = f.Value.String() })
	cfs := flag.NewFlagSet("ipamctl "+strings.Join(rest[:words], " "), flag.ContinueOnError)
	cfs.SetOutput(stderr)
	g.register(cfs)
	for name, v := range given {
		_ = cfs.Set(name, v)
	}
	opts := cmd.flags(cfs)
	cfs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: ipamctl %s %s\n\nFlags:\n", strings.Join(rest[:words], " "), cmd.args)
		cfs.PrintDefaults()
	}
	pos, err := parseInterspersed(cfs, rest[words:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if len(pos) != cmd.nargs {
		fmt.Fprintf(stderr, "ipamctl %s: want %s\n", strings.Join(rest[:words], " "), cmd.args)
		cfs.Usage()
		return ExitUsage
	}
	out, err := newPrinter(g.output, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "ipamctl: %v\n", err)
		return ExitUsage
	}
	conn, err := dial(g)
	if err != nil {
		fmt.Fprintf(stderr, "ipamctl: %v\n", err)
		return ExitUsage
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	if err := cmd.run(ctx, ipamv1.NewIPAMClient(conn), out, pos, opts); err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "ipamctl: %v\n", err)
			return ExitUsage
		}
		fmt.Fprintf(stderr, "Error: %s\n", status.Convert(err).Message())
		return ExitError
	}
	return ExitOK
}

// usageError is a bad flag value found while running a command.
type usageError struct{ msg string }

// Error returns the message.
func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// parseInterspersed parses flags that may come before, between or after
// positional arguments, and returns the positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// ctlFlags names each client setting as ipamctl's flags do.
var ctlFlags = map[ipamclient.Option]string{
	ipamclient.OptServer: "--server",
	ipamclient.OptCA:     "--tls-ca",
	ipamclient.OptCert:   "--tls-cert",
	ipamclient.OptKey:    "--tls-key",
	ipamclient.OptToken:  "--token-file",
}

// dial connects to the server (see package client for the TLS and token
// rules).
func dial(g globals) (*grpc.ClientConn, error) {
	conn, err := ipamclient.Dial(ipamclient.Config{Server: g.server, CA: g.tlsCA, Cert: g.tlsCert, Key: g.tlsKey,
		TokenFile: g.token, UserAgent: "ipamctl"})
	var oe *ipamclient.OptionError
	if errors.As(err, &oe) {
		return nil, fmt.Errorf("%s: %w", ctlFlags[oe.Option], oe.Err)
	}
	return conn, err
}
