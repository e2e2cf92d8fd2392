package file

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nephio-project/ipam/service/ipam"
)

// The crash test runs an allocating child process (this test binary,
// running TestHelperAllocator) on one directory, kills it with SIGKILL at a
// random moment, checks what a restore finds, and starts the next round on
// the same directory.
//
// The child writes one line per event to stdout:
//
//	ready                  restored and set up; allocations start
//	+ KEY ADDRESS          Allocate(KEY) returned ADDRESS (acknowledged)
//	? KEY                  Release(KEY) is about to be called
//	- KEY                  Release(KEY) returned (acknowledged)
const (
	crashDirEnv   = "IPAM_FILE_STORE_CRASH_DIR"
	crashRoundEnv = "IPAM_FILE_STORE_CRASH_ROUND"
	crashEvery    = 300 // SnapshotEvery of the child: compaction runs during the test
	crashWorkers  = 8
)

var crashSel = ipam.Labels{ipam.LabelNetworkInstance: "crash", ipam.LabelNetworkName: "big"}

// TestHelperAllocator is the child of TestCrashRecovery; it does nothing
// unless started by it.
func TestHelperAllocator(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("the child process of TestCrashRecovery")
	}
	round := os.Getenv(crashRoundEnv)
	s, err := Open(dir, Options{SnapshotEvery: crashEvery, Logger: nil})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	a := ipam.New(ipam.WithJournal(s))
	if err := s.Restore(a); err != nil {
		fmt.Fprintln(os.Stderr, "restore:", err)
		os.Exit(2)
	}
	if _, err := a.GetNetworkInstance("crash"); err != nil {
		if err := a.CreateNetworkInstance(context.Background(), ipam.NetworkInstance{Key: ipam.Key{Name: "crash"}, Prefixes: []ipam.VRFPrefix{{Prefix: pfx("10.0.0.0/8")}}}); err != nil {
			fmt.Fprintln(os.Stderr, "setup:", err)
			os.Exit(2)
		}
	}
	if _, err := a.GetPrefix(ipam.Key{Name: "big"}); err != nil {
		if _, err := a.CreatePrefix(context.Background(), ipam.Prefix{Key: ipam.Key{Name: "big"}, NetworkInstance: "crash", Prefix: pfx("10.1.0.0/16"), Network: "big"}); err != nil {
			fmt.Fprintln(os.Stderr, "setup:", err)
			os.Exit(2)
		}
	}
	var mu sync.Mutex
	say := func(format string, args ...any) {
		line := fmt.Sprintf(format+"\n", args...)
		mu.Lock()
		defer mu.Unlock()
		// One write per line, unbuffered: a line on the pipe means the
		// event happened before the kill.
		if _, err := io.WriteString(os.Stdout, line); err != nil {
			os.Exit(3)
		}
	}
	say("ready")
	var wg sync.WaitGroup
	for g := range crashWorkers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			for i := 0; ; i++ {
				k := ipam.Key{Owner: "crash", Namespace: "r" + round, Name: fmt.Sprintf("g%d-%d", g, i)}
				res, err := a.Allocate(context.Background(), ipam.Allocation{Key: k, Selector: crashSel})
				if errors.Is(err, ipam.ErrExhausted) {
					return
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "allocate:", err)
					os.Exit(2)
				}
				say("+ %s %s", keyString(k), res.Prefix.Addr())
				if rnd.IntN(3) == 0 {
					say("? %s", keyString(k))
					if err := a.Release(context.Background(), k); err != nil {
						fmt.Fprintln(os.Stderr, "release:", err)
						os.Exit(2)
					}
					say("- %s", keyString(k))
				}
			}
		})
	}
	wg.Wait()
	say("exhausted")
	select {} // wait for the kill
}

func keyString(k ipam.Key) string { return k.Namespace + "/" + k.Name }

// acked is what the parent learned from the children's output.
type acked struct {
	addr      map[string]netip.Addr // acknowledged allocations
	releasing map[string]bool       // release started (may or may not be durable)
	released  map[string]bool       // release acknowledged
}

