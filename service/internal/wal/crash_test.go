package wal

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Environment of the helper process of TestCrash.
const (
	crashDirEnv   = "WAL_CRASH_DIR"
	crashRoundEnv = "WAL_CRASH_ROUND"
)

// crashOptions are the options of both sides of TestCrash: small segments,
// so that kills land in rollovers and compactions too.
var crashOptions = Options{SegmentBytes: 4096}

// crashChunk is the zero-fill chunk of the helper in odd rounds of
// TestCrash: several extensions of the zero-filled tail per segment, so
// that kills land in them too (in even rounds the first commit of a
// segment extends it to SegmentBytes at once).
const crashChunk = 1000

// TestHelperWriter is the process TestCrash kills: it replays the log, then
// enqueues batches from several goroutines and snapshots now and then until
// it is killed, printing "seq name" for every acknowledged batch.
func TestHelperWriter(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("the helper process of TestCrash")
	}
	round := os.Getenv(crashRoundEnv)
	time.AfterFunc(time.Minute, func() { os.Exit(2) }) // orphaned: give up

	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	opts := crashOptions
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	l, err := Open(dir, opts)
	if err != nil {
		fail(err)
	}
	if n, _ := strconv.Atoi(round); n%2 == 1 {
		l.chunk = crashChunk
	}
	r, err := replay(l)
	if err != nil {
		fail(err)
	}
	var mu sync.Mutex // held around Enqueue and the state, so that snapshots see exactly batches 1..Seq()
	state := strings.Fields(string(r.snapshot))
	for _, rec := range r.records {
		state = append(state, string(rec))
	}
	fmt.Printf("ready %d\n", l.Seq())

	for g := range 8 {
		go func() {
			for i := 0; ; i++ {
				name := fmt.Sprintf("r%s-g%d-i%d", round, g, i)
				k := 1 + i%3
				var batch [][]byte
				for j := 1; j <= k; j++ {
					batch = append(batch, fmt.Appendf(nil, "%s-%d/%d", name, j, k))
				}
				mu.Lock()
				p := l.Enqueue(batch...)
				for _, b := range batch {
					state = append(state, string(b))
				}
				mu.Unlock()
				if err := p.Wait(); err != nil {
					fail(err)
				}
				fmt.Printf("%d %s\n", p.Seq(), name) // one write(2): lines do not interleave
			}
		}()
	}
	for {
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		mu.Lock()
		snap := strings.Join(state, "\n")
		seq := l.Seq()
		mu.Unlock()
		if err := l.Snapshot(seq, snapshotOf(snap)); err != nil {
			fail(err)
		}
	}
}

// crashBatch is a batch of the helper as replayed.
type crashBatch struct {
	name  string
	parts int
}

// crashBatches regroups replayed payloads "name-j/k" into their batches,
// checking that every batch is complete and in one piece.
func crashBatches(r replayed) ([]crashBatch, error) {
	payloads := strings.Fields(string(r.snapshot))
	for _, rec := range r.records {
		payloads = append(payloads, string(rec))
	}
	var batches []crashBatch
	for i := 0; i < len(payloads); {
		dash := strings.LastIndexByte(payloads[i], '-')
		var j, k int
		if _, err := fmt.Sscanf(payloads[i][dash+1:], "%d/%d", &j, &k); dash < 0 || err != nil || j != 1 {
			return nil, fmt.Errorf("payload %d %q does not start a batch", i, payloads[i])
		}
		name := payloads[i][:dash]
		for j := 1; j <= k; j++ {
			if i+j-1 >= len(payloads) || payloads[i+j-1] != fmt.Sprintf("%s-%d/%d", name, j, k) {
				return nil, fmt.Errorf("batch %s: part %d of %d missing or out of place", name, j, k)
			}
		}
		batches = append(batches, crashBatch{name, k})
		i += k
	}
	return batches, nil
}

// TestCrash kills a writing process with SIGKILL at random moments, again
// and again on the same directory, and checks after each kill that every
// batch it acknowledged is replayed, once, at its sequence number.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	const rounds = 24
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	acked := map[uint64]string{} // seq -> batch name, over all rounds

	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriter$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashRoundEnv+"="+strconv.Itoa(round))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ready := make(chan struct{})
		var lines []string
		read := make(chan error)
		go func() {
			br := bufio.NewReader(stdout)
			for {
				line, err := br.ReadString('\n')
				if err != nil { // a last line without its newline is ignored
					if err == io.EOF {
						err = nil
					}
					read <- err
					return
				}
				if strings.HasPrefix(line, "ready ") {
					close(ready)
					continue
				}
				lines = append(lines, strings.TrimSuffix(line, "\n"))
			}
		}()
		select {
		case <-ready:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("round %d: helper not ready: %s", round, stderr.Bytes())
		}
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if err := <-read; err != nil {
			t.Fatal(err)
		}
		var exit *exec.ExitError
		if err := cmd.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: helper ended with %v, not by the kill: %s", round, err, stderr.Bytes())
		}
		for _, line := range lines {
			seqText, name, _ := strings.Cut(line, " ")
			seq, err := strconv.ParseUint(seqText, 10, 64)
			if err != nil {
				t.Fatalf("round %d: helper printed %q", round, line)
			}
			if prev, ok := acked[seq]; ok {
				t.Fatalf("round %d: seq %d acknowledged twice, for %s and %s", round, seq, prev, name)
			}
			acked[seq] = name
		}

		logger, logs := newLogger()
		opts := crashOptions
		opts.Logger = logger
		l, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		r, err := replay(l)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		l.Close()
		for _, s := range segments(t, dir) {
			if end, _ := layout(t, s); sizeOf(t, s) != int64(end) {
				t.Fatalf("round %d: after a roll or Close %s is %d bytes, its frames %d", round, s, sizeOf(t, s), end)
			}
		}
		batches, err := crashBatches(r)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		seen := map[string]bool{}
		for _, b := range batches {
			if seen[b.name] {
				t.Fatalf("round %d: batch %s replayed twice", round, b.name)
			}
			seen[b.name] = true
		}
		for seq, name := range acked {
			if seq > uint64(len(batches)) || batches[seq-1].name != name {
				t.Fatalf("round %d: acknowledged batch %d (%s) lost: the log holds %d batches", round, seq, name, len(batches))
			}
		}
		t.Logf("round %d: killed after %d acks; %d batches, %d acknowledged in all; %d segments; %q",
			round, len(lines), len(batches), len(acked), len(segments(t, dir)), logs.lines())
	}
}
