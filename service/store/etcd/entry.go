package etcd

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/store/record"
)

// A log entry, and the content of a snapshot, is a list of records:
//
//	entry  = version:byte(1) count:uvarint count × (len:uvarint record)
//	record = package record's versioned encoding of one ipam.Record
//
// gzipped (gzip's own format) when longer than compressFrom bytes: an entry
// must fit etcd's request limit (1.5 MiB by default), and the records of a
// Sync compress several times. A snapshot is always gzipped. Stores written
// before this format hold JSON arrays of records, which decode still reads
// (their first byte is '['); every entry and snapshot written now is binary,
// so none depends on a Go field name.
//
// A group commit joins the entries of its changes into one:
//
//	joined = 2:byte count:uvarint count × (len:uvarint entry)
//
// each entry as above (gzipped or not, never joined itself), so that one
// transaction puts one log key whatever the number of changes it carries.
const (
	entryVersion = 1
	entryJoined  = 2
	compressFrom = 1 << 10
	gzipMagic0   = 0x1f
	gzipMagic1   = 0x8b
)

// errEntry is wrapped by every error decoding an entry or snapshot.
var errEntry = errors.New("malformed entry")

// encodeRecords returns the uncompressed entry of recs.
func encodeRecords(recs []ipam.Record) []byte {
	b := binary.AppendUvarint([]byte{entryVersion}, uint64(len(recs)))
	var rec []byte
	for i := range recs {
		rec = record.Append(rec[:0], &recs[i])
		b = binary.AppendUvarint(b, uint64(len(rec)))
		b = append(b, rec...)
	}
	return b
}

// encode returns the stored form of a log entry: compressed when long.
func encode(recs []ipam.Record) ([]byte, error) {
	b := encodeRecords(recs)
	if len(b) < compressFrom {
		return b, nil
	}
	return compress(b)
}

func compress(b []byte) ([]byte, error) {
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestSpeed)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return z.Bytes(), nil
}

// join returns the joined entry of entries (stored entries, not joined).
func join(entries [][]byte) []byte {
	size := 1 + binary.MaxVarintLen64
	for _, e := range entries {
		size += binary.MaxVarintLen64 + len(e)
	}
	b := binary.AppendUvarint(append(make([]byte, 0, size), entryJoined), uint64(len(entries)))
	for _, e := range entries {
		b = binary.AppendUvarint(b, uint64(len(e)))
		b = append(b, e...)
	}
	return b
}

// decode reads a stored entry or snapshot: joined or not, gzipped or
// not, binary or (written by earlier versions) JSON.
func decode(b []byte) ([]ipam.Record, error) {
	var d record.Decoder
	if len(b) > 0 && b[0] == entryJoined {
		return decodeJoined(&d, b[1:])
	}
	return decodeOne(&d, nil, b)
}

// decodeJoined reads the entries of a joined entry after its first byte
// and returns their records in turn. One Decoder reads them all, so the
// names and label maps the changes of a group repeat are shared.
func decodeJoined(d *record.Decoder, b []byte) ([]ipam.Record, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: bad entry count", errEntry)
	}
	b = b[k:]
	var recs []ipam.Record
	var err error
	for i := range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: joined entry %d: bad length", errEntry, i)
		}
		e := b[k : k+int(l)]
		if len(e) > 0 && e[0] == entryJoined {
			return nil, fmt.Errorf("%w: joined entry %d is joined itself", errEntry, i)
		}
		if recs, err = decodeOne(d, recs, e); err != nil {
			return nil, fmt.Errorf("joined entry %d: %w", i, err)
		}
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errEntry, len(b))
	}
	return recs, nil
}

// decodeOne reads an entry that is not joined with d and appends its
// records to recs.
func decodeOne(d *record.Decoder, recs []ipam.Record, b []byte) ([]ipam.Record, error) {
	if len(b) >= 2 && b[0] == gzipMagic0 && b[1] == gzipMagic1 {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errEntry, err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("%w: %w", errEntry, err)
		}
	}
	if len(b) > 0 && b[0] == '[' {
		var old []ipam.Record
		if err := json.Unmarshal(b, &old); err != nil {
			return nil, fmt.Errorf("%w: JSON of an earlier version: %w", errEntry, err)
		}
		return append(recs, old...), nil
	}
	if len(b) == 0 || b[0] != entryVersion {
		return nil, fmt.Errorf("%w: unknown version %v", errEntry, b[:min(len(b), 1)])
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: bad record count", errEntry)
	}
	b = b[k:]
	recs = slices.Grow(recs, int(n))
	for i := range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: record %d: bad length", errEntry, i)
		}
		rec, err := d.Decode(b[k : k+int(l)])
		if err != nil {
			return nil, fmt.Errorf("%w: record %d: %w", errEntry, i, err)
		}
		recs = append(recs, rec)
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errEntry, len(b))
	}
	return recs, nil
}
