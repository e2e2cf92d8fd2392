package wal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawFrames encodes batches from..to-1 (testBatch), numbered from first,
// with appendFrame: a segment as a writer without a zero-filled tail left it.
func rawFrames(first uint64, from, to int) []byte {
	var b []byte
	for i := from; i < to; i++ {
		p := testBatch(i)
		b = appendFrame(b, first+uint64(i-from), bodySize(p), p)
	}
	return b
}

// sizeOf is the size of the file at path.
func sizeOf(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	must(t, err)
	return fi.Size()
}

// layout parses the segment at path: the end of its frames, and whether
// only zeros follow them.
func layout(t testing.TB, path string) (end int, zeroTail bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	seq, ok := parseSeqName(filepath.Base(path), "", segSuffix)
	if !ok {
		t.Fatalf("bad segment name %s", path)
	}
	if frames := refParse(data, seq); len(frames) > 0 {
		end = frames[len(frames)-1].end
	}
	return end, !slices.ContainsFunc(data[end:], func(b byte) bool { return b != 0 })
}

// appendZeros appends n zero bytes to the file at path.
func appendZeros(n int) func([]byte) []byte {
	return func(b []byte) []byte { return append(b, make([]byte, n)...) }
}

// TestZeroTailReplay: a last segment whose frames are followed by zeros
// (as the writer leaves it when killed) replays cleanly: every batch, no
// warning, the file left as it is. The writer continues at the end of the
// frames, not at the end of the file, and the next replay has everything
// in order; Close cuts the zero tail off.
func TestZeroTailReplay(t *testing.T) {
	const n = 10
	base := writeLog(t, n, Options{}) // ACKED: all n batches
	seg := segments(t, base)[0]
	for _, tc := range []struct {
		name  string
		zeros int
	}{
		{"one zero byte", 1},
		{"shorter than a frame header", prefixSize - 1},
		{"a frame header", prefixSize + bodyHeader},
		{"a page", 4096},
		{"past a chunk", zeroChunk + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, base)
			path := filepath.Join(dir, filepath.Base(seg))
			mutate(t, path, appendZeros(tc.zeros))
			frameEnd := sizeOf(t, path) - int64(tc.zeros)

			logger, logs := newLogger()
			l, r := open(t, dir, Options{Logger: logger})
			equalRecords(t, r.records, flat(0, n))
			if lines := logs.lines(); len(lines) != 0 {
				t.Fatalf("Replay of a zero tail logged %q", lines)
			}
			if size := sizeOf(t, path); size != frameEnd+int64(tc.zeros) {
				t.Fatalf("Replay changed the segment's size to %d, want %d", size, frameEnd+int64(tc.zeros))
			}

			write(t, l, 100, 103)
			end, zeroTail := layout(t, path)
			if want := frameEnd + int64(len(rawFrames(n+1, 100, 103))); int64(end) != want || !zeroTail {
				t.Fatalf("after appending: frames end at %d (then only zeros: %v), want %d", end, zeroTail, want)
			}
			must(t, l.Close())
			if size := sizeOf(t, path); size != int64(end) {
				t.Fatalf("Close left %d bytes, want the frames' %d", size, end)
			}

			logger, logs = newLogger()
			_, r = open(t, dir, Options{Logger: logger})
			equalRecords(t, r.records, append(flat(0, n), flat(100, 103)...))
			if lines := logs.lines(); len(lines) != 0 {
				t.Fatalf("reopen logged %q", lines)
			}
		})
	}
}

