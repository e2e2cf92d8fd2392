package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the logged lines.
func (b *logBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.DeleteFunc(strings.Split(b.buf.String(), "\n"), func(s string) bool { return s == "" })
}

func newLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, nil)), b
}

// replayed is what a Replay delivered.
type replayed struct {
	snapshot []byte // nil: no snapshot
	records  [][]byte
}

// replay replays l into a replayed.
func replay(l *Log) (replayed, error) {
	var r replayed
	err := l.Replay(func(rd io.Reader) error {
		b, err := io.ReadAll(rd)
		r.snapshot = b
		return err
	}, func(p []byte) error {
		r.records = append(r.records, slices.Clone(p))
		return nil
	})
	return r, err
}

// open opens and replays dir, failing the test on error; the Log is closed
// at the end of the test unless the test closed it.
func open(t testing.TB, dir string, opts Options) (*Log, replayed) {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	r, err := replay(l)
	if err != nil {
		t.Fatal(err)
	}
	return l, r
}

// testBatch is the i-th batch of the tests: varied counts and sizes,
// including empty payloads and payloads of several KiB.
func testBatch(i int) [][]byte {
	n := 1 + i%4
	batch := make([][]byte, n)
	for j := range batch {
		size := (i*7 + j*13) % 97
		if i%50 == 7 {
			size = 5000 + i
		}
		p := []byte(fmt.Sprintf("b%d.%d:", i, j))
		p = append(p, bytes.Repeat([]byte{byte(i + j)}, size)...)
		if (i+j)%11 == 0 {
			p = nil
		}
		batch[j] = p
	}
	return batch
}

// flat lists the payloads of batches from..to-1 in order.
func flat(from, to int) [][]byte {
	var all [][]byte
	for i := from; i < to; i++ {
		all = append(all, testBatch(i)...)
	}
	return all
}

