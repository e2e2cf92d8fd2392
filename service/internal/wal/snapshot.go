package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// Snapshot stores the caller's state after batch seq, as written by write,
// and then deletes the older snapshots and the segments that hold only
// batches up to seq. The caller captures its state while no Enqueue can
// run and reads Seq at that moment; Enqueue and Wait may continue while the
// snapshot is written. Snapshot first waits until batch seq is durable, so
// a snapshot never gets ahead of the log. It fails when seq is after Seq()
// or before the newest snapshot, and when the Log is closed or failed; a
// failed Snapshot leaves the previous snapshot and the log in place.
func (l *Log) Snapshot(seq uint64, write func(w io.Writer) error) error {
	l.snapMu.Lock()
	defer l.snapMu.Unlock()
	if cur := l.Seq(); seq > cur {
		return fmt.Errorf("wal: snapshot of batch %d, but the last batch is %d", seq, cur)
	}
	if seq < l.snapSeq {
		return fmt.Errorf("wal: snapshot of batch %d, but the newest snapshot is of batch %d", seq, l.snapSeq)
	}
	if err := l.Enqueue().Wait(); err != nil {
		return err
	}
	path := filepath.Join(l.dir, snapName(seq))
	if err := l.writeSnapshot(path, seq, write); err != nil {
		_ = os.Remove(path + tmpSuffix)
		return err
	}
	l.snapSeq = seq
	l.compact(seq)
	return nil
}

// writeSnapshot writes the snapshot file through a temporary file, durably.
func (l *Log) writeSnapshot(path string, seq uint64, write func(w io.Writer) error) error {
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	defer func() { _ = f.Close() }() // after the explicit Close below, a no-op
	w := &snapWriter{w: bufio.NewWriterSize(f, 1<<20)}
	var hdr [snapHeaderSize]byte
	copy(hdr[:], snapMagic)
	binary.LittleEndian.PutUint64(hdr[len(snapMagic):], seq)
	w.Write(hdr[:])
	if err := write(w); err != nil {
		return fmt.Errorf("wal: writing snapshot of batch %d: %w", seq, err)
	}
	w.Write(binary.LittleEndian.AppendUint64(nil, uint64(w.n-snapHeaderSize)))
	w.Write(binary.LittleEndian.AppendUint32(nil, w.crc))
	if w.err == nil {
		w.err = w.w.Flush()
	}
	if w.err == nil {
		w.err = l.fsync(f)
	}
	if w.err == nil {
		w.err = f.Close()
	}
	if w.err == nil {
		w.err = os.Rename(tmp, path)
	}
	if w.err != nil {
		return fmt.Errorf("wal: writing snapshot %s: %w", path, w.err)
	}
	return l.syncDir(l.dir)
}

// snapWriter writes through w, keeping the CRC-32C and the count of what it
// wrote and the first error.
type snapWriter struct {
	w   *bufio.Writer
	crc uint32
	n   int64
	err error
}

func (s *snapWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	s.crc = crc32.Update(s.crc, castagnoli, p[:n])
	s.n += int64(n)
	s.err = err
	return n, err
}

// compact deletes the segments holding only batches up to seq, except the
// active one, and the snapshots older than seq. A file it fails to delete
// costs only space: it is logged and deleted by a later compaction.
func (l *Log) compact(seq uint64) {
	l.segMu.Lock()
	k := 0
	for k+1 < len(l.segs) && l.segs[k+1] <= seq+1 {
		k++
	}
	old := l.segs[:k:k]
	l.segs = l.segs[k:]
	l.segMu.Unlock()

	var names []string
	for _, s := range old {
		names = append(names, segName(s))
	}
	_, snaps, err := l.list()
	if err != nil {
		l.log.Warn("wal: compaction", "dir", l.dir, "err", err)
	}
	for _, s := range snaps {
		if s < seq {
			names = append(names, snapName(s))
		}
	}
	for _, name := range names {
		if err := os.Remove(filepath.Join(l.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.log.Warn("wal: compaction", "dir", l.dir, "err", err)
		}
	}
}

// errBadSnapshot marks a snapshot file that fails its checks.
var errBadSnapshot = errors.New("invalid snapshot")

// loadSnapshot passes the state of the newest valid snapshot among snaps to
// fn and returns its seq, or 0 when there is none. Invalid snapshots are
// logged and skipped.
func (l *Log) loadSnapshot(snaps []uint64, fn func(io.Reader) error) (uint64, error) {
	for i := len(snaps) - 1; i >= 0; i-- {
		path := filepath.Join(l.dir, snapName(snaps[i]))
		f, n, err := openSnapshot(path, snaps[i])
		if errors.Is(err, errBadSnapshot) {
			l.log.Warn("wal: skipping invalid snapshot, trying an older one", "file", path, "reason", err)
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("wal: reading snapshot %s: %w", path, err)
		}
		err = fn(bufio.NewReaderSize(io.NewSectionReader(f, snapHeaderSize, n), readBuffer(n)))
		_ = f.Close()
		if err != nil {
			return 0, fmt.Errorf("wal: loading snapshot %s: %w", path, err)
		}
		return snaps[i], nil
	}
	return 0, nil
}

// readBuffer is the size of the buffer to read n bytes of a snapshot
// through: n, between 4 KiB and 64 KiB (a small snapshot is read with a
// small buffer; a bigger buffer saves nothing but read calls).
func readBuffer(n int64) int {
	return int(min(max(n, 4<<10), 64<<10))
}

// openSnapshot checks the header, length and checksum of the snapshot of
// batch seq at path and returns it open, with the length of its state.
func openSnapshot(path string, seq uint64) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	n, err := checkSnapshot(f, seq)
	if err != nil {
		_ = f.Close()
		return nil, 0, err
	}
	return f, n, nil
}

func checkSnapshot(f *os.File, seq uint64) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	n := fi.Size() - snapHeaderSize - snapTrailerSize
	if n < 0 {
		return 0, fmt.Errorf("%w: %d bytes is too short", errBadSnapshot, fi.Size())
	}
	var hdr [snapHeaderSize]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return 0, err
	}
	if string(hdr[:len(snapMagic)]) != snapMagic {
		return 0, fmt.Errorf("%w: bad magic", errBadSnapshot)
	}
	if got := binary.LittleEndian.Uint64(hdr[len(snapMagic):]); got != seq {
		return 0, fmt.Errorf("%w: header says batch %d", errBadSnapshot, got)
	}
	h := crc32.New(castagnoli)
	body := io.NewSectionReader(f, 0, fi.Size()-4)
	if _, err := io.CopyBuffer(h, body, make([]byte, readBuffer(fi.Size()))); err != nil {
		return 0, err
	}
	var tr [snapTrailerSize]byte
	if _, err := f.ReadAt(tr[:], fi.Size()-snapTrailerSize); err != nil {
		return 0, err
	}
	if got := binary.LittleEndian.Uint64(tr[:]); got != uint64(n) {
		return 0, fmt.Errorf("%w: trailer says %d bytes of state, file holds %d", errBadSnapshot, got, n)
	}
	if binary.LittleEndian.Uint32(tr[8:]) != h.Sum32() {
		return 0, fmt.Errorf("%w: checksum mismatch", errBadSnapshot)
	}
	return n, nil
}