func (ak *acked) line(t *testing.T, line string) {
	f := strings.Fields(line)
	switch {
	case len(f) == 3 && f[0] == "+":
		a, err := netip.ParseAddr(f[2])
		if err != nil {
			t.Fatalf("child line %q: %v", line, err)
		}
		ak.addr[f[1]] = a
	case len(f) == 2 && f[0] == "?":
		ak.releasing[f[1]] = true
	case len(f) == 2 && f[0] == "-":
		ak.released[f[1]] = true
	case line == "ready" || line == "exhausted":
	default:
		t.Fatalf("child line %q", line)
	}
}

func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 20 processes")
	}
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 0))
	ak := &acked{addr: map[string]netip.Addr{}, releasing: map[string]bool{}, released: map[string]bool{}}
	const rounds = 24
	for round := range rounds {
		lines := crashRound(t, dir, round, rnd, ak)
		held := verifyCrashState(t, dir, ak)
		t.Logf("round %2d: killed after %4d lines; %5d acknowledged allocations, %5d held after restore", round, lines, len(ak.addr), held)
	}
}

// crashRound runs one child until a random moment, kills it and returns the
// number of lines it printed.
func crashRound(t *testing.T, dir string, round int, rnd *rand.Rand, ak *acked) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAllocator$", "-test.v=false")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashRoundEnv+"="+strconv.Itoa(round))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill after a random number of lines (sometimes right after ready,
	// sometimes mid-snapshot), then a random sub-millisecond delay.
	limit := 1 + rnd.IntN(3000)
	if rnd.IntN(5) == 0 {
		limit = 1 + rnd.IntN(10)
	}
	delay := time.Duration(rnd.IntN(1000)) * time.Microsecond
	sc := bufio.NewScanner(out)
	n, ready := 0, false
	var killed sync.Once
	kill := func() { killed.Do(func() { cmd.Process.Kill() }) }
	timer := time.AfterFunc(2*time.Minute, kill) // a child that hangs
	defer timer.Stop()
	for sc.Scan() {
		ak.line(t, sc.Text())
		if sc.Text() == "ready" {
			ready = true
		}
		if n++; ready && n == limit {
			go func() {
				time.Sleep(delay)
				kill()
			}()
		}
	}
	kill()
	err = cmd.Wait()
	if !ready {
		t.Fatalf("round %d: child never got ready: %v\n%s", round, err, stderr.String())
	}
	if ws, ok := cmd.ProcessState.Sys().(interface{ Signaled() bool }); !ok || !ws.Signaled() {
		t.Fatalf("round %d: child ended by itself: %v\n%s", round, err, stderr.String())
	}
	return n
}

// verifyCrashState restores dir and checks every acknowledged change and
// the uniqueness of addresses; it returns the number of allocations held.
func verifyCrashState(t *testing.T, dir string, ak *acked) int {
	t.Helper()
	s, a := openAllocator(t, dir, Options{SnapshotEvery: -1})
	defer s.Close()
	got := map[string]netip.Addr{}
	owner := map[netip.Addr]string{}
	for _, r := range a.ListAllocations(ipam.Filter{Owner: "crash"}) {
		k := keyString(r.Allocation.Key)
		addr := r.Result.Prefix.Addr()
		if other, dup := owner[addr]; dup {
			t.Fatalf("%s is held by %s and %s", addr, other, k)
		}
		owner[addr] = k
		got[k] = addr
	}
	for k, want := range ak.addr {
		have, ok := got[k]
		switch {
		case ak.released[k]:
			if ok {
				t.Fatalf("%s: release was acknowledged, but it holds %s after restore", k, have)
			}
		case ak.releasing[k]:
			if ok && have != want {
				t.Fatalf("%s: holds %s after restore, acknowledged %s", k, have, want)
			}
		case !ok:
			t.Fatalf("%s: acknowledged %s, lost after restore", k, want)
		case have != want:
			t.Fatalf("%s: holds %s after restore, acknowledged %s", k, have, want)
		}
	}
	// What was in flight at the kill is now decided: the next rounds expect
	// what this restore found.
	for k := range got {
		if _, ok := ak.addr[k]; !ok {
			ak.addr[k] = got[k] // allocated, never acknowledged
		}
	}
	for k := range ak.releasing {
		if _, ok := got[k]; ok {
			delete(ak.releasing, k) // the release did not happen
		} else {
			ak.released[k] = true
		}
	}
	return len(got)
}
