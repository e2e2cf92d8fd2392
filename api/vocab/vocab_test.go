package vocab_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nephio-project/ipam/api/vocab"
)

func TestQuote(t *testing.T) {
	long := strings.Repeat("a", vocab.MaxQuoted+1)
	tests := []struct{ in, want string }{
		{"vpc-1", `"vpc-1"`},
		{"", `""`},
		{"a\nb", `"a\nb"`},
		{"a\u202eb", `"a\u202eb"`},
		{strings.Repeat("a", vocab.MaxQuoted), `"` + strings.Repeat("a", vocab.MaxQuoted) + `"`},
		{long, `"` + long[:vocab.MaxQuoted] + `"... (65 bytes)`},
		// A cut never splits a character: "é" is two bytes.
		{strings.Repeat("é", 40), `"` + strings.Repeat("é", 32) + `"... (80 bytes)`},
	}
	for _, tc := range tests {
		if got := vocab.Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// FuzzQuote: Quote is valid UTF-8 of bounded length for any input.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "vpc-1", "a\u202eb", "\xff", strings.Repeat("é", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if q := vocab.Quote(s); !utf8.ValidString(q) || len(q) > 4*vocab.MaxQuoted+40 {
			t.Fatalf("Quote(%q) = %q (%d bytes)", s, q, len(q))
		}
	})
}
