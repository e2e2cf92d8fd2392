package grpcopt_test

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/nephio-project/ipam/service/grpcopt"
)

// frameCounter counts, by type, the HTTP/2 frames written to one
// connection, following frames across writes.
type frameCounter struct {
	mu      sync.Mutex
	preface int    // bytes of the client preface still to skip
	hdr     []byte // a frame header split across writes
	skip    int    // payload bytes of the current frame still to come
	byType  map[byte]int
}

const framePing = 0x6

func (c *frameCounter) write(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(c.preface, len(b))
	c.preface -= n
	b = b[n:]
	for len(b) > 0 {
		if c.skip > 0 {
			n := min(c.skip, len(b))
			c.skip -= n
			b = b[n:]
			continue
		}
		n := min(9-len(c.hdr), len(b))
		c.hdr = append(c.hdr, b[:n]...)
		b = b[n:]
		if len(c.hdr) == 9 {
			c.byType[c.hdr[3]]++
			c.skip = int(c.hdr[0])<<16 | int(c.hdr[1])<<8 | int(c.hdr[2])
			c.hdr = c.hdr[:0]
		}
	}
}

func (c *frameCounter) count(typ byte) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byType[typ]
}

type countingConn struct {
	net.Conn
	c *frameCounter
}

func (cc countingConn) Write(b []byte) (int, error) {
	cc.c.write(b)
	return cc.Conn.Write(b)
}

type countingListener struct {
	net.Listener
	c *frameCounter
}

func (l countingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{conn, l.c}, nil
}

// echo is a unary method that answers its request.
var echo = grpc.ServiceDesc{
	ServiceName: "grpcopt.test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.BytesValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return in, nil
		},
	}},
}

// TestOptions connects a server and a client configured with the options
// over loopback: small calls one at a time send no PING frames either way
// (flow control is static), and a message far over gRPC's default 4 MiB
// limit goes through both ways.
func TestOptions(t *testing.T) {
	server := &frameCounter{byType: map[byte]int{}}
	client := &frameCounter{byType: map[byte]int{}, preface: len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpcopt.ServerOptions()...)
	gs.RegisterService(&echo, struct{}{})
	go gs.Serve(countingListener{lis, server})
	t.Cleanup(gs.Stop)
	dialer := func(ctx context.Context, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return countingConn{conn, client}, nil
	}
	conn, err := grpc.NewClient(lis.Addr().String(), append(grpcopt.DialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dialer))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx := context.Background()
	call := func(payload []byte) []byte {
		t.Helper()
		out := new(wrapperspb.BytesValue)
		if err := conn.Invoke(ctx, "/grpcopt.test.Echo/Echo", wrapperspb.Bytes(payload), out); err != nil {
			t.Fatalf("echo of %d bytes: %v", len(payload), err)
		}
		return out.GetValue()
	}

	for range 200 {
		call([]byte("10.0.1.1/24"))
	}
	if n := server.count(framePing); n != 0 {
		t.Errorf("the server sent %d PING frames during 200 small calls, want 0 (dynamic flow control is on)", n)
	}
	if n := client.count(framePing); n != 0 {
		t.Errorf("the client sent %d PING frames during 200 small calls, want 0 (dynamic flow control is on)", n)
	}

	big := bytes.Repeat([]byte("ipam"), 8<<20) // 32 MiB
	if got := call(big); !bytes.Equal(got, big) {
		t.Errorf("echo of %d bytes came back as %d bytes", len(big), len(got))
	}
}

// TestMaxConcurrentStreams: a connection to a server with the options
// carries at most MaxConcurrentStreams calls at once; the client's next
// call waits until one of them ends.
func TestMaxConcurrentStreams(t *testing.T) {
	started := make(chan struct{}, grpcopt.MaxConcurrentStreams+1)
	hold := grpc.ServiceDesc{
		ServiceName: "grpcopt.test.Hold",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{StreamName: "Hold", ServerStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			started <- struct{}{}
			<-ss.Context().Done()
			return nil
		}}},
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpcopt.ServerOptions()...)
	gs.RegisterService(&hold, struct{}{})
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), append(grpcopt.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	open := func(ctx context.Context) error {
		_, err := conn.NewStream(ctx, &hold.Streams[0], "/grpcopt.test.Hold/Hold")
		return err
	}

	var cancels []context.CancelFunc
	for i := range grpcopt.MaxConcurrentStreams {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		cancels = append(cancels, cancel)
		if err := open(ctx); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		<-started
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := open(ctx); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("call %d: %v, want it to wait for a free stream (DeadlineExceeded)", grpcopt.MaxConcurrentStreams+1, err)
	}
	cancels[0]()
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := open(ctx); err != nil {
		t.Fatalf("call after one ended: %v", err)
	}
	<-started
}
