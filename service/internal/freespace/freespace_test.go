package freespace

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func pfx(s string) netip.Prefix {
	if s == "invalid" {
		return netip.Prefix{}
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		return p
	}
	// ParsePrefix rejects nothing canonical-looking we use, but keep
	// non-canonical inputs such as 10.0.0.1/24 possible.
	i := strings.IndexByte(s, '/')
	a := netip.MustParseAddr(s[:i])
	n, _ := strconv.Atoi(s[i+1:])
	return netip.PrefixFrom(a, n)
}

func blocksOf(s *Space) []netip.Prefix {
	var out []netip.Prefix
	s.Ascend(func(p netip.Prefix) bool { out = append(out, p); return true })
	return out
}

func pfxs(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = pfx(s)
	}
	return out
}

// run executes a script of operations against a new Space of root. Each
// line is "op arg -> want":
//
//	take P -> bool       release P -> bool     isfree P -> bool
//	best N -> P | none   blocks -> N           count -> HI:LO (hex)
func run(t *testing.T, root string, script []string) *Space {
	t.Helper()
	s := New(pfx(root))
	for _, line := range script {
		lhs, want, ok := strings.Cut(line, " -> ")
		if !ok {
			t.Fatalf("bad script line %q", line)
		}
		f := strings.Fields(lhs)
		var got string
		switch f[0] {
		case "take":
			got = strconv.FormatBool(s.Take(pfx(f[1])))
		case "release":
			got = strconv.FormatBool(s.Release(pfx(f[1])))
		case "isfree":
			got = strconv.FormatBool(s.IsFree(pfx(f[1])))
		case "best":
			n, _ := strconv.Atoi(f[1])
			p, ok := s.BestFit(n)
			got = "none"
			if ok {
				got = p.String()
			} else if p.IsValid() {
				t.Fatalf("%s: BestFit returned %v with false", line, p)
			}
		case "blocks":
			got = strconv.Itoa(s.Blocks())
		case "count":
			hi, lo := s.Free()
			got = fmt.Sprintf("%#x:%#x", hi, lo)
		default:
			t.Fatalf("bad script op %q", f[0])
		}
		if got != want {
			t.Fatalf("root %s: %s: got %s", root, line, got)
		}
		s.check(t)
		checkBlocks(t, s.Root(), blocksOf(s))
		if n := len(blocksOf(s)); n != s.Blocks() {
			t.Fatalf("%s: Blocks() = %d, Ascend visits %d", line, s.Blocks(), n)
		}
	}
	return s
}

func TestContractExamples(t *testing.T) {
	t.Run("v4/16", func(t *testing.T) {
		s := run(t, "10.0.0.0/16", []string{
			"take 10.0.0.0/24 -> true",
			"best 23 -> 10.0.2.0/23",
			"best 24 -> 10.0.1.0/24",
			"best 25 -> 10.0.1.0/25",
			"best 17 -> 10.0.128.0/17",
			"best 16 -> none",
			"blocks -> 8",
			"count -> 0x0:0xff00",
		})
		want := pfxs("10.0.1.0/24", "10.0.2.0/23", "10.0.4.0/22", "10.0.8.0/21",
			"10.0.16.0/20", "10.0.32.0/19", "10.0.64.0/18", "10.0.128.0/17")
		if got := blocksOf(s); !slices.Equal(got, want) {
			t.Fatalf("free blocks %v, want %v", got, want)
		}
	})
	t.Run("v4/8", func(t *testing.T) {
		run(t, "10.0.0.0/8", []string{
			"take 10.0.1.0/24 -> true",
			"best 16 -> 10.1.0.0/16",
			"best 24 -> 10.0.0.0/24",
			"best 9 -> 10.128.0.0/9",
		})
	})
	t.Run("v6/32", func(t *testing.T) {
		run(t, "2001:db8::/32", []string{
			"best 48 -> 2001:db8::/48",
			"take 2001:db8::/48 -> true",
			"best 48 -> 2001:db8:1::/48",
			"take 2001:db8:1::/48 -> true",
			"best 48 -> 2001:db8:2::/48",
			"blocks -> 15",
		})
	})
}

