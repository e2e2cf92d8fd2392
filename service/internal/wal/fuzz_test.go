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

// FuzzReplay replays arbitrary bytes as the only segment. Replay must not
// panic; it either fails, having delivered a prefix of the valid frames, or
// delivers exactly the frames the reference parser finds valid, truncates
// the file after them, and continues the log from there.
func FuzzReplay(f *testing.F) {
	valid, err := os.ReadFile(segments(f, writeLog(f, 6, Options{NoSync: true}))[0])
	if err != nil {
		f.Fatal(err)
	}
	flipped := slices.Clone(valid)
	flipped[len(flipped)/2] ^= 1
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add(valid[:5])
	f.Add(flipped)
	f.Add(slices.Concat(valid, valid)) // batches numbered twice
	f.Add(slices.Concat(valid, make([]byte, 100)))
	f.Add([]byte{})
	f.Add([]byte{0xA7, 0xff, 0xff, 0xff, 0x3f, 0, 0, 0, 0})

	quiet := slog.New(slog.DiscardHandler)
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		seg := filepath.Join(dir, segName(1))
		if err := os.WriteFile(seg, data, 0o640); err != nil {
			t.Fatal(err)
		}
		var want [][]byte
		frames := refParse(data, 1)
		for _, fr := range frames {
			want = append(want, fr.payloads...)
		}
		l, err := Open(dir, Options{NoSync: true, Logger: quiet})
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
		if fi, err := os.Stat(seg); err != nil || fi.Size() != int64(end) {
			t.Fatalf("segment is %d bytes after Replay, want %d (%v)", fi.Size(), end, err)
		}
		if p := l.Enqueue([]byte("appended")); p.Seq() != uint64(len(frames)+1) || p.Wait() != nil {
			t.Fatalf("append after Replay: seq %d, want %d: %v", p.Seq(), len(frames)+1, p.Wait())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}

		_, r := open(t, dir, Options{NoSync: true, Logger: quiet})
		if want = append(want, []byte("appended")); !slices.EqualFunc(r.records, want, bytes.Equal) {
			t.Fatalf("reopened log replayed %d records, want %d", len(r.records), len(want))
		}
	})
}
