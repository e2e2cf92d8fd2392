package etcd_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// buildServer builds ipam-server into a temporary directory.
func buildServer(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ipam-server")
	cmd := exec.Command("go", "build", "-o", bin, "./service/cmd/ipam-server")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ipam-server: %v\n%s", err, out)
	}
	return bin
}

// serverProc is an ipam-server process on etcd.
type serverProc struct {
	t    testing.TB
	args []string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	conn *grpc.ClientConn
}

func startServerProc(t testing.TB, bin string, eps []string, prefix string, n int) *serverProc {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := &serverProc{t: t, log: filepath.Join(t.TempDir(), fmt.Sprintf("replica%d.log", n)),
		args: []string{"--listen", addr, "--store", "etcd", "--etcd-endpoints", strings.Join(eps, ","), "--etcd-prefix", prefix,
			"--log-format", "text", "--log-level", "warn"}}
	cmd := exec.Command(bin)
	p.cmd = cmd
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	p.conn = conn
	t.Cleanup(func() { p.kill(); conn.Close() })
	p.start(bin)
	return p
}

// start runs the process and waits until it reports SERVING.
func (p *serverProc) start(bin string) {
	p.t.Helper()
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	p.cmd = exec.Command(bin, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.done = make(chan struct{})
	go func() { p.cmd.Wait(); logf.Close(); close(p.done) }()
	if err := servertest.WaitServing(p.conn, 60*time.Second); err != nil {
		out, _ := os.ReadFile(p.log)
		p.t.Fatalf("replica not serving: %v\n%s", err, out)
	}
}

// kill ends the process with SIGKILL (kill -9).
func (p *serverProc) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.cmd = nil
}

// TestFailoverKillReplicaAndMember: 64 clients allocate through three
// ipam-server processes on a three-member etcd; mid-load one replica and
// one etcd member are killed with SIGKILL. Clients retry against the
// survivors and complete; no acknowledged allocation is lost or
// duplicated. The member and the replica then restart; the replica
// restores from etcd and catches up through its watch with what the
// others allocate afterwards.
func TestFailoverKillReplicaAndMember(t *testing.T) {
	c := startCluster(t, 3)
	bin := buildServer(t)
	var procs []*serverProc
	var conns []ipamv1.IPAMClient
	for i := range 3 {
		p := startServerProc(t, bin, c.endpoints(), "/failover/", i)
		procs = append(procs, p)
		conns = append(conns, ipamv1.NewIPAMClient(p.conn))
	}
	seed20(t, conns[0], "10.0.0.0/20")

	var down atomic.Bool
	cl := &client{conns: conns, alive: func(i int) bool { return i != 0 || !down.Load() }}
	var once sync.Once
	killed := make(chan struct{})
	acked := fill(t, cl, "load", 64, 40, func(n int64) {
		if n == 600 {
			once.Do(func() {
				t.Logf("killing replica 0 and etcd member m2 after %d acknowledged allocations", n)
				go func() {
					defer close(killed)
					procs[0].kill()
					down.Store(true)
					c.kill(c.members[2])
				}()
			})
		}
	})
	<-killed
	if len(acked) != 64*40 {
		t.Fatalf("%d allocations acknowledged, want %d", len(acked), 64*40)
	}
	distinct(t, acked)
	agree(t, conns[1:], acked)

	// The member comes back and catches up; the replica restarts.
	c.start(c.members[2])
	c.waitHealthy([]string{c.members[2].clientURL})
	procs[0].start(bin)
	down.Store(false)

	// More load through all three: the restarted replica follows the
	// others through its watch.
	more := fill(t, cl, "after", 64, 10, nil)
	for k, v := range more {
		acked[k] = v
	}
	distinct(t, acked)
	agree(t, conns, acked)
}
