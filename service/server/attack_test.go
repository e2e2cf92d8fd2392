package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/grpcopt"
	"github.com/nephio-project/ipam/service/server"
)

// maxServerRSS is what the server may use at its peak while the hostile
// requests are served: a 64 MiB request decoded and checked, not the
// gigabytes of an error detail repeating a huge owner per item.
const maxServerRSS = 1536 << 20

// TestHostileRequests runs ipam-server as a subprocess and sends the
// requests an attacker would: huge owners, names and labels, 100,000
// failing items, control and bidi characters. Each is refused with
// InvalidArgument and a bounded answer, the server's peak RSS stays under
// maxServerRSS, and it still serves an allocation afterwards.
func TestHostileRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs ipam-server")
	}
	pid, c := startServerProcess(t)
	ctx := context.Background()
	seed(t, c)

	many := func(n int, mk func(i int) *ipamv1.Allocation) []*ipamv1.Allocation {
		out := make([]*ipamv1.Allocation, n)
		for i := range out {
			out[i] = mk(i)
		}
		return out
	}
	badPrefix := func(i int) *ipamv1.Allocation {
		return &ipamv1.Allocation{Key: &ipamv1.Key{Namespace: "default", Name: "a" + strconv.Itoa(i)}, NetworkInstance: "vpc-1", Prefix: "bad/" + strconv.Itoa(i)}
	}
	longName := func(i int) *ipamv1.Allocation {
		return &ipamv1.Allocation{Key: &ipamv1.Key{Namespace: "default", Name: fmt.Sprintf("%0253d", i)}, NetworkInstance: "no-such-vrf"}
	}
	bigLabels := map[string]string{}
	for i := range 1000 {
		bigLabels[fmt.Sprintf("k%d", i)] = strings.Repeat("v", 1000)
	}
	for _, tc := range []struct {
		name  string
		req   *ipamv1.SyncRequest
		code  codes.Code
		field string
	}{
		{"owner of 64 KiB and 100k failing items", &ipamv1.SyncRequest{Owner: strings.Repeat("o", 64<<10), Allocations: many(100_000, badPrefix)}, codes.InvalidArgument, "owner"},
		{"owner of 1 MB", &ipamv1.SyncRequest{Owner: strings.Repeat("o", 1<<20), Allocations: many(10, badPrefix)}, codes.InvalidArgument, "owner"},
		{"100k items failing on their prefix", &ipamv1.SyncRequest{Owner: "attacker", Allocations: many(100_000, badPrefix)}, codes.InvalidArgument, "spec.prefix"},
		{"100k names of 253 bytes in a missing VRF", &ipamv1.SyncRequest{Owner: "attacker", Allocations: many(100_000, longName)}, codes.NotFound, "spec.networkInstance"},
		{"1000 labels of 1000 bytes", &ipamv1.SyncRequest{Owner: "attacker", Allocations: []*ipamv1.Allocation{{Key: key("x"), NetworkInstance: "vpc-1", Labels: bigLabels}}}, codes.InvalidArgument, "spec.labels"},
		{"bidi override in a name", &ipamv1.SyncRequest{Owner: "attacker", Allocations: []*ipamv1.Allocation{{Key: key("evil\u202eexe.txt"), NetworkInstance: "vpc-1"}}}, codes.InvalidArgument, "metadata.name"},
		{"control character in the owner", &ipamv1.SyncRequest{Owner: "a\nb", Allocations: many(1, badPrefix)}, codes.InvalidArgument, "owner"},
		{"name of 254 bytes", &ipamv1.SyncRequest{Owner: "attacker", Allocations: []*ipamv1.Allocation{{Key: key(strings.Repeat("n", 254)), NetworkInstance: "vpc-1"}}}, codes.InvalidArgument, "metadata.name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			_, err := c.Sync(cctx, tc.req)
			st := status.Convert(err)
			if st.Code() != tc.code {
				t.Fatalf("got %s %.300q, want %s", st.Code(), st.Message(), tc.code)
			}
			if !strings.Contains(st.Message(), tc.field) {
				t.Errorf("message %.300q does not name %s", st.Message(), tc.field)
			}
			if n := len(st.Message()); n > server.MaxStatusMessage {
				t.Errorf("message of %d bytes, more than %d", n, server.MaxStatusMessage)
			}
			if n := proto.Size(st.Proto()); n > server.MaxStatusMessage+server.MaxDetailBytes+1024 {
				t.Errorf("status of %d bytes", n)
			}
			n := len(tc.req.GetAllocations())
			for _, d := range st.Details() {
				if f, ok := d.(*ipamv1.SyncFailure); ok {
					if len(f.Items) > server.MaxDetailItems || len(f.Items) == 0 || int(f.Omitted)+len(f.Items) > n {
						t.Errorf("detail lists %d items and omits %d of %d", len(f.Items), f.Omitted, n)
					}
					if n > server.MaxDetailItems && f.Omitted == 0 && tc.field != "owner" {
						t.Errorf("detail of %d failures omits none", n)
					}
				}
			}
			t.Logf("%s %.120q (%d bytes of status), server peak RSS %d MiB", st.Code(), st.Message(), proto.Size(st.Proto()), peakRSS(t, pid)>>20)
		})
	}
	if rss := peakRSS(t, pid); rss > maxServerRSS {
		t.Errorf("ipam-server peak RSS %d MiB, more than %d MiB", rss>>20, maxServerRSS>>20)
	}
	res, err := c.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key("after"), NetworkInstance: "vpc-1",
		Selector: map[string]string{"nephio.org/network-name": "net1"}}})
	if err != nil || res.GetResult().GetPrefix() != "10.0.1.2/24" {
		t.Fatalf("after the attack: %v, %v", res, err)
	}
}

