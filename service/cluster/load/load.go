// Package load is ipam-load: concurrent clients that allocate addresses
// from ipam-server, retry what the server could not answer, and report
// every acknowledged allocation.
package load

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	ipamclient "github.com/nephio-project/ipam/service/client"
)

// Config is what Run allocates, from where, and how.
type Config struct {
	// Client reaches ipam-server.
	Client ipamclient.Config
	// Owner and Namespace key the allocations; each is named
	// <Prefix>-<client>-<n>.
	Owner, Namespace, Prefix string
	// Selector picks the network the addresses come from.
	Selector map[string]string
	// Clients is how many allocate at once, each one call at a time.
	Clients int
	// Count is how many allocations each client makes (0: until ctx
	// ends or Duration passes).
	Count int
	// Duration, when set, ends the run after that long.
	Duration time.Duration
	// Interval is how long each client waits after an acknowledged
	// allocation before the next.
	Interval time.Duration
	// Retry bounds how long one allocation is retried while the server
	// answers Unavailable (or does not answer).
	Retry time.Duration
	// CallTimeout bounds one call.
	CallTimeout time.Duration
	// Release, instead of allocating, releases every allocation of Owner
	// in Namespace whose name starts with Prefix (Release runs it).
	Release bool
}

// ParseFlags reads a Config from ipam-load's command line; errors and
// -help go to errOut.
func ParseFlags(args []string, errOut io.Writer) (Config, error) {
	cfg := Config{Selector: map[string]string{}}
	fs := flag.NewFlagSet("ipam-load", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&cfg.Client.Server, "server", "127.0.0.1:9090", "ipam-server host:port")
	fs.StringVar(&cfg.Client.CA, "tls-ca", "", "PEM file of the CA that signed the server certificate (enables TLS)")
	fs.StringVar(&cfg.Client.Cert, "tls-cert", "", "PEM file of the client certificate (mTLS)")
	fs.StringVar(&cfg.Client.Key, "tls-key", "", "PEM file of the client key (mTLS)")
	fs.StringVar(&cfg.Owner, "owner", "k8s.load", "owner of the allocations")
	fs.StringVar(&cfg.Namespace, "namespace", "default", "namespace of the allocations")
	fs.StringVar(&cfg.Prefix, "name-prefix", "load", "allocations are named <name-prefix>-<client>-<n>")
	fs.Func("selector", "label key=value the network must carry (repeatable)", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q is not key=value", s)
		}
		cfg.Selector[k] = v
		return nil
	})
	fs.IntVar(&cfg.Clients, "clients", 8, "clients allocating at once (1 to 256)")
	fs.IntVar(&cfg.Count, "count", 0, "allocations per client (0: until --duration passes or SIGTERM)")
	fs.DurationVar(&cfg.Duration, "duration", 0, "end the run after this long (0: no limit)")
	fs.DurationVar(&cfg.Interval, "interval", 0, "pause of each client after an acknowledged allocation")
	fs.DurationVar(&cfg.Retry, "retry", 2*time.Minute, "how long one allocation is retried while the server is unavailable")
	fs.DurationVar(&cfg.CallTimeout, "call-timeout", 5*time.Second, "timeout of one call")
	fs.BoolVar(&cfg.Release, "release", false, "release the allocations of --owner named <name-prefix>-... instead of allocating")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if cfg.Release {
		return cfg, nil
	}
	if cfg.Clients < 1 || cfg.Clients > 256 {
		err := fmt.Errorf("--clients %d: want 1 to 256", cfg.Clients)
		fmt.Fprintln(errOut, err)
		return cfg, err
	}
	if len(cfg.Selector) == 0 {
		err := errors.New("--selector: at least one is required")
		fmt.Fprintln(errOut, err)
		return cfg, err
	}
	return cfg, nil
}

// Ack is one acknowledged allocation, a line of Run's output.
type Ack struct {
	Name   string `json:"name"`
	Prefix string `json:"prefix"`
	// Retries is how many calls failed before the acknowledged one.
	Retries int `json:"retries,omitempty"`
}

// Summary is Run's last line.
type Summary struct {
	Acked    int     `json:"acked"`
	Retries  int     `json:"retries"`
	Failed   int     `json:"failed"`
	Seconds  float64 `json:"seconds"`
	PerSec   float64 `json:"perSecond"`
	LastErr  string  `json:"lastError,omitempty"`
	Finished bool    `json:"finished"`
}

