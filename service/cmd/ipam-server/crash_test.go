package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// execEnv makes the test binary run main() instead of the tests, so the
// crash test runs the real ipam-server (flags, signals and all) as a
// subprocess it can kill.
const execEnv = "IPAM_SERVER_TEST_EXEC_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(execEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// process is one ipam-server subprocess.
type process struct {
	cmd  *exec.Cmd
	addr string
	mu   sync.Mutex
	log  bytes.Buffer
	done chan struct{}
}

// startProcess runs ipam-server with args and waits for its "serving" log
// line to learn its address.
func startProcess(t *testing.T, args ...string) *process {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), execEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "serving" {
				addr <- rec.Addr
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case p.addr = <-addr:
	case <-p.done:
		cmd.Wait()
		t.Fatalf("ipam-server exited before serving:\n%s", p.output())
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("ipam-server did not start:\n%s", p.output())
	}
	return p
}

func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// kill sends SIGKILL and waits for the process and its log.
func (p *process) kill(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	<-p.done
	if out := p.output(); strings.Contains(out, "DATA RACE") || strings.Contains(out, "panic:") {
		t.Fatalf("ipam-server failed:\n%s", out)
	}
}

// state is what the clients know for sure.
type state struct {
	mu       sync.Mutex
	acked    map[string]string // allocation name → address, acknowledged
	released map[string]bool   // acknowledged releases
	doubt    map[string]bool   // calls that failed with the crash: either outcome is fine
}

// TestCrash runs ipam-server on a data directory, lets 16 clients allocate
// and release concurrently, kills it with SIGKILL at a random moment,
// restarts it on the same directory, and checks after every restart that
// every acknowledged allocation is there with the same address, every
// acknowledged release is gone and no address is held twice.
func TestCrash(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	dir := t.TempDir()
	args := []string{"--listen", "127.0.0.1:0", "--data-dir", dir, "--demo", "--snapshot-every", "500"}
	st := &state{acked: map[string]string{}, released: map[string]bool{}, doubt: map[string]bool{}}
	sel := map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "crash"}
	ctx := context.Background()
	for round := 0; round <= rounds; round++ {
		p := startProcess(t, args...)
		conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		if err := servertest.WaitServing(conn, 60*time.Second); err != nil {
			t.Fatalf("round %d: %v\n%s", round, err, p.output())
		}
		c := ipamv1.NewIPAMClient(conn)
		verify(t, round, c, st)
		if round == rounds {
			conn.Close()
			p.kill(t)
			break
		}
		if round == 0 {
			if _, err := c.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: &ipamv1.Prefix{Key: &ipamv1.Key{Owner: "crash", Namespace: "default", Name: "crash-net"},
				NetworkInstance: "vpc-1", Prefix: "10.8.0.0/16", Network: "crash"}}); err != nil {
				t.Fatal(err)
			}
		}

		// Clients allocate and release until the server dies under them.
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				var mine []string
				for i := 0; ; i++ {
					if i%4 == 3 && len(mine) > 0 {
						name := mine[0]
						mine = mine[1:]
						_, err := c.Release(ctx, &ipamv1.DeleteRequest{Key: &ipamv1.Key{Owner: "crash", Namespace: "default", Name: name}})
						st.mu.Lock()
						if err == nil {
							st.released[name] = true
							delete(st.acked, name)
						} else {
							st.doubt[name] = true
						}
						st.mu.Unlock()
						if err != nil {
							return
						}
						continue
					}
					name := fmt.Sprintf("r%d-w%d-%d", round, w, i)
					res, err := c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{
						Key: &ipamv1.Key{Owner: "crash", Namespace: "default", Name: name}, Selector: sel}})
					st.mu.Lock()
					if err == nil {
						st.acked[name] = res.GetResult().GetPrefix()
					} else {
						st.doubt[name] = true
					}
					st.mu.Unlock()
					if err != nil {
						return
					}
					mine = append(mine, name)
				}
			})
		}
		time.Sleep(time.Duration(20+rand.IntN(280)) * time.Millisecond)
		p.kill(t)
		wg.Wait()
		conn.Close()
	}
	t.Logf("%d rounds; %d allocations held at the end, %d acknowledged releases", rounds, len(st.acked), len(st.released))
	if len(st.acked) == 0 {
		t.Fatal("no allocation was ever acknowledged")
	}
}

// verify checks the restarted server against what was acknowledged, then
// settles the calls in doubt by what the server holds.
func verify(t *testing.T, round int, c ipamv1.IPAMClient, st *state) {
	t.Helper()
	ctx := context.Background()
	held := map[string]string{} // name → address of the crash owner
	byAddr := map[string]string{}
	token := ""
	for {
		resp, err := c.List(ctx, &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, PageSize: 5000, PageToken: token})
		if err != nil {
			t.Fatalf("round %d: List: %v", round, err)
		}
		for _, o := range resp.GetObjects() {
			a := o.GetAllocation()
			name, addr := a.GetAllocation().GetKey().GetName(), a.GetResult().GetPrefix()
			if other, dup := byAddr[addr]; dup {
				t.Errorf("round %d: %s is held by %s and %s", round, addr, other, name)
			}
			byAddr[addr] = name
			if a.GetAllocation().GetKey().GetOwner() == "crash" {
				held[name] = addr
			}
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for name, addr := range st.acked {
		if st.doubt[name] {
			continue // a release of it was in flight
		}
		if got, ok := held[name]; !ok {
			t.Errorf("round %d: acknowledged allocation %s (%s) lost", round, name, addr)
		} else if got != addr {
			t.Errorf("round %d: acknowledged allocation %s moved from %s to %s", round, name, addr, got)
		}
	}
	for name := range st.released {
		if _, ok := held[name]; ok && !st.doubt[name] {
			t.Errorf("round %d: acknowledged release of %s undone", round, name)
		}
	}
	for name := range st.doubt {
		if addr, ok := held[name]; ok {
			st.acked[name] = addr
			delete(st.released, name)
		} else {
			delete(st.acked, name)
		}
	}
	clear(st.doubt)
	if t.Failed() {
		t.FailNow()
	}
}
