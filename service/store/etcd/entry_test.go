package etcd

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/store/record"
	"github.com/nephio-project/ipam/service/store/record/recordtest"
)

func caseRecords() []ipam.Record {
	var recs []ipam.Record
	for _, tc := range recordtest.Cases() {
		recs = append(recs, tc.Record)
	}
	return recs
}

// TestEntryGolden pins the bytes of a log entry: version, count, and each
// record's length and package record's encoding.
func TestEntryGolden(t *testing.T) {
	recs := []ipam.Record{{Op: ipam.OpDeleteNetworkInstance, Key: ipam.Key{Name: "vpc-1"}}, {Op: ipam.OpDeletePrefix, Key: ipam.Key{Owner: "o", Name: "p"}}}
	b, err := encode(recs)
	if err != nil {
		t.Fatal(err)
	}
	const want = "01" + "02" + "0b" + "01020000057670632d3100" + "08" + "010401" + "6f" + "0001" + "7000"
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("entry bytes\n got %s\nwant %s", got, want)
	}
}

// TestEntryRoundTrip: small entries stay plain, large ones are gzipped,
// and both decode to the records; JSON entries of earlier versions still
// decode.
func TestEntryRoundTrip(t *testing.T) {
	small := caseRecords()[:2]
	var large []ipam.Record
	for range 40 {
		large = append(large, caseRecords()...)
	}
	for _, tc := range []struct {
		name    string
		recs    []ipam.Record
		gzipped bool
	}{{"small", small, false}, {"large", large, true}} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := encode(tc.recs)
			if err != nil {
				t.Fatal(err)
			}
			if got := b[0] == gzipMagic0; got != tc.gzipped {
				t.Fatalf("gzipped %v, want %v (%d bytes)", got, tc.gzipped, len(b))
			}
			back, err := decode(b)
			if err != nil || !reflect.DeepEqual(back, tc.recs) {
				t.Fatalf("round trip: %v", err)
			}
		})
	}
	// A group commit's joined entry: a small and a gzipped entry in turn.
	sb, _ := encode(small)
	lb, _ := encode(large)
	back, err := decode(join([][]byte{sb, lb}))
	if err != nil || !reflect.DeepEqual(back, append(slices.Clone(small), large...)) {
		t.Fatalf("joined entry: %d records, %v", len(back), err)
	}
	legacy, err := json.Marshal(small)
	if err != nil {
		t.Fatal(err)
	}
	back, err = decode(legacy)
	if err != nil || len(back) != len(small) || back[0].Op != small[0].Op || back[0].Key != small[0].Key {
		t.Fatalf("a JSON entry of an earlier version: %v %v", back, err)
	}
	z, err := compress(legacy)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := decode(z); err != nil || len(back) != len(small) {
		t.Fatalf("a gzipped JSON entry of an earlier version: %v", err)
	}
}

// TestEntryRejects: damaged entries are errors, never fewer records.
func TestEntryRejects(t *testing.T) {
	good, _ := encode(caseRecords()[:3])
	rec := record.Append(nil, &ipam.Record{Op: ipam.OpDeletePrefix, Key: ipam.Key{Name: "p"}})
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "unknown version"},
		{"unknown version", append([]byte{9}, good[1:]...), "unknown version"},
		{"count past the end", []byte{1, 0x7f}, "bad record count"},
		{"short record", good[:len(good)-1], "record 2"},
		{"trailing bytes", append(bytes.Clone(good), 0), "trailing"},
		{"bad record", append([]byte{1, 1, byte(len(rec))}, append([]byte{7}, rec[1:]...)...), "malformed record"},
		{"bad gzip", []byte{gzipMagic0, gzipMagic1, 0}, "malformed entry"},
		{"joined count past the end", []byte{entryJoined, 0x7f}, "bad entry count"},
		{"joined short entry", join([][]byte{good})[:len(good)], "joined entry 0"},
		{"joined trailing bytes", append(join([][]byte{good}), 0), "trailing"},
		{"joined in joined", join([][]byte{join([][]byte{good})}), "joined itself"},
		{"joined bad entry", join([][]byte{good, {9}}), "joined entry 1: malformed entry: unknown version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decode(tc.b)
			if !errors.Is(err, errEntry) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("decode: %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzDecodeEntry: any bytes decode to records or an error wrapping
// errEntry, never a panic; a joined entry of one entry decodes as that
// entry does.
func FuzzDecodeEntry(f *testing.F) {
	good, _ := encode(caseRecords()[:3])
	f.Add(good)
	f.Add(join([][]byte{good, good}))
	f.Add([]byte{entryJoined, 1, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := decode(b)
		if err != nil {
			if !errors.Is(err, errEntry) {
				t.Fatalf("error %v does not wrap errEntry", err)
			}
			return
		}
		if len(b) == 0 || b[0] == entryJoined {
			return
		}
		back, err := decode(join([][]byte{b}))
		if err != nil || len(back) != len(recs) {
			t.Fatalf("joined alone: %d records, %v; alone %d", len(back), err, len(recs))
		}
	})
}
