package etcd

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

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
const (
	entryVersion = 1
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

// decode reads a stored entry or snapshot: gzipped or not, binary or
// (written by earlier versions) JSON.
func decode(b []byte) ([]ipam.Record, error) {
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
		var recs []ipam.Record
		if err := json.Unmarshal(b, &recs); err != nil {
			return nil, fmt.Errorf("%w: JSON of an earlier version: %w", errEntry, err)
		}
		return recs, nil
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
	recs := make([]ipam.Record, 0, n)
	var d record.Decoder
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
