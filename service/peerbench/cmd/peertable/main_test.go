package main

import (
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	in := "goos: linux\n" +
		"BenchmarkNextFree/fill=50/ours-2   \t 2000\t 3180 ns/op\t 1408 B/op\t 10 allocs/op\n" +
		"BenchmarkNextFree/fill=50/go-ipam-2\t 2000\t 6360000 ns/op\n" +
		"BenchmarkNextFree/fill=50/netipx-2 \t 2000\t 31800 ns/op\n" +
		"BenchmarkNextFree/fill=50/ours-core-2\t 2000\t 31.8 ns/op\n" +
		"BenchmarkNextFree/fill=0/ours-2    \t 2000\t 500 ns/op\n" +
		"BenchmarkRestart/allocs=10k/ours-2 \t 100\t 10712016 ns/op\t 49.79 heap-B/alloc\t 4160135 B/op\n" +
		"BenchmarkRestart/allocs=10k/go-ipam-2\t 100\t 13268532 ns/op\t 59.73 heap-B/alloc\n" +
		"PASS\n"
	res, err := parse(strings.NewReader(in))
	if err != nil || len(res) != 9 || res[1] != (Result{"NextFree fill=50", "go-ipam", 6360000}) {
		t.Fatalf("parse: %+v, %v", res, err)
	}
	var b strings.Builder
	if err := table(&b, res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"go-ipam", "netipx", "6.4 ms", "31.8 µs", "2000.0×", "NextFree fill=0",
		"Restart allocs=10k heap", "50 B/alloc", "60 B/alloc", "1.2×", "31.8 ns", "1000.0×",
		"ours vs fastest IPAM", "ours-core vs fastest structure"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if err := table(&b, []Result{{"NextFree fill=0", "mystery", 1}}); err == nil || !strings.Contains(err.Error(), `"mystery"`) {
		t.Errorf("an unknown implementation: %v", err)
	}
}