// write enqueues batches from..to-1 and waits for them.
func write(t testing.TB, l *Log, from, to int) {
	t.Helper()
	var last *Pending
	for i := from; i < to; i++ {
		last = l.Enqueue(testBatch(i)...)
	}
	if last != nil {
		if err := last.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}

func equalRecords(t testing.TB, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("replayed %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d = %.40q, want %.40q", i, got[i], want[i])
		}
	}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l, r := open(t, dir, Options{})
	if len(r.records) != 0 || r.snapshot != nil || l.Seq() != 0 {
		t.Fatalf("empty log replayed %d records, snapshot %v, seq %d", len(r.records), r.snapshot != nil, l.Seq())
	}
	const n = 300
	for i := range n {
		p := l.Enqueue(testBatch(i)...)
		if p.Seq() != uint64(i+1) {
			t.Fatalf("batch %d has seq %d", i, p.Seq())
		}
		if i%10 == 0 {
			if err := p.Wait(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Close(); err != nil { // flushes the unwaited tail
		t.Fatal(err)
	}

	l, r = open(t, dir, Options{})
	equalRecords(t, r.records, flat(0, n))
	if l.Seq() != n {
		t.Fatalf("Seq after replay = %d, want %d", l.Seq(), n)
	}
	write(t, l, n, n+10)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_, r = open(t, dir, Options{})
	equalRecords(t, r.records, flat(0, n+10))
}

func TestEmptyEnqueueWaitsForEarlierBatches(t *testing.T) {
	l, _ := open(t, t.TempDir(), Options{})
	l.Enqueue([]byte("a"))
	p := l.Enqueue()
	if p.Seq() != 1 || l.Seq() != 1 {
		t.Fatalf("empty Enqueue: Pending.Seq %d, Seq %d; want 1, 1", p.Seq(), l.Seq())
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if s := l.Stats(); s.Batches != 1 {
		t.Fatalf("after Wait of an empty Enqueue: %d batches written, want 1", s.Batches)
	}
}

func TestGroupCommit(t *testing.T) {
	const writers, each = 64, 200
	dir := t.TempDir()
	l, _ := open(t, dir, Options{})
	// Grouping needs an fsync that takes time, as a disk's does (about 1 ms
	// here, on ext4); where the file system makes it free (tmpfs), the writer
	// keeps up batch by batch and there is nothing to group. So an fsync
	// quicker than 100 µs is padded to that: on a disk almost none is.
	const floor = 100 * time.Microsecond
	var padded atomic.Int64
	pad := func(sync func(*os.File) error) func(*os.File) error {
		return func(f *os.File) error {
			start := time.Now()
			err := sync(f)
			if d := time.Since(start); d < floor {
				padded.Add(1)
				time.Sleep(floor - d)
			}
			return err
		}
	}
	l.mu.Lock()
	l.syncFile, l.syncData = pad(l.syncFile), pad(l.syncData)
	l.mu.Unlock()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := l.Enqueue([]byte(fmt.Sprintf("w%d-%d", w, i))).Wait(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s := l.Stats()
	t.Logf("%+v: %.1f batches per fsync; %d fsyncs padded to %v", s, float64(s.Batches)/float64(s.Fsyncs), padded.Load(), floor)
	if s.Batches != writers*each {
		t.Fatalf("%d batches written, want %d", s.Batches, writers*each)
	}
	if s.Fsyncs == 0 || s.Fsyncs > s.Batches/4 {
		t.Fatalf("%d fsyncs for %d batches: group commit does not group", s.Fsyncs, s.Batches)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	_, r := open(t, dir, Options{})
	if len(r.records) != writers*each {
		t.Fatalf("replayed %d records, want %d", len(r.records), writers*each)
	}
	next := make([]int, writers) // each writer's records come back in its order
	for _, rec := range r.records {
		var w, i int
		if _, err := fmt.Sscanf(string(rec), "w%d-%d", &w, &i); err != nil {
			t.Fatal(err)
		}
		if i != next[w] {
			t.Fatalf("writer %d: record %d replayed where %d was due", w, i, next[w])
		}
		next[w]++
	}
}

func TestLock(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	} else {
		t.Log(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, Options{})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	l.Close()
}

func TestOpenCreatesNestedDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	l, _ := open(t, dir, Options{})
	write(t, l, 0, 1)
	if _, err := os.Stat(filepath.Join(dir, segName(1))); err != nil {
		t.Fatal(err)
	}
}

func TestLifecycleErrors(t *testing.T) {
	l, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Enqueue([]byte("x")).Wait(); err == nil {
		t.Fatal("Enqueue before Replay succeeded")
	}
	if _, err := replay(l); err != nil {
		t.Fatal(err)
	}
	if _, err := replay(l); err == nil {
		t.Fatal("second Replay succeeded")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Enqueue([]byte("x")).Wait(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Enqueue after Close: %v, want ErrClosed", err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v, want ErrClosed", err)
	}
}

func TestCloseWithoutReplay(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	open(t, dir, Options{})
}

func TestReplayCallbackError(t *testing.T) {
	dir := t.TempDir()
	l, _ := open(t, dir, Options{})
	write(t, l, 0, 3)
	l.Close()
	l, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	boom := errors.New("boom")
	err = l.Replay(func(io.Reader) error { return nil }, func([]byte) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Replay: %v, want boom", err)
	}
	if err := l.Enqueue([]byte("x")).Wait(); err == nil {
		t.Fatal("Enqueue after a failed Replay succeeded")
	}
}

func TestTooLarge(t *testing.T) {
	l, _ := open(t, t.TempDir(), Options{NoSync: true})
	mib := make([]byte, 1<<20)
	big := slices.Repeat([][]byte{mib}, maxBody>>20) // with the framing, just over the limit
	if err := l.Enqueue(big...).Wait(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Enqueue of %d MiB: %v, want ErrTooLarge", len(big), err)
	}
	if l.Seq() != 0 {
		t.Fatalf("a refused batch took seq %d", l.Seq())
	}
	if err := l.Enqueue([]byte("ok")).Wait(); err != nil {
		t.Fatalf("Enqueue after a refused batch: %v", err)
	}
}

func TestFailClosed(t *testing.T) {
	dir := t.TempDir()
	logger, logs := newLogger()
	l, err := Open(dir, Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay(l); err != nil {
		t.Fatal(err)
	}
	write(t, l, 0, 5)
	fail := errors.New("injected fsync failure")
	l.mu.Lock()
	l.syncFile = func(*os.File) error { return fail }
	l.syncData = l.syncFile
	l.mu.Unlock()

	if err := l.Enqueue([]byte("lost")).Wait(); !errors.Is(err, fail) {
		t.Fatalf("Wait after a failed fsync: %v, want the fsync error", err)
	}
	if err := l.Enqueue([]byte("later")).Wait(); !errors.Is(err, fail) {
		t.Fatalf("Enqueue after a failed fsync: %v, want the fsync error", err)
	}
	if err := l.Snapshot(l.Seq(), func(io.Writer) error { return nil }); err == nil {
		t.Fatal("Snapshot after a failed fsync succeeded")
	}
	if err := l.Close(); !errors.Is(err, fail) {
		t.Fatalf("Close: %v, want the fsync error", err)
	}
	if len(logs.lines()) != 1 {
		t.Fatalf("logged %q, want one line", logs.lines())
	}
}

func TestFailClosedOnWriteError(t *testing.T) {
	logger, _ := newLogger()
	l, _ := open(t, t.TempDir(), Options{Logger: logger})
	write(t, l, 0, 2)
	var waits sync.WaitGroup
	l.mu.Lock() // hold the writer off while the segment disappears under it
	l.f.Close()
	l.mu.Unlock()
	for range 8 {
		waits.Go(func() {
			if err := l.Enqueue([]byte("x")).Wait(); err == nil {
				t.Error("Wait succeeded after a write error")
			}
		})
	}
	waits.Wait()
	if err := l.Enqueue([]byte("y")).Wait(); err == nil {
		t.Fatal("Enqueue succeeded after a write error")
	}
}

// TestObservers checks that OnCommit sees every record and byte written,
// once per group commit, and OnFsync every fsync of a segment, across
// segment rolls.
func TestObservers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		noSync bool
	}{{"fsync", false}, {"NoSync", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var commits, records, bytes, fsyncs int
			l, _ := open(t, t.TempDir(), Options{
				NoSync:       tc.noSync,
				SegmentBytes: 4 << 10, // a roll every few batches
				OnCommit: func(r, b int) {
					mu.Lock()
					defer mu.Unlock()
					commits++
					records += r
					bytes += b
				},
				OnFsync: func(d time.Duration) {
					mu.Lock()
					defer mu.Unlock()
					if d < 0 {
						t.Errorf("fsync took %v", d)
					}
					fsyncs++
				},
			})
			const n = 100
			write(t, l, 0, n)
			l.segMu.Lock()
			rolls := len(l.segs) - 1 // an empty log begins with one segment
			l.segMu.Unlock()
			if rolls == 0 {
				t.Fatal("no segment roll: the test does not cover fsyncs before a roll")
			}
			s := l.Stats()
			mu.Lock()
			defer mu.Unlock()
			if commits != int(s.Commits) || records != len(flat(0, n)) || bytes != int(s.Bytes) {
				t.Errorf("OnCommit saw %d commits, %d records, %d bytes; want %d, %d, %d",
					commits, records, bytes, s.Commits, len(flat(0, n)), s.Bytes)
			}
			want := commits + rolls
			if tc.noSync {
				want = 0
			}
			if fsyncs != want {
				t.Errorf("OnFsync called %d times, want %d (%d commits, %d rolls)", fsyncs, want, commits, rolls)
			}
		})
	}
}
