// Package ctl is ipamctl: a command line client of ipam-server that lists,
// shows, creates and deletes network instances, prefixes, ranges and
// allocations, and prints a network instance's prefix tree with its
// utilization. It is built on cobra, as kubectl, kpt and porchctl are:
// help per command group, shell completion, and flags before or after
// the arguments.
package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	ipamclient "github.com/nephio-project/ipam/service/client"
)

// DefaultServer is the server address when neither --server nor
// $IPAM_SERVER is set.
const DefaultServer = "127.0.0.1:9090"

// Version is ipamctl's version; make build sets it from git describe.
// Empty means the module version of the build, if any.
var Version = ""

// Exit codes of Run.
const (
	ExitOK    = 0
	ExitError = 1 // the call failed; the server's message is printed
	ExitUsage = 2 // the command line is wrong
	// ExitFindings: audit found differences between the packages and the
	// server (printed).
	ExitFindings = 3
)

const examples = `  ipamctl vrf list
  ipamctl vrf create vpc-2 --prefix 192.168.0.0/16
  ipamctl prefix create net1-prefix1 --vrf vpc-1 --prefix 10.0.1.1/24 --network net1 --label nephio.org/gateway=true
  ipamctl alloc create alloc1 --selector nephio.org/network-instance=vpc-1 --selector nephio.org/network-name=net1
  ipamctl alloc get alloc1 -o yaml
  ipamctl tree vpc-1
  ipamctl audit ./packages
  source <(ipamctl completion bash)`

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

// callError is an error of the server or the connection, as opposed to a
// wrong command line.
type callError struct{ err error }

func (e *callError) Error() string { return e.err.Error() }
func (e *callError) Unwrap() error { return e.err }

// Run runs ipamctl with args (without the program name), writing results
// to stdout and errors to stderr, and returns the exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := NewCommand(stdout, stderr)
	if args == nil {
		args = []string{} // nil would make cobra read os.Args
	}
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var fe *findingsError
	if errors.As(err, &fe) {
		return ExitFindings
	}
	var ce *callError
	if errors.As(err, &ce) {
		fmt.Fprintf(stderr, "Error: %s\n", status.Convert(ce.err).Message())
		return ExitError
	}
	fmt.Fprintf(stderr, "ipamctl: %v\n", err)
	if cmd, _, ferr := root.Find(args); ferr == nil && cmd != nil {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return ExitUsage
}

// NewCommand returns the ipamctl command tree.
func NewCommand(stdout, stderr io.Writer) *cobra.Command {
	var g globals
	root := &cobra.Command{
		Use:   "ipamctl",
		Short: "ipamctl is the command line client of ipam-server",
		Long: "ipamctl lists, shows, creates and deletes the network instances (VRFs), prefixes, ranges and\n" +
			"allocations of ipam-server, prints a network instance's prefix tree with its utilization, and\n" +
			"audits kpt packages in a Git checkout against the server.",
		Example:       examples,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	def := os.Getenv("IPAM_SERVER")
	if def == "" {
		def = DefaultServer
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.server, "server", def, "ipam-server address host:port ($IPAM_SERVER)")
	pf.StringVar(&g.tlsCA, "tls-ca", "", "PEM file of the CA that signed the server certificate (enables TLS)")
	pf.StringVar(&g.tlsCert, "tls-cert", "", "PEM file of the client certificate (mTLS; enables TLS)")
	pf.StringVar(&g.tlsKey, "tls-key", "", "PEM file of the client key (mTLS)")
	pf.StringVar(&g.token, "token-file", "", "file holding a bearer token that identifies you to ipam-server (sent over TLS or to loopback only)")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: "+strings.Join(formats, ", "))
	pf.DurationVar(&g.timeout, "timeout", 30*time.Second, "timeout of the call")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })

	groups := map[string]*cobra.Command{}
	for _, r := range resources {
		grp := &cobra.Command{Use: r.name, Aliases: r.aliases, Short: r.short, Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() }}
		groups[r.name] = grp
		root.AddCommand(grp)
	}
	for i := range commands {
		c := &commands[i]
		resource, verb, _ := strings.Cut(c.name, " ")
		use := verb
		if verb == "" {
			use = resource
		}
		if c.args != "" {
			use += " " + c.args
		}
		cmd := &cobra.Command{Use: use, Short: c.short, Aliases: verbAliases[verb], Args: exactArgs(c)}
		opts := c.flags(cmd.Flags())
		cmd.RunE = func(cmd *cobra.Command, pos []string) error {
			return runCommand(cmd.Context(), g, c, stdout, pos, opts)
		}
		if grp := groups[resource]; grp != nil && verb != "" {
			grp.AddCommand(cmd)
		} else {
			root.AddCommand(cmd)
		}
	}
	root.AddCommand(&cobra.Command{Use: "version", Short: "print ipamctl's version", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(stdout, "ipamctl", version())
			return err
		}})
	return root
}

// exactArgs accepts the positional arguments c wants and names them
// otherwise.
func exactArgs(c *command) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == c.nargs || c.nargs < 0 && len(args) > 0 {
			return nil
		}
		want, _, _ := strings.Cut(c.args, " ")
		if c.nargs == 0 {
			return fmt.Errorf("%s takes no arguments, got %q", strings.TrimPrefix(cmd.CommandPath(), "ipamctl "), args)
		}
		if c.nargs < 0 {
			return fmt.Errorf("%s: want at least one %s", strings.TrimPrefix(cmd.CommandPath(), "ipamctl "), strings.TrimSuffix(want, "..."))
		}
		return fmt.Errorf("%s: want %s, got %d arguments", strings.TrimPrefix(cmd.CommandPath(), "ipamctl "), want, len(args))
	}
}

// version is Version, or the module version of the build, or "dev".
func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// runCommand connects to the server and runs c.
func runCommand(ctx context.Context, g globals, c *command, stdout io.Writer, pos []string, opts any) error {
	out, err := newPrinter(g.output, stdout)
	if err != nil {
		return err
	}
	conn, err := dial(g)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	if err := c.run(ctx, ipamv1.NewIPAMClient(conn), out, pos, opts); err != nil {
		var ue *usageError
		var fe *findingsError
		if errors.As(err, &ue) || errors.As(err, &fe) {
			return err
		}
		return &callError{err}
	}
	return nil
}

// usageError is a bad flag value found while running a command.
type usageError struct{ msg string }

// Error returns the message.
func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

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
