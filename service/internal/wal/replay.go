package wal

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Replay loads the newest valid snapshot, if any, through snapshot, and
// then passes every payload of every batch written after it, in order, to
// record; a payload is valid only during the call. A segment ends at its
// last frame or where only zeros follow (the zero-filled tail the writer
// keeps ahead of itself). A torn or corrupt frame at the tail of the last
// segment is dropped: the file is truncated to the last good frame and one
// warning is logged with the offset and the reason.
// Damage anywhere else is an error wrapping ErrCorrupt; an error from a
// callback is returned wrapped. Both callbacks must be non-nil.
//
// Replay must be called once, before the first Enqueue; Enqueue works only
// after it succeeded.
func (l *Log) Replay(snapshot func(r io.Reader) error, record func(payload []byte) error) error {
	l.snapMu.Lock()
	defer l.snapMu.Unlock()
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return ErrClosed
	case l.replayed:
		l.mu.Unlock()
		return errors.New("wal: Replay called twice")
	}
	l.replayed = true
	l.mu.Unlock()

	segs, snaps, err := l.list()
	if err != nil {
		return err
	}
	ack, acked, haveAck, err := openAck(l.dir)
	if err != nil {
		return err
	}
	replayed := false
	defer func() {
		if !replayed {
			_ = ack.f.Close()
		}
	}()
	snapSeq, err := l.loadSnapshot(snaps, snapshot)
	if err != nil {
		return err
	}

	// Skip the segments whose batches the snapshot covers: compaction may
	// have been interrupted before it deleted them.
	live := segs
	for len(live) > 1 && live[1] <= snapSeq+1 {
		live = live[1:]
	}
	if len(live) > 0 && live[0] > snapSeq+1 {
		if snapSeq == 0 {
			return fmt.Errorf("%w: the log starts at batch %d and no valid snapshot holds the batches before it", ErrCorrupt, live[0])
		}
		return fmt.Errorf("%w: the log starts at batch %d but the newest valid snapshot ends at batch %d", ErrCorrupt, live[0], snapSeq)
	}
	r := replayer{log: l, snapSeq: snapSeq, record: record, next: snapSeq + 1, acked: acked}
	if len(live) > 0 {
		r.next = live[0]
	}
	var end, size int64 // of the last segment: its logical end and its file size
	for i, first := range live {
		name := segName(first)
		if first != r.next {
			return fmt.Errorf("%w: segment %s starts at batch %d, want %d", ErrCorrupt, name, first, r.next)
		}
		if end, size, err = r.segment(filepath.Join(l.dir, name), i == len(live)-1); err != nil {
			return err
		}
	}

	last := max(snapSeq, r.next-1)
	if last < acked {
		lost := fmt.Sprintf("batches %d-%d", last+1, acked)
		if !l.recover {
			return fmt.Errorf("%w: %s acknowledged batches up to %d, but the snapshot and segments in %s end at batch %d (segments %s, snapshot %d): %s are lost. "+
				"Restore the missing or cut files from a backup, or start with --recover-truncated to accept the loss",
				ErrTruncated, ackName, acked, l.dir, last, segNames(segs), snapSeq, lost)
		}
		l.log.Error("wal: accepting the loss of acknowledged batches (--recover-truncated)", "dir", l.dir, "lost", lost,
			"first_lost", last+1, "last_lost", acked, "log_ends_at", last)
	}
	if !haveAck || last < acked {
		if err := ack.reset(last, l.fsync); err != nil {
			return err
		}
	}
	if len(live) == 0 || r.next-1 < snapSeq {
		// No segment holds the batches after the snapshot: start one.
		f, err := l.createSegment(last + 1)
		if err != nil {
			return err
		}
		l.f, l.segSize, l.fileSize = f, 0, 0
		segs = append(segs, last+1)
	} else {
		// Continue at the logical end, before the zero-filled tail if
		// there is one. The first sync is a full fsync: a crash between
		// an extension of the file and its fsync leaves a size that may
		// not be durable.
		f, err := os.OpenFile(filepath.Join(l.dir, segName(live[len(live)-1])), os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("wal: %w", err)
		}
		l.f, l.segSize, l.fileSize, l.sizeDirty = f, end, size, true
	}
	l.segs = segs // written before the writer starts
	l.snapSeq = snapSeq
	l.ack, replayed = ack, true
	l.log.Debug("wal: replayed", "dir", l.dir, "snapshot", snapSeq, "batches", r.batches, "last", last)

	l.mu.Lock()
	l.seq = last
	l.enqueued.Store(last)
	l.durable.Store(last)
	l.cur = &group{done: make(chan struct{})}
	l.ready = true
	l.mu.Unlock()
	go l.run()
	return nil
}

// list returns the first seqs of the segments and the seqs of the snapshots
// in the directory, ascending.
func (l *Log) list() (segs, snaps []uint64, err error) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("wal: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if seq, ok := parseSeqName(e.Name(), "", segSuffix); ok {
			segs = append(segs, seq)
		} else if seq, ok := parseSeqName(e.Name(), snapPrefix, snapSuffix); ok {
			snaps = append(snaps, seq)
		}
	}
	slices.Sort(segs) // ReadDir sorts by name, and names sort as numbers; be explicit
	slices.Sort(snaps)
	return segs, snaps, nil
}

// replayer reads segments in order and hands their payloads to record.
type replayer struct {
	log      *Log
	snapSeq  uint64 // batches up to this one are in the snapshot
	acked    uint64 // batches up to this one were acknowledged (ACKED)
	record   func([]byte) error
	next     uint64 // seq the next frame must have
	batches  int
	body     []byte
	payloads [][]byte
}

