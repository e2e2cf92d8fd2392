package file

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"
	"testing/iotest"

	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/store/record"
	"github.com/nephio-project/ipam/service/store/record/recordtest"
)

func snapshotRecords(n int) []ipam.Record {
	var recs []ipam.Record
	for _, tc := range recordtest.Cases() {
		recs = append(recs, tc.Record)
	}
	for i := range n {
		k := ipam.Key{Owner: "o", Namespace: "ns", Name: fmt.Sprintf("a%d", i)}
		recs = append(recs, ipam.Record{Op: ipam.OpPutAllocation, Key: k, Allocation: &ipam.AllocationRecord{
			Allocation: ipam.Allocation{Key: k, NetworkInstance: "vpc-1", Selector: sel1},
			Result:     ipam.Result{NetworkInstance: "vpc-1", Prefix: pfx("10.0.1.2/24")},
		}})
	}
	return recs
}

func TestSnapshotRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 99, 1000} {
		t.Run(fmt.Sprintf("%d records", n), func(t *testing.T) {
			recs := snapshotRecords(n)
			var b bytes.Buffer
			if err := writeSnapshot(&b, recs); err != nil {
				t.Fatal(err)
			}
			var got []ipam.Record
			var d record.Decoder
			// One byte per read: frames straddle every buffer boundary.
			err := readSnapshot(iotest.OneByteReader(bytes.NewReader(b.Bytes())), &d, func(r ipam.Record) error {
				got = append(got, r)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, recs) {
				t.Fatalf("snapshot round trip differs")
			}
		})
	}
}

func TestSnapshotLargeFrame(t *testing.T) {
	labels := ipam.Labels{}
	for i := range 60_000 {
		labels[fmt.Sprintf("key-%06d", i)] = fmt.Sprintf("value-%06d", i)
	}
	recs := []ipam.Record{{Op: ipam.OpPutNetworkInstance, Key: infra("big"), NetworkInstance: &ipam.NetworkInstance{Key: infra("big"), Labels: labels}}}
	var b bytes.Buffer
	if err := writeSnapshot(&b, recs); err != nil {
		t.Fatal(err)
	}
	if b.Len() < 1<<20 {
		t.Fatalf("frame of %d bytes does not exceed the reader's buffer", b.Len())
	}
	var got []ipam.Record
	var d record.Decoder
	if err := readSnapshot(&b, &d, func(r ipam.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatal("large frame differs")
	}
}

func TestSnapshotRejects(t *testing.T) {
	var good bytes.Buffer
	if err := writeSnapshot(&good, snapshotRecords(3)); err != nil {
		t.Fatal(err)
	}
	g := good.Bytes()
	var empty bytes.Buffer
	writeSnapshot(&empty, nil)
	cases := map[string][]byte{
		"empty":         nil,
		"bad magic":     append([]byte("IPAMSNAQ"), g[8:]...),
		"bad version":   append(append([]byte(snapMagic), 2), g[9:]...),
		"no end":        g[:len(g)-2],
		"wrong count":   append(bytes.Clone(empty.Bytes()[:len(empty.Bytes())-1]), 5),
		"trailing data": append(bytes.Clone(g), 0),
		"huge frame":    append([]byte(snapMagic+"\x01"), 0xff, 0xff, 0xff, 0xff, 0x7f),
		"bad record":    append([]byte(snapMagic+"\x01"), 2, 9, 9, 0, 1),
	}
	for i := len(snapMagic) + 1; i < len(g); i += 17 {
		cases[fmt.Sprintf("cut at %d", i)] = g[:i]
	}
	for name, b := range cases {
		var d record.Decoder
		err := readSnapshot(bytes.NewReader(b), &d, func(ipam.Record) error { return nil })
		if !errors.Is(err, errSnapshot) && !errors.Is(err, record.ErrMalformed) {
			t.Errorf("%s: err = %v, want a malformed snapshot", name, err)
		}
	}
	// An emit error stops reading and is returned as is.
	stop := errors.New("stop")
	var d record.Decoder
	if err := readSnapshot(bytes.NewReader(g), &d, func(ipam.Record) error { return stop }); err != stop {
		t.Fatalf("emit error: %v", err)
	}
	// A reader error is reported.
	if err := readSnapshot(iotest.ErrReader(io.ErrClosedPipe), &d, func(ipam.Record) error { return nil }); !errors.Is(err, errSnapshot) {
		t.Fatalf("reader error: %v", err)
	}
}
