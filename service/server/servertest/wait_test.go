package servertest_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// TestWaitServingOrExit: a serving server is seen serving; a server whose
// process exits (nobody listens) makes the wait give up when it exits, not
// at its timeout.
func TestWaitServingOrExit(t *testing.T) {
	s := servertest.Start(t, server.Config{}, false)
	conn, err := grpc.NewClient(s.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := servertest.WaitServingOrExit(conn, 20*time.Second, make(chan struct{})); err != nil {
		t.Fatalf("serving server: %v", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dead, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	exited := make(chan struct{})
	time.AfterFunc(200*time.Millisecond, func() { close(exited) })
	start := time.Now()
	err = servertest.WaitServingOrExit(dead, time.Minute, exited)
	if !errors.Is(err, servertest.ErrExited) {
		t.Fatalf("after the exit: %v, want %v", err, servertest.ErrExited)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("gave up %v after the exit, not at once", waited)
	}
}
