package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// encodeSnapshot is a plain reading of the documented snapshot format.
func encodeSnapshot(seq uint64, state []byte) []byte {
	b := append([]byte("WALSNAP\x01"), binary.LittleEndian.AppendUint64(nil, seq)...)
	b = append(b, state...)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(state)))
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

func snapshotOf(state string) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, state)
		return err
	}
}

// names lists the file names in dir matching pattern.
func names(t testing.TB, dir, pattern string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	for i := range paths {
		paths[i] = filepath.Base(paths[i])
	}
	slices.Sort(paths)
	return paths
}

func TestSnapshotCompaction(t *testing.T) {
	const k = 30
	opts := Options{SegmentBytes: 1024}
	dir := t.TempDir()
	l, _ := open(t, dir, opts)
	write(t, l, 0, 50) // batch i has seq i+1
	before := segments(t, dir)
	if err := l.Snapshot(k, snapshotOf("state@30")); err != nil {
		t.Fatal(err)
	}
	after := segments(t, dir)
	if len(after) >= len(before) {
		t.Fatalf("compaction kept all %d segments", len(before))
	}
	first, _ := parseSeqName(filepath.Base(after[0]), "", segSuffix)
	second, _ := parseSeqName(filepath.Base(after[1]), "", segSuffix)
	if first > k+1 || second <= k+1 {
		t.Fatalf("after a snapshot of batch %d the log starts with segments %d, %d: want exactly the one holding batch %d first", k, first, second, k+1)
	}
	write(t, l, 50, 80)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l, r := open(t, dir, opts)
	if string(r.snapshot) != "state@30" {
		t.Fatalf("snapshot %q, want state@30", r.snapshot)
	}
	equalRecords(t, r.records, flat(k, 80))
	if l.Seq() != 80 {
		t.Fatalf("Seq %d, want 80", l.Seq())
	}
	if err := l.Snapshot(80, snapshotOf("state@80")); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir, "snap-*"); !slices.Equal(got, []string{snapName(80)}) {
		t.Fatalf("snapshot files %q, want only %s", got, snapName(80))
	}
	if segs := segments(t, dir); len(segs) != 1 {
		t.Fatalf("%d segments after a snapshot of the last batch, want only the active one", len(segs))
	}
	write(t, l, 80, 85)
	l.Close()

	l, r = open(t, dir, opts)
	if string(r.snapshot) != "state@80" {
		t.Fatalf("snapshot %q, want state@80", r.snapshot)
	}
	equalRecords(t, r.records, flat(80, 85))
	if l.Seq() != 85 {
		t.Fatalf("Seq %d, want 85", l.Seq())
	}
}

func TestSnapshotFallback(t *testing.T) {
	opts := Options{SegmentBytes: 1024}
	base := t.TempDir()
	l, _ := open(t, base, opts)
	write(t, l, 0, 50)
	if err := l.Snapshot(30, snapshotOf("state@30")); err != nil {
		t.Fatal(err)
	}
	write(t, l, 50, 80)
	l.Close()

	good := encodeSnapshot(70, []byte("state@70"))
	cases := []struct {
		name  string
		file  []byte
		state string // want
		from  int    // first batch replayed
		warn  bool
	}{
		{"valid", good, "state@70", 70, false},
		{"torn by a byte", good[:len(good)-1], "state@30", 30, true},
		{"torn to the header", good[:16], "state@30", 30, true},
		{"empty", nil, "state@30", 30, true},
		{"corrupt state", slices.Concat(good[:17], []byte{good[17] ^ 1}, good[18:]), "state@30", 30, true},
		{"corrupt length", slices.Concat(good[:24], []byte{9}, good[25:]), "state@30", 30, true},
		{"other seq in header", encodeSnapshot(71, []byte("state@71")), "state@30", 30, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, base)
			if err := os.WriteFile(filepath.Join(dir, snapName(70)), tc.file, 0o640); err != nil {
				t.Fatal(err)
			}
			logger, logs := newLogger()
			l, r := open(t, dir, Options{Logger: logger, SegmentBytes: opts.SegmentBytes})
			if string(r.snapshot) != tc.state {
				t.Fatalf("snapshot %q, want %q", r.snapshot, tc.state)
			}
			equalRecords(t, r.records, flat(tc.from, 80))
			lines := logs.lines()
			if tc.warn && (len(lines) != 1 || !strings.Contains(lines[0], "invalid snapshot")) || !tc.warn && len(lines) != 0 {
				t.Fatalf("logged %q", lines)
			}
			if tc.warn {
				t.Log(lines[0])
			}

			// The next snapshot replaces the bad one.
			write(t, l, 80, 90)
			if err := l.Snapshot(85, snapshotOf("state@85")); err != nil {
				t.Fatal(err)
			}
			if got := names(t, dir, "snap-*"); !slices.Equal(got, []string{snapName(85)}) {
				t.Fatalf("snapshot files %q, want only %s", got, snapName(85))
			}
			l.Close()
			_, r = open(t, dir, opts)
			if string(r.snapshot) != "state@85" {
				t.Fatalf("snapshot %q, want state@85", r.snapshot)
			}
			equalRecords(t, r.records, flat(85, 90))
		})
	}
}

