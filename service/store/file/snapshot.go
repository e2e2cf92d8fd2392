package file

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/store/record"
)

// Snapshot payload, version 1:
//
//	snapshot = magic:"IPAMSNAP" version:byte(1) frame* end
//	frame    = uvarint(n > 0) record(n bytes)     (record: see service/store/record)
//	end      = uvarint(0) uvarint(number of frames)
//
// Nothing may follow end. The end marker and its count make a snapshot cut
// short detectable by itself, whatever the WAL does to protect it.
const (
	snapMagic   = "IPAMSNAP"
	snapVersion = 1
	// maxFrame bounds one encoded record; a longer frame is corruption.
	maxFrame = 64 << 20
)

// errSnapshot is wrapped by every error about a malformed snapshot payload.
var errSnapshot = errors.New("malformed snapshot")

// writeSnapshot writes recs as a snapshot payload to w.
func writeSnapshot(w io.Writer, recs []ipam.Record) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	bw.WriteString(snapMagic)
	bw.WriteByte(snapVersion)
	var buf []byte
	for i := range recs {
		buf = record.Append(buf[:0], &recs[i])
		var hdr [binary.MaxVarintLen64]byte
		bw.Write(hdr[:binary.PutUvarint(hdr[:], uint64(len(buf)))])
		bw.Write(buf)
	}
	var end [1 + binary.MaxVarintLen64]byte
	bw.Write(end[:1+binary.PutUvarint(end[1:], uint64(len(recs)))])
	return bw.Flush()
}

// readSnapshot decodes a snapshot payload from r and hands its records to
// emit in order.
func readSnapshot(r io.Reader, d *record.Decoder, emit func(ipam.Record) error) error {
	br, ok := r.(*bufio.Reader) // the log's, sized by it to the snapshot (at most 64 KiB)
	if !ok {
		br = bufio.NewReaderSize(r, 1<<20)
	}
	var head [len(snapMagic) + 1]byte
	if _, err := io.ReadFull(br, head[:]); err != nil {
		return fmt.Errorf("%w: header: %v", errSnapshot, err)
	}
	if string(head[:len(snapMagic)]) != snapMagic {
		return fmt.Errorf("%w: bad magic %q", errSnapshot, head[:len(snapMagic)])
	}
	if head[len(snapMagic)] != snapVersion {
		return fmt.Errorf("%w: unknown version %d", errSnapshot, head[len(snapMagic)])
	}
	var n uint64
	var big []byte
	for {
		size, err := binary.ReadUvarint(br)
		if err != nil {
			return fmt.Errorf("%w: frame %d: %v", errSnapshot, n, noEOF(err))
		}
		if size == 0 {
			break
		}
		if size > maxFrame {
			return fmt.Errorf("%w: frame %d of %d bytes", errSnapshot, n, size)
		}
		var b []byte
		if int(size) <= br.Size() {
			// Decode in place: the decoder copies what it keeps.
			if b, err = br.Peek(int(size)); err != nil {
				return fmt.Errorf("%w: frame %d: %v", errSnapshot, n, noEOF(err))
			}
		} else {
			if cap(big) < int(size) {
				big = make([]byte, size)
			}
			b = big[:size]
			if _, err := io.ReadFull(br, b); err != nil {
				return fmt.Errorf("%w: frame %d: %v", errSnapshot, n, noEOF(err))
			}
		}
		rec, err := d.Decode(b)
		if err != nil {
			return fmt.Errorf("snapshot frame %d: %w", n, err)
		}
		if int(size) <= br.Size() {
			br.Discard(int(size))
		}
		n++
		if err := emit(rec); err != nil {
			return err
		}
	}
	count, err := binary.ReadUvarint(br)
	if err != nil {
		return fmt.Errorf("%w: end: %v", errSnapshot, noEOF(err))
	}
	if count != n {
		return fmt.Errorf("%w: end says %d records, read %d", errSnapshot, count, n)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return fmt.Errorf("%w: data after the end", errSnapshot)
	}
	return nil
}

// noEOF reports a clean EOF inside a payload as what it is: a cut.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