// TestOldFormatSegment: a segment written without a zero-filled tail, by
// the writer before it kept one, replays unchanged and is appended to; the
// old bytes are left as they are.
func TestOldFormatSegment(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, segName(1))
	old := rawFrames(1, 0, 5)
	must(t, os.WriteFile(path, old, 0o640))

	logger, logs := newLogger()
	l, r := open(t, dir, Options{Logger: logger})
	equalRecords(t, r.records, flat(0, 5))
	if lines := logs.lines(); len(lines) != 0 {
		t.Fatalf("Replay of an old segment logged %q", lines)
	}
	if size := sizeOf(t, path); size != int64(len(old)) {
		t.Fatalf("Replay changed the segment's size to %d, want %d", size, len(old))
	}
	write(t, l, 5, 8)
	data, err := os.ReadFile(path)
	must(t, err)
	if !bytes.HasPrefix(data, old) {
		t.Fatal("appending changed the old frames")
	}
	if end, zeroTail := layout(t, path); end != len(old)+len(rawFrames(6, 5, 8)) || !zeroTail || len(data) <= end {
		t.Fatalf("after appending: frames end at %d of %d bytes (then only zeros: %v), want %d and a zero tail",
			end, len(data), zeroTail, len(old)+len(rawFrames(6, 5, 8)))
	}
	must(t, l.Close())
	_, r = open(t, dir, Options{})
	equalRecords(t, r.records, flat(0, 8))
}

// TestWriterZeroFill: the writer extends the active segment with zeros up
// to a multiple of the chunk, but not past SegmentBytes unless a batch is
// larger; Stats.Bytes counts frame bytes only.
func TestWriterZeroFill(t *testing.T) {
	big := [][]byte{bytes.Repeat([]byte{1}, 5000)}
	for _, tc := range []struct {
		name     string
		segBytes int64
		batch    [][]byte
		want     int64 // file size after one batch
	}{
		{"default segments: one chunk", 0, testBatch(0), zeroChunk},
		{"small segments: up to SegmentBytes", 4096, testBatch(0), 4096},
		{"a batch larger than SegmentBytes: its frame", 1024, big, prefixSize + int64(bodySize(big))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, _ := open(t, dir, Options{SegmentBytes: tc.segBytes})
			must(t, l.Enqueue(tc.batch...).Wait())
			path := segments(t, dir)[0]
			if size := sizeOf(t, path); size != tc.want {
				t.Fatalf("segment is %d bytes, want %d", size, tc.want)
			}
			end, zeroTail := layout(t, path)
			if !zeroTail || end != prefixSize+bodySize(tc.batch) {
				t.Fatalf("frames end at %d (then only zeros: %v), want %d", end, zeroTail, prefixSize+bodySize(tc.batch))
			}
			if s := l.Stats(); s.Bytes != uint64(end) {
				t.Fatalf("Stats.Bytes %d, want the frame bytes %d", s.Bytes, end)
			}
		})
	}
}