// buildServer builds ipam-server once per test binary.
var buildServer = sync.OnceValues(func() (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "ipam-server-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "ipam-server")
	build := exec.Command("go", "build", "-o", bin, "./service/cmd/ipam-server")
	build.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ipam-server: %v\n%s", err, out)
	}
	return bin, nil
})

// serverProcess is ipam-server running as a subprocess.
type serverProcess struct {
	cmd    *exec.Cmd
	addr   string // its gRPC address
	client ipamv1.IPAMClient
	mu     sync.Mutex
	log    strings.Builder // its stderr
	done   chan struct{}   // closed when its stderr is drained
}

// runServer starts ipam-server with args on a loopback port and waits
// until it serves, or returns the process that exited first (client nil).
func runServer(t *testing.T, args ...string) *serverProcess {
	t.Helper()
	bin, err := buildServer()
	if err != nil {
		t.Fatal(err)
	}
	p := &serverProcess{cmd: exec.Command(bin, append([]string{"--listen", "127.0.0.1:0"}, args...)...), done: make(chan struct{})}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(t) })
	sc := bufio.NewScanner(stderr)
	addr := make(chan string, 1)
	go func() {
		defer close(p.done)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "serving" {
				addr <- line.Addr
			}
		}
	}()
	select {
	case a := <-addr:
		p.addr = a
		conn, err := grpc.NewClient(a, append(grpcopt.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		p.client = ipamv1.NewIPAMClient(conn)
	case <-p.done:
		_ = p.cmd.Wait()
		return p
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, err := p.client.List(context.Background(), &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE})
		if err == nil {
			return p
		}
		select {
		case <-p.done: // it served, then exited (a failed restore)
			_ = p.cmd.Wait()
			p.client = nil
			return p
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("ipam-server not ready: %v\n%s", err, p.output())
		}
	}
}

// stop ends the server with SIGTERM and waits for it.
func (p *serverProcess) stop(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
	_ = p.cmd.Wait()
}

func (p *serverProcess) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// startServerProcess runs ipam-server with the file store in a temporary
// directory and returns its pid and a client.
func startServerProcess(t *testing.T) (int, ipamv1.IPAMClient) {
	t.Helper()
	p := runServer(t, "--data-dir", t.TempDir())
	if p.client == nil {
		t.Fatalf("ipam-server exited: %s", p.output())
	}
	return p.cmd.Process.Pid, p.client
}

// peakRSS is the process's peak resident set size in bytes (VmHWM).
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	_, peak, err := readRSS(pid)
	if err != nil {
		t.Fatalf("reading the server's RSS: %v", err)
	}
	return peak
}

// readRSS returns the current and peak resident set size of a process
// (VmRSS and VmHWM) in bytes.
func readRSS(pid int) (cur, peak int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		for name, dst := range map[string]*int64{"VmRSS:": &cur, "VmHWM:": &peak} {
			if v, ok := strings.CutPrefix(l, name); ok {
				kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				if err != nil {
					return 0, 0, err
				}
				*dst = kb << 10
			}
		}
	}
	if peak == 0 {
		return 0, 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
	}
	return cur, peak, nil
}