// A valid snapshot of a batch after the end of the log (which Snapshot
// itself never writes) continues the log after that batch.
func TestSnapshotBeyondLog(t *testing.T) {
	dir := writeLog(t, 20, Options{})
	if err := os.WriteFile(filepath.Join(dir, snapName(100)), encodeSnapshot(100, []byte("s")), 0o640); err != nil {
		t.Fatal(err)
	}
	l, r := open(t, dir, Options{})
	if string(r.snapshot) != "s" || len(r.records) != 0 || l.Seq() != 100 {
		t.Fatalf("snapshot %q, %d records, Seq %d; want s, 0, 100", r.snapshot, len(r.records), l.Seq())
	}
	if p := l.Enqueue([]byte("next")); p.Seq() != 101 || p.Wait() != nil {
		t.Fatalf("append: seq %d, %v", p.Seq(), p.Wait())
	}
	l.Close()
	_, r = open(t, dir, Options{})
	equalRecords(t, r.records, [][]byte{[]byte("next")})
}

// A corrupt newest snapshot with no older one to fall back on, after
// compaction deleted the log it covers, cannot be recovered from.
func TestSnapshotCorruptNoFallback(t *testing.T) {
	dir := t.TempDir()
	l, _ := open(t, dir, Options{SegmentBytes: 512})
	write(t, l, 0, 40)
	if err := l.Snapshot(40, snapshotOf("state@40")); err != nil {
		t.Fatal(err)
	}
	l.Close()
	mutate(t, filepath.Join(dir, snapName(40)), func(b []byte) []byte { b[20] ^= 1; return b })
	logger, _ := newLogger()
	l, err := Open(dir, Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := replay(l); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Replay: %v, want ErrCorrupt", err)
	} else {
		t.Log(err)
	}
}

func TestSnapshotErrors(t *testing.T) {
	dir := t.TempDir()
	l, _ := open(t, dir, Options{})
	write(t, l, 0, 10)
	if err := l.Snapshot(11, snapshotOf("x")); err == nil {
		t.Fatal("Snapshot of a batch not enqueued yet succeeded")
	}
	if err := l.Snapshot(5, snapshotOf("state@5")); err != nil {
		t.Fatal(err)
	}
	if err := l.Snapshot(4, snapshotOf("x")); err == nil {
		t.Fatal("Snapshot older than the newest one succeeded")
	}
	boom := errors.New("boom")
	if err := l.Snapshot(8, func(w io.Writer) error {
		io.WriteString(w, "partial")
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Snapshot: %v, want boom", err)
	}
	if got := names(t, dir, "snap-*"); !slices.Equal(got, []string{snapName(5)}) {
		t.Fatalf("after a failed Snapshot: files %q, want only %s", got, snapName(5))
	}
	l.Close()
	if err := l.Snapshot(10, snapshotOf("x")); err == nil {
		t.Fatal("Snapshot after Close succeeded")
	}
	_, r := open(t, dir, Options{})
	if string(r.snapshot) != "state@5" {
		t.Fatalf("snapshot %q, want state@5", r.snapshot)
	}
	equalRecords(t, r.records, flat(5, 10))
}

func TestOpenRemovesSnapshotTemps(t *testing.T) {
	dir := writeLog(t, 3, Options{})
	tmp := filepath.Join(dir, snapName(2)+tmpSuffix)
	if err := os.WriteFile(tmp, []byte("half a snap"), 0o640); err != nil {
		t.Fatal(err)
	}
	_, r := open(t, dir, Options{})
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary snapshot left: %v", err)
	}
	if r.snapshot != nil {
		t.Fatal("a temporary snapshot was loaded")
	}
	equalRecords(t, r.records, flat(0, 3))
}

// counterState is a model of the caller of a Log: a list of values, one
// batch per value, whose snapshots are taken while Enqueue is held off.
type counterState struct {
	mu     sync.Mutex
	values []int
}

func (s *counterState) add(l *Log, v int) *Pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values = append(s.values, v)
	return l.Enqueue([]byte(strconv.Itoa(v)))
}

func (s *counterState) snapshot(l *Log) error {
	s.mu.Lock()
	values := slices.Clone(s.values)
	seq := l.Seq()
	s.mu.Unlock()
	if int(seq) != len(values) {
		return fmt.Errorf("seq %d with %d values", seq, len(values))
	}
	return l.Snapshot(seq, func(w io.Writer) error {
		for _, v := range values {
			fmt.Fprintln(w, v)
		}
		return nil
	})
}

// restore rebuilds the values from a replay.
func restore(r replayed) []int {
	var values []int
	for _, f := range strings.Fields(string(r.snapshot)) {
		v, _ := strconv.Atoi(f)
		values = append(values, v)
	}
	for _, rec := range r.records {
		v, _ := strconv.Atoi(string(rec))
		values = append(values, v)
	}
	return values
}

func TestSnapshotWhileWriting(t *testing.T) {
	const writers, each = 8, 150
	dir := t.TempDir()
	l, _ := open(t, dir, Options{SegmentBytes: 256})
	s := &counterState{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := s.add(l, w*each+i).Wait(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	snaps := 0
	for done := false; !done; snaps++ {
		select {
		case <-finished:
			done = true // and one more snapshot, of everything
		default:
		}
		if err := s.snapshot(l); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d snapshots, %d segments left", snaps, len(segments(t, dir)))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_, r := open(t, dir, Options{})
	if got := restore(r); !slices.Equal(got, s.values) {
		t.Fatalf("restored %d values, want %d in enqueue order", len(got), len(s.values))
	}
}
