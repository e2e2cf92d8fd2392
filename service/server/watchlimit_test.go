package server_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// tryWatch starts an unfiltered Watch and, once the server acknowledged
// it, returns it and the function that closes it; or the server's
// refusal.
func tryWatch(t *testing.T, c ipamv1.IPAMClient) (grpc.ServerStreamingClient[ipamv1.WatchEvent], context.CancelFunc, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := c.Watch(ctx, &ipamv1.WatchRequest{})
	if err := watchOpen(w, err); err != nil {
		cancel()
		return nil, nil, err
	}
	return w, cancel, nil
}

// watchOpen waits for the server's answer to a Watch: nil when it
// acknowledged the stream (headers), else why it ended.
func watchOpen(w grpc.ServerStreamingClient[ipamv1.WatchEvent], err error) error {
	if err != nil {
		return err
	}
	if md, _ := w.Header(); md != nil {
		return nil
	}
	// No headers: the stream ended, and Recv returns its status.
	_, err = w.Recv()
	return err
}

// watchN opens n Watch streams on c and returns their closers.
func watchN(t *testing.T, c ipamv1.IPAMClient, n int) []context.CancelFunc {
	t.Helper()
	var closers []context.CancelFunc
	for i := range n {
		_, cl, err := tryWatch(t, c)
		if err != nil {
			t.Fatalf("Watch %d of %d: %v", i+1, n, err)
		}
		closers = append(closers, cl)
	}
	return closers
}

// watchRefused checks that a Watch on c is refused with ResourceExhausted
// and a message holding each of want.
func watchRefused(t *testing.T, c ipamv1.IPAMClient, want ...string) {
	t.Helper()
	_, _, err := tryWatch(t, c)
	st := wantStatus(t, err, codes.ResourceExhausted, "")
	for _, w := range want {
		if !strings.Contains(st.Message(), w) {
			t.Errorf("refusal %q does not say %s", st.Message(), w)
		}
	}
}

// watchEventually opens a Watch on c, retrying while the server refuses
// it with ResourceExhausted: a stream's slots are given back when the
// server's handler returns, just after the client sees the stream end.
// It returns the stream and the function that closes it.
func watchEventually(t *testing.T, c ipamv1.IPAMClient) (grpc.ServerStreamingClient[ipamv1.WatchEvent], context.CancelFunc) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w, cl, err := tryWatch(t, c)
		if err == nil {
			return w, cl
		}
		if status.Code(err) != codes.ResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("Watch after a stream ended: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dialFrom connects to ts from the local address ip (a loopback address
// other than 127.0.0.1 plays another host).
func dialFrom(t *testing.T, ts *servertest.Server, ip string) ipamv1.IPAMClient {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return ipamv1.NewIPAMClient(ts.Dial(t, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) })))
}

// allocate allocates an address of net1 in vpc-1 under name.
func allocate(t *testing.T, c ipamv1.IPAMClient, name string) {
	t.Helper()
	_, err := c.Allocate(context.Background(), &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key(name), NetworkInstance: "vpc-1",
		Selector: map[string]string{"nephio.org/network-name": "net1"}}})
	must(t, err)
}

// TestWatchLimitPerConn: a connection holding --max-watches-per-conn
// Watch streams has every further one refused with ResourceExhausted
// naming the limit and the flag, while its calls are still answered and
// another connection still watches; closing a stream frees its slot.
func TestWatchLimitPerConn(t *testing.T) {
	ts := startServer(t, server.Config{MaxWatchesPerConn: 4})
	c := ts.Client(t)
	seed(t, c)
	closers := watchN(t, c, 4)
	for range 3 {
		watchRefused(t, c, "on this connection", "at most 4", "--max-watches-per-conn")
	}
	allocate(t, c, "a1")
	watchN(t, ts.Client(t), 1)
	closers[0]()
	watchEventually(t, c)
	watchRefused(t, c, "--max-watches-per-conn")
}