// TestTornFrameInZeroTail: a frame cut short in the zero-filled tail
// (part of it written, zeros after it) is a torn tail: dropped with a
// warning when its batch was never acknowledged, ErrTruncated (files left
// as they are) when it was. Garbage followed by a valid later frame is
// corruption.
func TestTornFrameInZeroTail(t *testing.T) {
	const n = 10
	base := writeLog(t, n, Options{}) // ACKED: batch n
	seg := filepath.Base(segments(t, base)[0])
	frameEnd := sizeOf(t, filepath.Join(base, seg))
	next := rawFrames(n+1, n, n+1) // the frame of batch n+1
	flipped := slices.Clone(next)
	flipped[len(flipped)-1] ^= 0x40
	for _, tc := range []struct {
		name string
		tail []byte
	}{
		{"magic byte only", next[:1]},
		{"frame header only", next[:prefixSize]},
		{"half a frame", next[:len(next)/2]},
		{"all but the last byte", next[:len(next)-1]},
		{"whole frame, bad checksum", flipped},
		{"header lost, body written", append(make([]byte, prefixSize), next[prefixSize:]...)},
	} {
		for _, zeros := range []int{100, 2 * zeroChunk} { // findFrame scans megabytes of zeros
			tail := slices.Concat(tc.tail, make([]byte, zeros))
			t.Run(tc.name+"/not acknowledged/"+itoa(uint64(zeros)), func(t *testing.T) {
				dir := copyDir(t, base)
				path := filepath.Join(dir, seg)
				mutate(t, path, func(b []byte) []byte { return append(b, tail...) })
				logger, logs := newLogger()
				start := time.Now()
				l, r := open(t, dir, Options{Logger: logger})
				t.Logf("Replay took %v", time.Since(start))
				equalRecords(t, r.records, flat(0, n))
				if lines := logs.lines(); len(lines) != 1 || !strings.Contains(lines[0], "torn tail") ||
					!strings.Contains(lines[0], "offset="+itoa(uint64(frameEnd))) {
					t.Fatalf("logged %q, want one torn tail line at offset %d", lines, frameEnd)
				}
				if size := sizeOf(t, path); size != frameEnd {
					t.Fatalf("torn tail not truncated: %d bytes, want %d", size, frameEnd)
				}
				write(t, l, 100, 102)
				must(t, l.Close())
				_, r = open(t, dir, Options{})
				equalRecords(t, r.records, append(flat(0, n), flat(100, 102)...))
			})
			t.Run(tc.name+"/acknowledged/"+itoa(uint64(zeros)), func(t *testing.T) {
				dir := copyDir(t, base)
				mutate(t, filepath.Join(dir, seg), func(b []byte) []byte { return append(b, tail...) })
				unacknowledge(t, dir, n+1) // ACKED names the torn batch
				before := dirState(t, dir)
				l, err := Open(dir, Options{})
				must(t, err)
				defer l.Close()
				if _, err := replay(l); !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "offset "+itoa(uint64(frameEnd))) {
					t.Fatalf("Replay: %v, want ErrTruncated at offset %d", err, frameEnd)
				}
				if after := dirState(t, dir); after != before {
					t.Fatalf("a refused Replay changed the files:\n%s\nwant\n%s", after, before)
				}
			})
		}
	}

	t.Run("garbage, then a valid later frame", func(t *testing.T) {
		dir := copyDir(t, base)
		path := filepath.Join(dir, seg)
		mutate(t, path, func(b []byte) []byte {
			return slices.Concat(b, []byte{0xA7, 1, 2, 3, 4, 5, 6}, rawFrames(n+2, n+1, n+2), make([]byte, 4096))
		})
		unacknowledge(t, dir, n) // not a truncation: the frames were never acknowledged
		before, _ := os.ReadFile(path)
		l, err := Open(dir, Options{})
		must(t, err)
		defer l.Close()
		if _, err := replay(l); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "a valid frame of batch 12 follows") {
			t.Fatalf("Replay: %v, want ErrCorrupt naming the frame of batch 12", err)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
			t.Fatal("a failed Replay changed the segment")
		}
	})
}

// TestRollCutsZeroTail: a roll leaves the finished segment ending with its
// last frame, while the active one has a zero tail; in a group that spans
// segments too. A finished segment
// with a zero tail anyway (a crash between the cut and its fsync) replays;
// one with a torn frame before its zeros is corruption.
func TestRollCutsZeroTail(t *testing.T) {
	const limit = 4096
	opts := Options{SegmentBytes: limit}
	dir := t.TempDir()
	l, _ := open(t, dir, opts)
	write(t, l, 0, 40) // groups that span segments, and a batch larger than one
	n := 40
	for first := len(segments(t, dir)); len(segments(t, dir)) < first+2; n++ {
		write(t, l, n, n+1) // one batch per group
	}
	segs := segments(t, dir)
	for i, s := range segs {
		end, zeroTail := layout(t, s)
		size := sizeOf(t, s)
		switch {
		case i < len(segs)-1 && size != int64(end):
			t.Fatalf("finished segment %s: %d bytes, its frames %d", s, size, end)
		case i == len(segs)-1 && (size != limit || !zeroTail):
			t.Fatalf("active segment %s: %d bytes, frames end at %d (zeros after: %v); want %d bytes with a zero tail", s, size, end, zeroTail, limit)
		}
	}
	must(t, l.Close())

	t.Run("finished segment with a zero tail", func(t *testing.T) {
		d := copyDir(t, dir)
		mutate(t, filepath.Join(d, filepath.Base(segs[1])), appendZeros(limit))
		logger, logs := newLogger()
		_, r := open(t, d, Options{SegmentBytes: limit, Logger: logger})
		equalRecords(t, r.records, flat(0, n))
		if lines := logs.lines(); len(lines) != 0 {
			t.Fatalf("logged %q", lines)
		}
	})
	t.Run("finished segment with a torn frame then zeros", func(t *testing.T) {
		d := copyDir(t, dir)
		mutate(t, filepath.Join(d, filepath.Base(segs[1])), func(b []byte) []byte {
			return slices.Concat(b, []byte{0xA7, 1}, make([]byte, 100))
		})
		l, err := Open(d, opts)
		must(t, err)
		defer l.Close()
		if _, err := replay(l); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "not the last segment") {
			t.Fatalf("Replay: %v, want ErrCorrupt in a finished segment", err)
		}
	})
}

