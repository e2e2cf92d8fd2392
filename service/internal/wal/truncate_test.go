package wal

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTruncationDetected: acknowledged batches that disappear from the
// log after the fact (a file cut at a frame boundary or inside a record,
// frames turned into zeros with the file's size kept, as a lost write into
// the zero-filled tail would leave them, a deleted segment) stop Replay with ErrTruncated naming what is
// missing, and leave the files as they are; RecoverTruncated accepts the
// loss, logs the lost range once, and the next open is clean.
func TestTruncationDetected(t *testing.T) {
	const n = 40
	opts := Options{SegmentBytes: 2048} // several segments
	base := writeLog(t, n, opts)
	segs := segments(t, base)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	last := framesOf(t, segs[len(segs)-1])
	first := framesOf(t, segs[0])
	lastFirstSeq := uint64(n - len(last) + 1) // seq of the last segment's first batch
	for _, tc := range []struct {
		name  string
		edit  func(dir string)
		kept  int    // batches left after recovery
		lost  string // the range the error and the recovery name
		intro string // in the error
	}{
		{"last segment cut at a frame boundary", func(dir string) {
			must(t, os.Truncate(filepath.Join(dir, filepath.Base(segs[len(segs)-1])), int64(last[1].off)))
		}, int(lastFirstSeq), "batches " + itoa(lastFirstSeq+1) + "-40", "end at batch"},
		{"last segment cut inside a middle record", func(dir string) {
			must(t, os.Truncate(filepath.Join(dir, filepath.Base(segs[len(segs)-1])), int64(last[1].off+11)))
		}, int(lastFirstSeq), "batches " + itoa(lastFirstSeq+1) + "-40", "the file was cut"},
		{"last segment zeroed after its first frame", func(dir string) { // data lost, size kept
			mutate(t, filepath.Join(dir, filepath.Base(segs[len(segs)-1])), func(b []byte) []byte { clear(b[last[1].off:]); return b })
		}, int(lastFirstSeq), "batches " + itoa(lastFirstSeq+1) + "-40", "end at batch"},
		{"last segment deleted", func(dir string) {
			must(t, os.Remove(filepath.Join(dir, filepath.Base(segs[len(segs)-1]))))
		}, int(lastFirstSeq - 1), "batches " + itoa(lastFirstSeq) + "-40", "end at batch"},
		{"every segment deleted", func(dir string) {
			for _, s := range segs {
				must(t, os.Remove(filepath.Join(dir, filepath.Base(s))))
			}
		}, 0, "batches 1-40", "segments none"},
		{"only segment cut at a frame boundary", func(dir string) {
			for _, s := range segs[1:] {
				must(t, os.Remove(filepath.Join(dir, filepath.Base(s))))
			}
			must(t, os.Truncate(filepath.Join(dir, filepath.Base(segs[0])), int64(first[len(first)/2].off)))
		}, len(first) / 2, "batches " + itoa(uint64(len(first)/2+1)) + "-40", "end at batch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, base)
			tc.edit(dir)
			before := dirState(t, dir)
			l, err := Open(dir, opts)
			must(t, err)
			_, err = replay(l)
			l.Close()
			if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), tc.intro) || !strings.Contains(err.Error(), "--recover-truncated") {
				t.Fatalf("Replay: %v, want ErrTruncated saying %q", err, tc.intro)
			}
			if tc.intro == "end at batch" && !strings.Contains(err.Error(), tc.lost) {
				t.Errorf("the error does not name %s: %v", tc.lost, err)
			}
			if after := dirState(t, dir); after != before {
				t.Fatalf("a refused Replay changed the files:\n%s\nwant\n%s", after, before)
			}

			logger, logs := newLogger()
			ro := opts
			ro.Logger, ro.RecoverTruncated = logger, true
			l, r := open(t, dir, ro)
			equalRecords(t, r.records, flat(0, tc.kept))
			if out := strings.Join(logs.lines(), "\n"); !strings.Contains(out, "accepting the loss") || !strings.Contains(out, tc.lost) {
				t.Fatalf("the recovery logged %q, want the lost %s", out, tc.lost)
			}
			write(t, l, 100, 102)
			l.Close()

			logger, logs = newLogger()
			o := opts
			o.Logger = logger
			_, r = open(t, dir, o)
			equalRecords(t, r.records, append(flat(0, tc.kept), flat(100, 102)...))
			if lines := logs.lines(); len(lines) != 0 {
				t.Fatalf("the open after the recovery logged %q", lines)
			}
		})
	}
}

// TestAckedFileAbsent: a data directory written before the ACKED file
// existed opens as it did, and gets the file.
func TestAckedFileAbsent(t *testing.T) {
	dir := writeLog(t, 10, Options{})
	must(t, os.Remove(filepath.Join(dir, ackName)))
	_, r := open(t, dir, Options{})
	equalRecords(t, r.records, flat(0, 10))
	if _, err := os.Stat(filepath.Join(dir, ackName)); err != nil {
		t.Fatalf("no %s after the open: %v", ackName, err)
	}
	_, seq, ok, err := openAck(dir)
	if err != nil || !ok || seq != 10 {
		t.Fatalf("ACKED holds %d (%v, %v), want 10", seq, ok, err)
	}
}

// TestAckedTornSlot: a torn write of one slot leaves the other.
func TestAckedTornSlot(t *testing.T) {
	dir := writeLog(t, 10, Options{})
	var older uint64
	mutate(t, filepath.Join(dir, ackName), func(b []byte) []byte {
		newest := -1
		for i := 0; i < 2*ackSlot; i += ackSlot {
			if s, ok := parseAckSlot(b[i : i+ackSlot]); ok && s == 10 {
				newest = i
			} else if ok {
				older = s
			}
		}
		if newest < 0 {
			t.Fatal("no slot holds batch 10")
		}
		b[newest+9] ^= 0xff // tear the newest slot
		return b
	})
	_, seq, ok, err := openAck(dir)
	if err != nil || !ok || seq != older || seq >= 10 {
		t.Fatalf("ACKED holds %d (%v, %v), want the older slot's %d", seq, ok, err, older)
	}
}

func itoa(u uint64) string { return strconv.FormatUint(u, 10) }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// dirState lists the names and sizes of dir's files.
func dirState(t testing.TB, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	must(t, err)
	var b strings.Builder
	for _, e := range entries {
		fi, err := e.Info()
		must(t, err)
		if e.Name() == "LOCK" {
			continue
		}
		b.WriteString(e.Name() + " " + itoa(uint64(fi.Size())) + "\n")
	}
	return b.String()
}
