package wal

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// FuzzReplay replays arbitrary bytes, followed by pad zero bytes (a
// zero-filled tail, as the writer leaves it), as the only segment. Replay
// must not panic; it either fails, having delivered a prefix of the valid
// frames, or delivers exactly the frames the reference parser finds valid
// and continues the log from there: when only zeros follow them it leaves
// the file as it is and logs nothing, otherwise it truncates the file after
// them and logs one warning. Close leaves the segment ending with its last
// frame.
func FuzzReplay(f *testing.F) {
	valid, err := os.ReadFile(segments(f, writeLog(f, 6, Options{NoSync: true}))[0])
	if err != nil {
		f.Fatal(err)
	}
	flipped := slices.Clone(valid)
	flipped[len(flipped)/2] ^= 1
	f.Add(valid, uint16(0))
	f.Add(valid[:len(valid)-3], uint16(0))
	f.Add(valid[:len(valid)-3], uint16(4096))
	f.Add(valid[:5], uint16(0))
	f.Add(valid[:5], uint16(30))
	f.Add(flipped, uint16(0))
	f.Add(flipped, uint16(100))
	f.Add(slices.Concat(valid, valid), uint16(0)) // batches numbered twice
	f.Add(slices.Concat(valid, make([]byte, 100)), uint16(0))
	f.Add(valid, uint16(5000))
	f.Add(slices.Concat(valid, []byte{0xA7}), uint16(5000))
	f.Add(slices.Concat(valid, make([]byte, 100), valid), uint16(1000))
	f.Add([]byte{}, uint16(0))
	f.Add([]byte{}, uint16(8))
	f.Add([]byte{0xA7, 0xff, 0xff, 0xff, 0x3f, 0, 0, 0, 0}, uint16(0))

	quiet := slog.New(slog.DiscardHandler)
	f.Fuzz(func(t *testing.T, data []byte, pad uint16) {
		dir := t.TempDir()
		seg := filepath.Join(dir, segName(1))
		data = slices.Concat(data, make([]byte, pad))
		if err := os.WriteFile(seg, data, 0o640); err != nil {
			t.Fatal(err)
		}
		var want [][]byte
		frames := refParse(data, 1)
		for _, fr := range frames {
			want = append(want, fr.payloads...)
		}
		logger, logs := newLogger()
		l, err := Open(dir, Options{NoSync: true, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		var got [][]byte
		err = l.Replay(func(io.Reader) error {
			t.Fatal("a snapshot out of nowhere")
			return nil
		}, func(p []byte) error {
			got = append(got, slices.Clone(p))
			return nil
		})
		if err != nil {
			if len(got) > len(want) || !slices.EqualFunc(got, want[:len(got)], bytes.Equal) {
				t.Fatalf("failed Replay (%v) delivered %d records that are not a prefix of the %d valid ones", err, len(got), len(want))
			}
			return
		}
		if !slices.EqualFunc(got, want, bytes.Equal) {
			t.Fatalf("Replay delivered %d records, want the %d of the %d valid frames", len(got), len(want), len(frames))
		}
		end := 0
		if len(frames) > 0 {
			end = frames[len(frames)-1].end
		}
		size, warnings := end, 1
		if !slices.ContainsFunc(data[end:], func(b byte) bool { return b != 0 }) {
			size, warnings = len(data), 0 // a zero-filled tail: the clean end
		}
		if fi, err := os.Stat(seg); err != nil || fi.Size() != int64(size) {
			t.Fatalf("segment is %d bytes after Replay, want %d (%v)", fi.Size(), size, err)
		}
		if lines := logs.lines(); len(lines) != warnings {
			t.Fatalf("Replay logged %q, want %d lines", lines, warnings)
		}
		if p := l.Enqueue([]byte("appended")); p.Seq() != uint64(len(frames)+1) || p.Wait() != nil {
			t.Fatalf("append after Replay: seq %d, want %d: %v", p.Seq(), len(frames)+1, p.Wait())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(seg); err != nil || fi.Size() != int64(end+prefixSize+bodySize([][]byte{[]byte("appended")})) {
			t.Fatalf("segment is %d bytes after Close, want its frames' %d (%v)", fi.Size(), end+prefixSize+bodySize([][]byte{[]byte("appended")}), err)
		}

		_, r := open(t, dir, Options{NoSync: true, Logger: quiet})
		if want = append(want, []byte("appended")); !slices.EqualFunc(r.records, want, bytes.Equal) {
			t.Fatalf("reopened log replayed %d records, want %d", len(r.records), len(want))
		}
	})
}