// TestWatchLimitPerIdentity: a caller holding --max-watches-per-identity
// Watch streams over several connections has every further one refused,
// on any connection, with ResourceExhausted naming the caller, the limit
// and the flag; another caller still watches. A caller is its
// certificate's identity, or its IP address when it is anonymous.
func TestWatchLimitPerIdentity(t *testing.T) {
	cfg := server.Config{MaxWatchesPerConn: 3, MaxWatchesPerIdentity: 5}
	t.Run("anonymous callers by address", func(t *testing.T) {
		ts := startServer(t, cfg)
		c1, c2, c3 := ts.Client(t), ts.Client(t), ts.Client(t)
		seed(t, c1)
		watchN(t, c1, 3)
		closers := watchN(t, c2, 2)
		for _, c := range []ipamv1.IPAMClient{c2, c3} {
			watchRefused(t, c, `"anonymous from 127.0.0.1"`, "at most 5", "--max-watches-per-identity")
		}
		allocate(t, c3, "a1")
		// Another host (a second loopback address) is another caller.
		watchN(t, dialFrom(t, ts, "127.0.0.2"), 3)
		closers[1]()
		watchEventually(t, c3)
		watchRefused(t, c2, "--max-watches-per-identity")
	})
	t.Run("authenticated callers by identity", func(t *testing.T) {
		s := startAuthzWith(t, cfg)
		admin1, admin2, admin3 := s.client(t, "", "", ""), s.client(t, "", "", ""), s.client(t, "", "", "")
		seed(t, admin1)
		watchN(t, admin1, 3)
		watchN(t, admin2, 2)
		watchRefused(t, admin3, `"cn:ipamctl"`, "at most 5", "--max-watches-per-identity")
		cert, keyFile := s.certs.WriteClient(t, "team-a", servertest.ClientCert{CommonName: "team-a", URIs: []string{"spiffe://example.org/team-a"}})
		teamA := s.client(t, cert, keyFile, "")
		watchN(t, teamA, 3)
		// A caller that may not read is refused for that, every time: its
		// refused streams hold no slot.
		cert, keyFile = s.certs.WriteClient(t, "nobody", servertest.ClientCert{CommonName: "nobody"})
		nobody := s.client(t, cert, keyFile, "")
		for range 2 * cfg.MaxWatchesPerIdentity {
			_, _, err := tryWatch(t, nobody)
			if status.Code(err) != codes.PermissionDenied {
				t.Fatalf("Watch of a caller without read: %v, want PermissionDenied", err)
			}
		}
	})
}

// TestWatchLimitSlotsFreed: however a Watch stream ends (the client
// cancels it, closes its connection, or the server ends it for falling
// behind), its slots are given back and a new Watch is accepted.
func TestWatchLimitSlotsFreed(t *testing.T) {
	ts := startServer(t, server.Config{MaxWatchesPerConn: 1, MaxWatchesPerIdentity: 2, WatchBuffer: 8})
	c := ts.Client(t)
	seed(t, c)

	// Cancelled by the client, many times over.
	for range 10 {
		_, closeWatch := watchEventually(t, c)
		closeWatch()
	}

	// Ended by the server: the watcher does not read and falls behind.
	slow, _ := watchEventually(t, c)
	watchRefused(t, c, "--max-watches-per-conn")
	req := &ipamv1.SyncRequest{Owner: "pkg"}
	for i := range 100 {
		req.Allocations = append(req.Allocations, &ipamv1.Allocation{Key: &ipamv1.Key{Name: fmt.Sprint("a", i)},
			Selector: map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net1"}})
	}
	must(t, call(c.Sync(context.Background(), req)))
	for {
		if _, err := slow.Recv(); err != nil {
			wantStatus(t, err, codes.ResourceExhausted, "watch fell behind: more than 8 events pending; list again and restart the watch")
			break
		}
	}
	watchEventually(t, c)

	// Ended with their connection: its slots of the caller come back.
	conn := ts.Dial(t)
	other := ipamv1.NewIPAMClient(conn)
	watchN(t, other, 1)
	watchRefused(t, ts.Client(t), "--max-watches-per-identity")
	must(t, conn.Close())
	watchEventually(t, ts.Client(t))
}
