package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
	"strconv"
	"strings"
)

// Frame layout; see the package documentation.
const (
	frameMagic byte = 0xA7
	prefixSize      = 1 + 4 + 4 // magic, length, crc
	bodyHeader      = 8 + 4     // seq, count
	maxBody         = 1 << 30
)

// Snapshot layout; see the package documentation.
const (
	snapMagic       = "WALSNAP\x01"
	snapHeaderSize  = 8 + 8 // magic, seq
	snapTrailerSize = 8 + 4 // state length, crc
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// bodySize is the length of the body of a frame holding payloads.
func bodySize(payloads [][]byte) int {
	n := bodyHeader
	for _, p := range payloads {
		n += uvarintLen(uint64(len(p))) + len(p)
	}
	return n
}

func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// appendFrame appends the frame of batch seq, whose body is size bytes long,
// to dst.
func appendFrame(dst []byte, seq uint64, size int, payloads [][]byte) []byte {
	start := len(dst)
	dst = append(dst, frameMagic)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(size))
	dst = binary.LittleEndian.AppendUint32(dst, 0) // crc, below
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payloads)))
	for _, p := range payloads {
		dst = binary.AppendUvarint(dst, uint64(len(p)))
		dst = append(dst, p...)
	}
	body := dst[start+prefixSize:]
	binary.LittleEndian.PutUint32(dst[start+5:], crc32.Checksum(body, castagnoli))
	return dst
}

// frameHeader is the fixed prefix of a frame.
type frameHeader struct {
	length uint32
	crc    uint32
}

// parseHeader checks the magic byte and the length bound of a frame prefix.
func parseHeader(b []byte) (frameHeader, error) {
	if b[0] != frameMagic {
		return frameHeader{}, fmt.Errorf("bad magic byte 0x%02x", b[0])
	}
	h := frameHeader{length: binary.LittleEndian.Uint32(b[1:]), crc: binary.LittleEndian.Uint32(b[5:])}
	if h.length < bodyHeader || h.length > maxBody {
		return frameHeader{}, fmt.Errorf("bad length %d", h.length)
	}
	return h, nil
}

var errMalformed = errors.New("malformed body")

// parseBody splits a body whose checksum matched into its seq and payloads;
// the payloads are appended to dst and alias body.
func parseBody(body []byte, dst [][]byte) (uint64, [][]byte, error) {
	seq := binary.LittleEndian.Uint64(body)
	count := binary.LittleEndian.Uint32(body[8:])
	rest := body[bodyHeader:]
	if uint64(count) > uint64(len(rest)) { // every payload takes at least a byte
		return 0, dst, errMalformed
	}
	for range count {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return 0, dst, errMalformed
		}
		dst = append(dst, rest[k:k+int(n)])
		rest = rest[k+int(n):]
	}
	if len(rest) != 0 {
		return 0, dst, errMalformed
	}
	return seq, dst, nil
}

const (
	segSuffix  = ".wal"
	snapPrefix = "snap-"
	snapSuffix = ".snap"
	tmpSuffix  = ".tmp"
)

func segName(seq uint64) string  { return fmt.Sprintf("%020d%s", seq, segSuffix) }
func snapName(seq uint64) string { return fmt.Sprintf("%s%020d%s", snapPrefix, seq, snapSuffix) }

// parseSeqName returns the sequence number of a file named prefix, 20
// digits, suffix.
func parseSeqName(name, prefix, suffix string) (uint64, bool) {
	digits, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	if digits, ok = strings.CutSuffix(digits, suffix); !ok || len(digits) != 20 {
		return 0, false
	}
	seq, err := strconv.ParseUint(digits, 10, 64)
	return seq, err == nil
}
