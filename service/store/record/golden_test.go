package record

import (
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nephio-project/ipam/service/store/record/recordtest"
)

var update = flag.Bool("update", false, "rewrite testdata/v1.golden from the current encoder")

// TestGoldenV1 pins the bytes of version 1: every case of recordtest
// encodes to the bytes in testdata/v1.golden, and those bytes decode to
// the case. A change of a Go field name or of the encoder that changes a
// byte fails here: stored data would no longer read back.
func TestGoldenV1(t *testing.T) {
	var b strings.Builder
	for _, tc := range recordtest.Cases() {
		b.WriteString(tc.Name + "\n" + hex.EncodeToString(Append(nil, &tc.Record)) + "\n")
	}
	path := filepath.Join("testdata", "v1.golden")
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Fatalf("the encoding of version 1 changed: a stored record would no longer read back; add a version instead\ngot:\n%s", b.String())
	}
	lines := strings.Split(strings.TrimSpace(string(want)), "\n")
	for i, tc := range recordtest.Cases() {
		enc, err := hex.DecodeString(lines[2*i+1])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(enc); err != nil {
			t.Errorf("%s: the golden bytes do not decode: %v", tc.Name, err)
		}
	}
}