// Run allocates until every client made cfg.Count allocations,
// cfg.Duration passed or ctx ends, writing an Ack per acknowledged allocation and a Summary to out.
// An allocation the server answered with an error other than
// Unavailable, DeadlineExceeded or Aborted (or still unavailable after
// cfg.Retry) counts as failed; Run then returns an error.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	api, closeConn, err := dial(cfg)
	if err != nil {
		return err
	}
	defer closeConn()
	var (
		mu  sync.Mutex
		sum Summary
		enc = json.NewEncoder(out)
		wg  sync.WaitGroup
	)
	start := time.Now()
	finished := func() bool { return false }
	if cfg.Duration > 0 {
		end := start.Add(cfg.Duration)
		finished = func() bool { return time.Now().After(end) }
	}
	for c := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; cfg.Count == 0 || n < cfg.Count; n++ {
				if ctx.Err() != nil || finished() {
					return
				}
				name := fmt.Sprintf("%s-%d-%d", cfg.Prefix, c, n)
				prefix, retries, err := allocate(ctx, api, cfg, name)
				mu.Lock()
				sum.Retries += retries
				switch {
				case err == nil:
					sum.Acked++
					_ = enc.Encode(Ack{Name: name, Prefix: prefix, Retries: retries})
				case ctx.Err() == nil:
					sum.Failed++
					sum.LastErr = err.Error()
				}
				mu.Unlock()
				if err != nil {
					return
				}
				if cfg.Interval > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(cfg.Interval):
					}
				}
			}
		}()
	}
	wg.Wait()
	sum.Seconds = time.Since(start).Seconds()
	if sum.Seconds > 0 {
		sum.PerSec = float64(sum.Acked) / sum.Seconds
	}
	sum.Finished = ctx.Err() == nil
	_ = enc.Encode(struct {
		Summary Summary `json:"summary"`
	}{sum})
	if sum.Failed > 0 {
		return fmt.Errorf("%d allocations failed, the last: %s", sum.Failed, sum.LastErr)
	}
	return nil
}

// Release releases every allocation of cfg.Owner in cfg.Namespace whose
// name starts with cfg.Prefix+"-", with cfg.Clients calls at once, and
// writes how many to out.
func Release(ctx context.Context, cfg Config, out io.Writer) error {
	api, closeConn, err := dial(cfg)
	if err != nil {
		return err
	}
	defer closeConn()
	var keys []*ipamv1.Key
	for token := ""; ; {
		resp, err := api.List(ctx, &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, Owner: cfg.Owner, PageToken: token})
		if err != nil {
			return fmt.Errorf("list the allocations of owner %s: %w", cfg.Owner, err)
		}
		for _, o := range resp.GetObjects() {
			k := o.GetAllocation().GetAllocation().GetKey()
			if k.GetNamespace() == cfg.Namespace && strings.HasPrefix(k.GetName(), cfg.Prefix+"-") {
				keys = append(keys, k)
			}
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	work := make(chan *ipamv1.Key)
	errs := make(chan error, cfg.Clients)
	var wg sync.WaitGroup
	for range max(cfg.Clients, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				if _, err := api.Release(ctx, &ipamv1.DeleteRequest{Key: k}); err != nil && status.Code(err) != codes.NotFound {
					select {
					case errs <- fmt.Errorf("release %s: %w", k.GetName(), err):
					default:
					}
				}
			}
		}()
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	_, err = fmt.Fprintf(out, "{\"released\":%d}\n", len(keys))
	return err
}

// dial connects to ipam-server as cfg.Client says, as ipam-load.
func dial(cfg Config) (ipamv1.IPAMClient, func(), error) {
	c := cfg.Client
	c.UserAgent = "ipam-load"
	conn, err := ipamclient.Dial(c)
	if err != nil {
		return nil, nil, err
	}
	return ipamv1.NewIPAMClient(conn), func() { _ = conn.Close() }, nil
}

// allocate makes one allocation, retrying the same request (allocations
// are idempotent by key: a retry of a call whose answer was lost returns
// the same address) while the server is unavailable.
func allocate(ctx context.Context, api ipamv1.IPAMClient, cfg Config, name string) (string, int, error) {
	req := &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{
		Key:      &ipamv1.Key{Owner: cfg.Owner, Namespace: cfg.Namespace, Name: name},
		Selector: cfg.Selector,
	}}
	deadline := time.Now().Add(cfg.Retry)
	backoff := 50 * time.Millisecond
	for retries := 0; ; retries++ {
		cctx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
		resp, err := api.Allocate(cctx, req)
		cancel()
		if err == nil {
			return resp.GetResult().GetPrefix(), retries, nil
		}
		switch status.Code(err) {
		case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted:
		default:
			return "", retries, fmt.Errorf("allocation %s: %w", name, err)
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return "", retries, fmt.Errorf("allocation %s: still unavailable after %s: %w", name, cfg.Retry, err)
		}
		select {
		case <-ctx.Done():
			return "", retries, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}