// TestSyncKinds: a commit that changed the segment's size (an extension,
// a roll's cut, the first one after Replay) is a full fsync; every other
// one an fdatasync. Options.SyncFile replaces both.
func TestSyncKinds(t *testing.T) {
	t.Run("fsync or fdatasync", func(t *testing.T) {
		dir := t.TempDir()
		opts := Options{SegmentBytes: 4096}
		var mu sync.Mutex
		var kinds []string
		hook := func(l *Log) {
			full, data := l.syncFile, l.syncData
			l.mu.Lock()
			defer l.mu.Unlock()
			l.syncFile = func(f *os.File) error {
				if strings.HasSuffix(f.Name(), segSuffix) {
					mu.Lock()
					kinds = append(kinds, "fsync")
					mu.Unlock()
				}
				return full(f)
			}
			l.syncData = func(f *os.File) error {
				mu.Lock()
				kinds = append(kinds, "fdatasync")
				mu.Unlock()
				return data(f)
			}
		}
		took := func(want ...string) {
			t.Helper()
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(kinds, want) {
				t.Fatalf("syncs %q, want %q", kinds, want)
			}
			kinds = nil
		}

		small := func(l *Log) { must(t, l.Enqueue([]byte("small batch")).Wait()) }
		l, _ := open(t, dir, opts)
		hook(l)
		small(l)
		took("fsync") // extended to SegmentBytes
		small(l)
		took("fdatasync")
		small(l)
		took("fdatasync")
		for len(segments(t, dir)) == 1 {
			small(l)
			mu.Lock()
			k := slices.Clone(kinds)
			mu.Unlock()
			if len(segments(t, dir)) == 1 {
				took("fdatasync")
			} else if !slices.Equal(k, []string{"fsync", "fsync"}) {
				t.Fatalf("a commit with a roll synced %q, want the cut finished segment and the extended new one fsynced", k)
			}
		}
		must(t, l.Close())

		l, _ = open(t, dir, opts)
		kinds = nil
		hook(l)
		small(l)
		took("fsync") // the first commit after Replay
		small(l)
		took("fdatasync")
	})

	t.Run("Options.SyncFile", func(t *testing.T) {
		var mu sync.Mutex
		sizes := map[string]int64{}
		var grown, same int
		opts := Options{SegmentBytes: 4096, SyncFile: func(f *os.File) error {
			if strings.HasSuffix(f.Name(), segSuffix) {
				fi, err := f.Stat()
				if err != nil {
					return err
				}
				mu.Lock()
				if prev, ok := sizes[f.Name()]; ok && prev == fi.Size() {
					same++ // the size was synced before: an fdatasync would do
				} else {
					grown++ // a new size: a full fsync
				}
				sizes[f.Name()] = fi.Size()
				mu.Unlock()
			}
			return f.Sync()
		}}
		l, _ := open(t, t.TempDir(), opts)
		const n = 100
		write(t, l, 0, 1)
		for i := 1; i < n; i++ {
			write(t, l, i, i+1)
		}
		l.segMu.Lock()
		rolls := len(l.segs) - 1
		l.segMu.Unlock()
		s := l.Stats()
		mu.Lock()
		defer mu.Unlock()
		if grown+same != int(s.Commits)+rolls || grown == 0 || same == 0 || rolls == 0 {
			t.Fatalf("SyncFile saw %d syncs after a size change and %d without, want %d commits + %d rolls of both kinds",
				grown, same, s.Commits, rolls)
		}
	})
}
