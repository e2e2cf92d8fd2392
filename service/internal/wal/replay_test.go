package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// refFrame is a frame as the reference parser reads it.
type refFrame struct {
	off, end int
	seq      uint64
	payloads [][]byte
}

// refParse is a plain reading of the documented segment format: the frames
// from the start of data that are valid and numbered first, first+1, ...; it
// stops at the first one that is not.
func refParse(data []byte, first uint64) []refFrame {
	var frames []refFrame
	for off := 0; ; {
		rest := data[off:]
		if len(rest) < 21 || rest[0] != 0xA7 {
			return frames
		}
		n := int(binary.LittleEndian.Uint32(rest[1:5]))
		if n < 12 || n > 1<<30 || n > len(rest)-9 {
			return frames
		}
		body := rest[9 : 9+n]
		if crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)) != binary.LittleEndian.Uint32(rest[5:9]) {
			return frames
		}
		f := refFrame{off: off, end: off + 9 + n, seq: binary.LittleEndian.Uint64(body)}
		if f.seq != first+uint64(len(frames)) {
			return frames
		}
		count := int(binary.LittleEndian.Uint32(body[8:]))
		p := body[12:]
		for range count {
			size, k := binary.Uvarint(p)
			if k <= 0 || size > uint64(len(p)-k) {
				return frames
			}
			f.payloads = append(f.payloads, p[k:k+int(size)])
			p = p[k+int(size):]
		}
		if len(p) != 0 {
			return frames
		}
		frames = append(frames, f)
		off = f.end
	}
}

// segments lists the segment files of dir, ascending.
func segments(t testing.TB, dir string) []string {
	t.Helper()
	paths := names(t, dir, "*.wal")
	for i := range paths {
		paths[i] = filepath.Join(dir, paths[i])
	}
	return paths
}

// framesOf parses a whole segment file with the reference parser.
func framesOf(t testing.TB, path string) []refFrame {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seq, ok := parseSeqName(filepath.Base(path), "", segSuffix)
	if !ok {
		t.Fatalf("bad segment name %s", path)
	}
	frames := refParse(data, seq)
	if len(frames) > 0 && frames[len(frames)-1].end != len(data) || len(frames) == 0 && len(data) > 0 {
		t.Fatalf("%s: the reference parser stops before the end", path)
	}
	return frames
}

// copyDir copies the regular files of src into a new temporary directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// mutate rewrites the file at path with f applied to its contents.
func mutate(t testing.TB, path string, f func([]byte) []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(data), 0o640); err != nil {
		t.Fatal(err)
	}
}