func TestScripts(t *testing.T) {
	tests := []struct {
		name, root string
		script     []string
	}{
		{"root taken and released", "10.0.0.0/16", []string{
			"take 10.0.0.0/16 -> true",
			"blocks -> 0",
			"count -> 0x0:0x0",
			"best 16 -> none",
			"best 32 -> none",
			"isfree 10.0.0.0/16 -> false",
			"isfree 10.0.5.0/24 -> false",
			"take 10.0.0.0/16 -> false",
			"take 10.0.5.0/24 -> false",
			"release 10.0.0.0/16 -> true",
			"release 10.0.0.0/16 -> false",
			"blocks -> 1",
			"count -> 0x0:0x10000",
			"best 16 -> 10.0.0.0/16",
		}},
		{"root partly used", "10.0.0.0/16", []string{
			"take 10.0.7.0/24 -> true",
			"take 10.0.0.0/16 -> false",
			"release 10.0.0.0/16 -> false",
			"release 10.0.6.0/23 -> false",
			"isfree 10.0.6.0/24 -> true",
			"isfree 10.0.6.0/23 -> false",
			"blocks -> 8",
		}},
		{"release a block never taken as a unit", "10.0.0.0/16", []string{
			"take 10.0.0.0/24 -> true",
			"take 10.0.1.0/24 -> true",
			"blocks -> 7",
			"release 10.0.0.0/23 -> true",
			"blocks -> 1",
			"take 10.0.0.0/22 -> true",
			"release 10.0.2.0/24 -> true",
			"best 24 -> 10.0.2.0/24",
			"release 10.0.0.0/23 -> true",
			"release 10.0.3.0/24 -> true",
			"blocks -> 1",
			"count -> 0x0:0x10000",
		}},
		{"release splits a used block", "10.0.0.0/8", []string{
			"take 10.0.0.0/8 -> true",
			"release 10.200.3.0/24 -> true",
			"blocks -> 1",
			"best 16 -> none",
			"best 24 -> 10.200.3.0/24",
			"best 28 -> 10.200.3.0/28",
			"release 10.200.2.0/24 -> true",
			"best 23 -> 10.200.2.0/23",
			"release 10.200.2.128/25 -> false",
			"take 10.200.2.0/23 -> true",
			"blocks -> 0",
		}},
		{"double take and double release", "192.168.0.0/24", []string{
			"take 192.168.0.64/26 -> true",
			"take 192.168.0.64/26 -> false",
			"take 192.168.0.64/27 -> false",
			"take 192.168.0.0/25 -> false",
			"release 192.168.0.64/26 -> true",
			"release 192.168.0.64/26 -> false",
			"release 192.168.0.64/27 -> false",
			"blocks -> 1",
		}},
		{"non-canonical and invalid input", "10.0.0.0/8", []string{
			"take 10.0.0.1/24 -> false",
			"take 10.0.1.0/16 -> false",
			"isfree 10.0.0.1/24 -> false",
			"take invalid -> false",
			"isfree invalid -> false",
			"release invalid -> false",
			"blocks -> 1",
			"take 10.0.0.0/24 -> true",
			"release 10.0.0.1/24 -> false",
			"release 10.0.0.0/23 -> false",
			"blocks -> 16",
		}},
		{"outside root", "10.0.0.0/8", []string{
			"take 11.0.0.0/24 -> false",
			"take 10.0.0.0/7 -> false",
			"take 0.0.0.0/0 -> false",
			"isfree 11.0.0.0/8 -> false",
			"take 9.255.255.255/32 -> false",
			"release 11.0.0.0/8 -> false",
			"blocks -> 1",
		}},
		{"family mismatch in v4", "10.0.0.0/8", []string{
			"take 2001:db8::/32 -> false",
			"take ::ffff:10.0.0.0/104 -> false",
			"take ::ffff:10.0.0.0/120 -> false",
			"isfree ::ffff:10.0.0.0/104 -> false",
			"release ::ffff:10.0.0.0/104 -> false",
			"blocks -> 1",
		}},
		{"family mismatch in v6", "::/0", []string{
			"take 10.0.0.0/8 -> false",
			"take 0.0.0.0/0 -> false",
			"isfree 10.0.0.0/8 -> false",
			"take ::ffff:10.0.0.0/104 -> true",
			"isfree ::ffff:10.0.0.0/104 -> false",
			"isfree ::ffff:11.0.0.0/104 -> true",
		}},
		{"end of v4 space", "0.0.0.0/0", []string{
			"count -> 0x0:0x100000000",
			"best 0 -> 0.0.0.0/0",
			"take 255.255.255.0/24 -> true",
			"isfree 255.255.255.0/24 -> false",
			"isfree 255.255.254.0/24 -> true",
			"isfree 255.255.255.255/32 -> false",
			"best 24 -> 255.255.254.0/24",
			"best 32 -> 255.255.254.0/32",
			"best 1 -> 0.0.0.0/1",
			"best 0 -> none",
			"best -1 -> none",
			"best 33 -> none",
			"blocks -> 24",
			"count -> 0x0:0xffffff00",
			"take 255.255.255.255/32 -> false",
			"release 255.255.255.255/32 -> true",
			"best 32 -> 255.255.255.255/32",
			"take 255.255.255.255/32 -> true",
			"release 255.255.255.0/24 -> true",
			"blocks -> 1",
			"take 0.0.0.0/0 -> true",
			"count -> 0x0:0x0",
			"release 0.0.0.0/0 -> true",
		}},
		{"end of v6 space", "::/0", []string{
			"count -> 0xffffffffffffffff:0xffffffffffffffff",
			"best 0 -> ::/0",
			"take ffff::/16 -> true",
			"count -> 0xffff000000000000:0x0",
			"best 16 -> fffe::/16",
			"best 128 -> fffe::/128",
			"best 129 -> none",
			"isfree ffff::/16 -> false",
			"isfree ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128 -> false",
			"isfree fffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128 -> true",
			"blocks -> 16",
			"release ffff::/16 -> true",
			"count -> 0xffffffffffffffff:0xffffffffffffffff",
			"take ::/0 -> true",
			"count -> 0x0:0x0",
			"best 128 -> none",
			"release ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128 -> true",
			"count -> 0x0:0x1",
			"best 64 -> none",
			"best 128 -> ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128",
			"release ::/0 -> false",
		}},
		{"deepest v6 path", "::/0", []string{
			"take ::1/128 -> true",
			"blocks -> 128",
			"best 128 -> ::/128",
			"best 127 -> ::2/127",
			"best 65 -> ::8000:0:0:0/65",
			"best 64 -> 0:0:0:1::/64",
			"best 1 -> 8000::/1",
			"count -> 0xffffffffffffffff:0xffffffffffffffff",
			"take ::/128 -> true",
			"blocks -> 127",
			"release ::/127 -> true",
			"blocks -> 1",
		}},
		{"v6 across the 64-bit boundary", "2001:db8:0:ff00::/56", []string{
			"take 2001:db8:0:ff00:8000::/65 -> true",
			"best 64 -> 2001:db8:0:ff01::/64",
			"best 65 -> 2001:db8:0:ff00::/65",
			"take 2001:db8:0:ff00::/66 -> true",
			"best 65 -> 2001:db8:0:ff01::/65",
			"best 66 -> 2001:db8:0:ff00:4000::/66",
			"release 2001:db8:0:ff00::/64 -> false",
			"release 2001:db8:0:ff00:8000::/65 -> true",
			"best 65 -> 2001:db8:0:ff00:8000::/65",
			"best 64 -> 2001:db8:0:ff01::/64",
		}},
		{"bits out of range", "2001:db8::/32", []string{
			"best 31 -> none",
			"best 129 -> none",
			"best 128 -> 2001:db8::/128",
			"best 32 -> 2001:db8::/32",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { run(t, tt.root, tt.script) })
	}
}

func TestNewRejectsNonCanonicalRoot(t *testing.T) {
	for _, root := range []netip.Prefix{{}, pfx("10.0.0.1/8"), pfx("2001:db8::1/32")} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%v) did not panic", root)
				}
			}()
			New(root)
		}()
	}
}

