package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
)

// ackName is the file that records the last acknowledged batch.
const ackName = "ACKED"

// ackMagic starts each slot of the ACKED file; its last byte is the
// format version.
var ackMagic = [8]byte{'W', 'A', 'L', 'A', 'C', 'K', 0, 1}

// ackSlot is the size of one slot: magic, seq, CRC-32C of both, padding.
const ackSlot = 24

// ErrTruncated is wrapped by the error of Replay when the log ends before
// a batch that was acknowledged: files were cut or deleted after the
// fact, and acknowledged changes are missing.
var ErrTruncated = errors.New("wal: acknowledged batches are missing")

// acker keeps the ACKED file: the highest batch whose Wait returned nil.
// The writer updates it after every group commit with one write and no
// fsync, alternating between two slots so that a torn write leaves the
// other intact. It is written only after the batches are durable, so it
// never claims more than the log holds: a crash of the process keeps it
// (the page cache survives), and a power loss may leave it behind the
// log, which only narrows what Replay can check.
type acker struct {
	f   *os.File
	n   uint64 // writes so far: the slot of the next one
	buf [ackSlot]byte
}

// openAck opens (creating if needed) the ACKED file of dir and returns it
// with the highest valid seq it holds; ok is false when the file held
// none (a new directory, or one written before the file existed).
func openAck(dir string) (*acker, uint64, bool, error) {
	f, err := os.OpenFile(filepath.Join(dir, ackName), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, 0, false, fmt.Errorf("wal: %w", err)
	}
	var buf [2 * ackSlot]byte
	n, _ := f.ReadAt(buf[:], 0)
	var seq uint64
	ok := false
	for i := 0; i+ackSlot <= n; i += ackSlot {
		if s, valid := parseAckSlot(buf[i : i+ackSlot]); valid && (!ok || s > seq) {
			seq, ok = s, true
		}
	}
	return &acker{f: f}, seq, ok, nil
}

func parseAckSlot(b []byte) (uint64, bool) {
	if [8]byte(b[:8]) != ackMagic || crc32.Checksum(b[:16], castagnoli) != binary.LittleEndian.Uint32(b[16:20]) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[8:16]), true
}

// write records seq as acknowledged.
func (a *acker) write(seq uint64) error {
	b := &a.buf
	copy(b[:8], ackMagic[:])
	binary.LittleEndian.PutUint64(b[8:16], seq)
	binary.LittleEndian.PutUint32(b[16:20], crc32.Checksum(b[:16], castagnoli))
	off := int64(a.n%2) * ackSlot
	a.n++
	_, err := a.f.WriteAt(b[:], off)
	return err
}

// reset records seq in both slots and makes it durable: after a recovery
// that accepted a loss, the next start must not report it again.
func (a *acker) reset(seq uint64, sync func(*os.File) error) error {
	for range 2 {
		if err := a.write(seq); err != nil {
			return fmt.Errorf("wal: %w", err)
		}
	}
	if err := sync(a.f); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	return nil
}