// unacknowledge sets the ACKED file of dir to seq, as it is after a crash
// before the batches after seq were acknowledged.
func unacknowledge(t testing.TB, dir string, seq uint64) {
	t.Helper()
	a, _, _, err := openAck(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.f.Close()
	if err := a.reset(seq, (*os.File).Sync); err != nil {
		t.Fatal(err)
	}
}

// writeLog makes a closed log of batches 0..n-1 in a new directory.
func writeLog(t testing.TB, n int, opts Options) string {
	t.Helper()
	dir := t.TempDir()
	l, _ := open(t, dir, opts)
	write(t, l, 0, n)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestTornTail(t *testing.T) {
	const n = 10
	base := writeLog(t, n, Options{})
	segs := segments(t, base)
	if len(segs) != 1 {
		t.Fatalf("%d segments, want 1", len(segs))
	}
	frames := framesOf(t, segs[0])
	last := frames[n-1]
	for cut := last.off + 1; cut < last.end; cut++ {
		dir := copyDir(t, base)
		seg := filepath.Join(dir, filepath.Base(segs[0]))
		if err := os.Truncate(seg, int64(cut)); err != nil {
			t.Fatal(err)
		}
		unacknowledge(t, dir, n-1) // a torn write is of a batch never acknowledged
		logger, logs := newLogger()
		l, r := open(t, dir, Options{Logger: logger})
		equalRecords(t, r.records, flat(0, n-1))
		if lines := logs.lines(); len(lines) != 1 || !strings.Contains(lines[0], "torn tail") ||
			!strings.Contains(lines[0], "offset="+strconv.Itoa(last.off)) {
			t.Fatalf("cut at %d: logged %q, want one torn tail line at offset %d", cut, lines, last.off)
		}
		if fi, err := os.Stat(seg); err != nil || fi.Size() != int64(last.off) {
			t.Fatalf("cut at %d: segment not truncated to %d: %v %v", cut, last.off, fi.Size(), err)
		}
		if p := l.Enqueue(testBatch(100)...); p.Seq() != n || p.Wait() != nil {
			t.Fatalf("cut at %d: append after recovery: seq %d, %v", cut, p.Seq(), p.Wait())
		}
		l.Close()

		logger, logs = newLogger()
		_, r = open(t, dir, Options{Logger: logger})
		equalRecords(t, r.records, append(flat(0, n-1), testBatch(100)...))
		if lines := logs.lines(); len(lines) != 0 {
			t.Fatalf("cut at %d: clean reopen logged %q", cut, lines)
		}
	}
}

func TestCorruption(t *testing.T) {
	const n = 40
	opts := Options{SegmentBytes: 2048} // several segments
	base := writeLog(t, n, opts)
	segs := segments(t, base)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	lastSeg := framesOf(t, segs[len(segs)-1])
	if len(lastSeg) < 3 {
		t.Fatalf("last segment has %d frames, want at least 3", len(lastSeg))
	}
	firstSeg := framesOf(t, segs[0])
	lastFrame := lastSeg[len(lastSeg)-1]
	middle := lastSeg[len(lastSeg)/2]
	flip := func(at int) func([]byte) []byte {
		return func(b []byte) []byte { b[at] ^= 0x40; return b }
	}

	tail := []struct {
		name string
		seg  int // index in segs
		edit func([]byte) []byte
	}{
		{"last payload byte", len(segs) - 1, flip(lastFrame.end - 1)},
		{"last checksum", len(segs) - 1, flip(lastFrame.off + 6)},
		{"last magic", len(segs) - 1, flip(lastFrame.off)},
		{"last length grown", len(segs) - 1, flip(lastFrame.off + 3)},
		{"last length shrunk", len(segs) - 1, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[lastFrame.off+1:], uint32(lastFrame.end-lastFrame.off-9-1))
			return b
		}},
		{"last frame zeroed after its header", len(segs) - 1, func(b []byte) []byte { clear(b[lastFrame.off+prefixSize:]); return b }},
		{"last frame torn, then zeros", len(segs) - 1, func(b []byte) []byte {
			clear(b[lastFrame.off+prefixSize+4:])
			return append(b, make([]byte, 3000)...)
		}},
		{"garbage appended", len(segs) - 1, func(b []byte) []byte { return append(b, 0xA7, 1, 2, 3) }},
	}
	for _, tc := range tail {
		t.Run("dropped/"+tc.name, func(t *testing.T) {
			dir := copyDir(t, base)
			mutate(t, filepath.Join(dir, filepath.Base(segs[tc.seg])), tc.edit)
			unacknowledge(t, dir, n-1) // a torn write is of a batch never acknowledged
			logger, logs := newLogger()
			l, r := open(t, dir, Options{Logger: logger, SegmentBytes: opts.SegmentBytes})
			want := flat(0, n-1)
			if tc.name == "garbage appended" {
				want = flat(0, n)
			}
			equalRecords(t, r.records, want)
			if lines := logs.lines(); len(lines) != 1 {
				t.Fatalf("logged %q, want one line", lines)
			} else {
				t.Log(lines[0])
			}
			write(t, l, n, n+3)
			l.Close()
			_, r = open(t, dir, Options{SegmentBytes: opts.SegmentBytes})
			equalRecords(t, r.records, append(want, flat(n, n+3)...))
		})
	}

	fatal := []struct {
		name string
		seg  int
		edit func([]byte) []byte
	}{
		{"middle payload of the last segment", len(segs) - 1, flip(middle.end - 1)},
		{"middle length of the last segment", len(segs) - 1, flip(middle.off + 2)},
		{"middle magic of the last segment", len(segs) - 1, flip(middle.off)},
		{"first frame of the last segment", len(segs) - 1, flip(lastSeg[0].off + 20)},
		{"last payload of the first segment", 0, flip(firstSeg[len(firstSeg)-1].end - 1)},
		{"torn first segment", 0, func(b []byte) []byte { return b[:len(b)-1] }},
		{"first segment padded with garbage", 0, func(b []byte) []byte { return append(b, 0, 0, 1, 0) }},
		{"first payload of the first segment", 0, flip(firstSeg[0].end - 1)},
	}
	for _, tc := range fatal {
		t.Run("error/"+tc.name, func(t *testing.T) {
			dir := copyDir(t, base)
			path := filepath.Join(dir, filepath.Base(segs[tc.seg]))
			mutate(t, path, tc.edit)
			before, _ := os.ReadFile(path)
			l, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			_, err = replay(l)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Replay: %v, want ErrCorrupt", err)
			}
			t.Log(err)
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Fatal("a failed Replay changed the segment")
			}
			if err := l.Enqueue([]byte("x")).Wait(); err == nil {
				t.Fatal("Enqueue after a failed Replay succeeded")
			}
		})
	}
}

func TestMissingSegment(t *testing.T) {
	base := writeLog(t, 40, Options{SegmentBytes: 2048})
	segs := segments(t, base)
	for _, i := range []int{0, 1} {
		dir := copyDir(t, base)
		if err := os.Remove(filepath.Join(dir, filepath.Base(segs[i]))); err != nil {
			t.Fatal(err)
		}
		l, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := replay(l); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("segment %d removed: Replay: %v, want ErrCorrupt", i, err)
		} else {
			t.Log(err)
		}
		l.Close()
	}
}

func TestSegmentRollover(t *testing.T) {
	const limit = 1024
	dir := t.TempDir()
	l, _ := open(t, dir, Options{SegmentBytes: limit})
	write(t, l, 0, 60) // one Wait: whole groups that span segments
	for i := 60; i < 120; i++ {
		write(t, l, i, i+1) // one batch per group
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segments(t, dir)
	if len(segs) < 10 {
		t.Fatalf("%d segments, want many", len(segs))
	}
	next := uint64(1)
	for _, s := range segs {
		frames := framesOf(t, s)
		if len(frames) == 0 || frames[0].seq != next {
			t.Fatalf("%s: does not start with batch %d", s, next)
		}
		next += uint64(len(frames))
		if size := frames[len(frames)-1].end; size > limit && len(frames) > 1 {
			t.Fatalf("%s: %d bytes in %d frames, over the %d limit", s, size, len(frames), limit)
		}
	}
	if next != 121 {
		t.Fatalf("segments hold batches up to %d, want 120", next-1)
	}
	_, r := open(t, dir, Options{SegmentBytes: limit})
	equalRecords(t, r.records, flat(0, 120))
}