// segment replays the segment at path and returns its logical end (the
// offset after its last frame) and its size. A segment whose frames are
// followed by zeros only ends there: the writer keeps a zero-filled tail
// ahead of itself. In the last segment a bad frame followed by anything
// else, with no valid frame after it, is a torn tail and is truncated away.
func (r *replayer) segment(path string, last bool) (end, size int64, err error) {
	flag := os.O_RDONLY
	if last {
		flag = os.O_RDWR
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("wal: %w", err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("wal: %w", err)
	}
	size = fi.Size()
	br := bufio.NewReaderSize(f, int(min(max(size, 16), 1<<20)))

	var off int64 // of the frame being read
	var reason string
	var hdr [prefixSize]byte
	for off < size {
		if size-off < prefixSize {
			reason = fmt.Sprintf("short frame header: %d bytes left", size-off)
			break
		}
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return 0, 0, fmt.Errorf("wal: reading %s: %w", path, err)
		}
		h, err := parseHeader(hdr[:])
		if err != nil {
			reason = err.Error()
			break
		}
		if int64(h.length) > size-off-prefixSize {
			reason = fmt.Sprintf("frame of %d bytes ends past the end of the file, %d bytes left", h.length, size-off-prefixSize)
			break
		}
		r.body = slices.Grow(r.body[:0], int(h.length))[:h.length]
		if _, err := io.ReadFull(br, r.body); err != nil {
			return 0, 0, fmt.Errorf("wal: reading %s: %w", path, err)
		}
		if crc32.Checksum(r.body, castagnoli) != h.crc {
			reason = "checksum mismatch"
			break
		}
		seq, payloads, err := parseBody(r.body, r.payloads[:0])
		r.payloads = payloads[:0]
		if err != nil {
			reason = err.Error()
			break
		}
		if seq != r.next {
			return 0, 0, fmt.Errorf("%w: %s at offset %d: batch %d, want %d", ErrCorrupt, path, off, seq, r.next)
		}
		if seq > r.snapSeq {
			for _, p := range payloads {
				if err := r.record(p); err != nil {
					return 0, 0, fmt.Errorf("wal: replaying batch %d: %w", seq, err)
				}
			}
			r.batches++
		}
		r.next++
		off += prefixSize + int64(h.length)
	}
	if reason == "" {
		return size, size, nil
	}
	if zero, err := zeroFrom(f, off, size); err != nil {
		return 0, 0, fmt.Errorf("wal: reading %s: %w", path, err)
	} else if zero {
		return off, size, nil // the zero-filled tail
	}
	if !last {
		return 0, 0, fmt.Errorf("%w: %s at offset %d: %s (not the last segment)", ErrCorrupt, path, off, reason)
	}
	at, seq, err := findFrame(f, off, size, r.next-1)
	if err != nil {
		return 0, 0, fmt.Errorf("wal: reading %s: %w", path, err)
	}
	if at >= 0 {
		return 0, 0, fmt.Errorf("%w: %s at offset %d: %s, but a valid frame of batch %d follows at offset %d", ErrCorrupt, path, off, reason, seq, at)
	}
	if r.next <= r.acked && !r.log.recover {
		// Not a torn write: the batch at off was acknowledged. Leave the
		// file as it is for the operator.
		return 0, 0, fmt.Errorf("%w: %s at offset %d: %s, but batches %d-%d were acknowledged (%s): the file was cut after they were written. "+
			"Restore it from a backup, or start with --recover-truncated to accept the loss",
			ErrTruncated, path, off, reason, r.next, r.acked, ackName)
	}
	if err := f.Truncate(off); err != nil {
		return 0, 0, fmt.Errorf("wal: truncating torn tail of %s: %w", path, err)
	}
	if err := r.log.fsync(f); err != nil {
		return 0, 0, fmt.Errorf("wal: truncating torn tail of %s: %w", path, err)
	}
	r.log.log.Warn("wal: dropped torn tail of the last segment", "file", path, "offset", off, "reason", reason, "dropped_bytes", size-off)
	return off, off, nil
}

// zeroFrom reports whether the bytes of f from off to size are all zero.
func zeroFrom(f *os.File, off, size int64) (bool, error) {
	buf := make([]byte, min(size-off, int64(len(zeros))))
	for off < size {
		b := buf[:min(size-off, int64(len(buf)))]
		if _, err := f.ReadAt(b, off); err != nil {
			return false, err
		}
		if !bytes.Equal(b, zeros[:len(b)]) {
			return false, nil
		}
		off += int64(len(b))
	}
	return true, nil
}

// findFrame looks in f, after offset off, for a valid frame of a batch after
// batch after. It returns its offset and seq, or -1.
func findFrame(f *os.File, off, size int64, after uint64) (int64, uint64, error) {
	data := make([]byte, size-off)
	if _, err := f.ReadAt(data, off); err != nil {
		return -1, 0, err
	}
	for p := 1; ; p++ {
		i := bytes.IndexByte(data[p:], frameMagic)
		if i < 0 {
			return -1, 0, nil
		}
		p += i
		if len(data)-p < prefixSize+bodyHeader {
			return -1, 0, nil
		}
		h, err := parseHeader(data[p:])
		if err != nil || int64(h.length) > int64(len(data)-p-prefixSize) {
			continue
		}
		body := data[p+prefixSize : p+prefixSize+int(h.length)]
		seq := binary.LittleEndian.Uint64(body)
		if seq > after && crc32.Checksum(body, castagnoli) == h.crc {
			return off + int64(p), seq, nil
		}
	}
}

// segNames lists segment file names for a message.
func segNames(segs []uint64) string {
	if len(segs) == 0 {
		return "none"
	}
	names := make([]string, len(segs))
	for i, s := range segs {
		names[i] = segName(s)
	}
	return strings.Join(names, ", ")
}