func TestRoot(t *testing.T) {
	r := pfx("2001:db8::/32")
	if got := New(r).Root(); got != r {
		t.Fatalf("Root() = %v, want %v", got, r)
	}
}

func TestAscendStops(t *testing.T) {
	s := New(pfx("10.0.0.0/16"))
	s.Take(pfx("10.0.0.0/24"))
	var seen []netip.Prefix
	s.Ascend(func(p netip.Prefix) bool {
		seen = append(seen, p)
		return len(seen) < 3
	})
	if want := pfxs("10.0.1.0/24", "10.0.2.0/23", "10.0.4.0/22"); !slices.Equal(seen, want) {
		t.Fatalf("Ascend visited %v, want %v", seen, want)
	}
	if !s.Release(pfx("10.0.0.0/24")) || !s.Take(pfx("10.0.0.0/16")) {
		t.Fatal("could not fill the space")
	}
	s.Ascend(func(p netip.Prefix) bool { t.Fatalf("Ascend visited %v of a full space", p); return true })
}

// TestNodesRecycled checks that churn reuses nodes instead of growing.
func TestNodesRecycled(t *testing.T) {
	s := New(pfx("2001:db8::/32"))
	p := pfx("2001:db8:1234::/48")
	s.Take(p)
	s.Release(p)
	n, l := len(s.nodes), len(s.leaves)
	for range 100 {
		s.Take(p)
		s.Release(p)
	}
	if len(s.nodes) != n || len(s.leaves) != l {
		t.Fatalf("arenas grew from %d to %d nodes, %d to %d leaves", n, len(s.nodes), l, len(s.leaves))
	}
	s.check(t)
}
