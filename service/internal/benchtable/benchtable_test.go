package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sample is `go test -run '^$' -bench . -benchmem ./...` output over two
// packages, with a sub-benchmark, custom metrics, a benchmark that prints to
// stdout (its numbers arrive on a later line) and a failed benchmark.
const sample = "goos: linux\n" +
	"goarch: amd64\n" +
	"pkg: github.com/nephio-project/ipam/service/ipam\n" +
	"cpu: AMD EPYC\n" +
	"BenchmarkW1Fill-2              \t24000000\t        45.31 ns/op\t       0 B/op\t       0 allocs/op\n" +
	"BenchmarkW1Churn-2             \t 9000000\t       131.2 ns/op\t      16 B/op\t       1 allocs/op\n" +
	"BenchmarkW2BestFit/children=65000-2         \t    1000\t       812.5 ns/op\t       0 B/op\t       0 allocs/op\n" +
	"BenchmarkW4SyncAddrsPerSec-2                \t      10\t 123456789 ns/op\t   1.234e+06 addrs/s\t   80 B/op\t       1 allocs/op\n" +
	"BenchmarkAllocateRelease-2     \t 2000000\t       612.0 ns/op\t     128 B/op\t       3 allocs/op\n" +
	"PASS\n" +
	"ok  \tgithub.com/nephio-project/ipam/service/ipam\t12.345s\n" +
	"restoring 1000000 allocations\n" +
	"goos: linux\n" +
	"goarch: amd64\n" +
	"pkg: github.com/nephio-project/ipam/service/store/file\n" +
	"cpu: AMD EPYC\n" +
	"BenchmarkW6RestartSeconds-2   \trestoring 1000000 allocations\n" +
	"restoring 1000000 allocations\n" +
	"       1\t 912345678 ns/op\t         0.9123 s\t  1024 B/op\t      12 allocs/op\n" +
	"BenchmarkW5DurableAllocsPerSec-2   \t     100\t     91234 ns/op\t      8123 allocs/s\t     512 B/op\t       4 allocs/op\n" +
	"--- SKIP: BenchmarkW9Fleet\n" +
	"    W9 runs the real Porch and bin/porch/porch is missing: run make porch-env to build it\n" +
	"--- FAIL: BenchmarkW6HeapBytesPerAlloc\n" +
	"    bench_test.go:80: boom\n" +
	"FAIL\n" +
	"exit status 1\n" +
	"FAIL\tgithub.com/nephio-project/ipam/service/store/file\t3.210s\n" +
	"FAIL\n"

func TestParse(t *testing.T) {
	const ipamPkg = "github.com/nephio-project/ipam/service/ipam"
	const filePkg = "github.com/nephio-project/ipam/service/store/file"
	for _, tc := range []struct {
		name     string
		in       string
		want     []Result
		failures []string
		skipped  map[string]string
	}{
		{
			name: "empty",
			in:   "",
		},
		{
			name: "no benchmarks",
			in:   "?   \tgithub.com/nephio-project/ipam/api/ipam/v1alpha1\t[no test files]\nPASS\n",
		},
		{
			name: "without benchmem",
			in:   "BenchmarkW3Select-2   \t 1000000\t      1043 ns/op\n",
			want: []Result{{Name: "BenchmarkW3Select-2", Iterations: 1000000, Metrics: []Metric{{1043, "ns/op"}}}},
		},
		{
			name: "without CPU suffix (GOMAXPROCS=1) and with MB/s",
			in:   "BenchmarkDecode\t  500000\t      2400 ns/op\t 426.67 MB/s\t       0 B/op\t       0 allocs/op\n",
			want: []Result{{Name: "BenchmarkDecode", Iterations: 500000, Metrics: []Metric{{2400, "ns/op"}, {426.67, "MB/s"}, {0, "B/op"}, {0, "allocs/op"}}}},
		},
		{
			name: "words that merely start with Benchmark are not results",
			in:   "Benchmarking 10 runs\nBenchmarks 3 ns/op\n",
		},
		{
			name: "malformed numbers are skipped",
			in:   "BenchmarkX-2 \t 10 \t abc ns/op\nBenchmarkY-2 \t 10 \t 5 ns/op \t 7\n",
		},
		{
			name: "two packages, sub-benchmarks, custom metrics, split lines, failures",
			in:   sample,
			want: []Result{
				{ipamPkg, "BenchmarkW1Fill-2", 24000000, []Metric{{45.31, "ns/op"}, {0, "B/op"}, {0, "allocs/op"}}},
				{ipamPkg, "BenchmarkW1Churn-2", 9000000, []Metric{{131.2, "ns/op"}, {16, "B/op"}, {1, "allocs/op"}}},
				{ipamPkg, "BenchmarkW2BestFit/children=65000-2", 1000, []Metric{{812.5, "ns/op"}, {0, "B/op"}, {0, "allocs/op"}}},
				{ipamPkg, "BenchmarkW4SyncAddrsPerSec-2", 10, []Metric{{123456789, "ns/op"}, {1.234e6, "addrs/s"}, {80, "B/op"}, {1, "allocs/op"}}},
				{ipamPkg, "BenchmarkAllocateRelease-2", 2000000, []Metric{{612, "ns/op"}, {128, "B/op"}, {3, "allocs/op"}}},
				{filePkg, "BenchmarkW6RestartSeconds-2", 1, []Metric{{912345678, "ns/op"}, {0.9123, "s"}, {1024, "B/op"}, {12, "allocs/op"}}},
				{filePkg, "BenchmarkW5DurableAllocsPerSec-2", 100, []Metric{{91234, "ns/op"}, {8123, "allocs/s"}, {512, "B/op"}, {4, "allocs/op"}}},
			},
			failures: []string{
				"--- FAIL: BenchmarkW6HeapBytesPerAlloc",
				"FAIL\tgithub.com/nephio-project/ipam/service/store/file\t3.210s",
			},
			skipped: map[string]string{"BenchmarkW9Fleet": "W9 runs the real Porch and bin/porch/porch is missing: run make porch-env to build it"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tc.in))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.Results)
			assert.Equal(t, tc.failures, got.Failures)
			assert.Equal(t, tc.skipped, got.Skipped)
		})
	}
}

func TestRows(t *testing.T) {
	ts := []Target{
		{ID: "W1", Match: "W1Fill", Unit: "ns/op", Cmp: AtMost, Value: 50},
		{ID: "W1", Match: "W1Fill", Unit: "allocs/op", Cmp: Equal, Value: 0},
		{ID: "W4", Match: "W4Ratio", Unit: "ratio", Cmp: AtLeast, Value: 0.9},
		{ID: "W2", Match: "W2BestFit", Unit: "ns/op", Cmp: AtMost, Value: 1000},
		{ID: "W9", Match: "W9Fleet", Unit: "ratio", Cmp: AtLeast, Value: 0.8},
	}
	results := []Result{
		{Name: "BenchmarkW1Fill/size=16-2", Metrics: []Metric{{45.31, "ns/op"}, {0, "B/op"}, {1, "allocs/op"}}},
		{Name: "BenchmarkW4Ratio-2", Metrics: []Metric{{1000, "ns/op"}, {0.93, "ratio"}}},
		{Name: "BenchmarkW4Ratio/empty-2", Metrics: []Metric{{900, "ns/op"}}},
		{Name: "BenchmarkOther-2", Metrics: []Metric{{12.5, "ns/op"}}},
	}
	want := []Row{
		{"W1", "BenchmarkW1Fill/size=16-2", "45.3 ns/op", "<= 50 ns/op", "PASS"},
		{"W1", "BenchmarkW1Fill/size=16-2", "1 allocs/op", "== 0 allocs/op", "MISS"},
		{"W4", "BenchmarkW4Ratio-2", "0.93 ratio", ">= 0.9 ratio", "PASS"},
		{"W4", "BenchmarkW4Ratio/empty-2", "not reported", ">= 0.9 ratio", "MISS"},
		{"-", "BenchmarkOther-2", "12.5 ns/op", "-", "-"},
		{"W2", "*W2BestFit*", "not run", "<= 1000 ns/op", "MISS"},
		{"W9", "BenchmarkW9Fleet", "skipped", ">= 0.8 ratio", "SKIP"},
	}
	assert.Equal(t, want, Rows(results, ts, map[string]string{"BenchmarkW9Fleet": "Porch is not built"}))
}

func TestCmpBoundaries(t *testing.T) {
	for _, tc := range []struct {
		cmp              Cmp
		measured, target float64
		want             bool
	}{
		{AtMost, 50, 50, true},
		{AtMost, 50.01, 50, false},
		{AtLeast, 0.9, 0.9, true},
		{AtLeast, 0.89, 0.9, false},
		{Equal, 0, 0, true},
		{Equal, 1, 0, false},
	} {
		assert.Equal(t, tc.want, tc.cmp.holds(tc.measured, tc.target), "%v %s %v", tc.measured, tc.cmp, tc.target)
	}
}

func TestFormatValue(t *testing.T) {
	for in, want := range map[float64]string{
		0: "0", 45.31: "45.3", 131.25: "131.2", 1000: "1000", 1.234e6: "1234000",
		0.9123: "0.912", 1e6: "1000000", 1234.5: "1234", 0.00012: "0.00012",
	} {
		assert.Equal(t, want, formatValue(in), "%v", in)
	}
}

func TestTargets(t *testing.T) {
	ids := map[string]bool{}
	for _, tg := range targets {
		ids[tg.ID] = true
		assert.NotEmpty(t, tg.Match)
		assert.NotEmpty(t, tg.Unit)
		assert.True(t, strings.HasPrefix(tg.Match, tg.ID), "%s should start with its id %s", tg.Match, tg.ID)
	}
	for _, id := range []string{"W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9"} {
		assert.True(t, ids[id], "no target for %s", id)
	}
}

func TestRun(t *testing.T) {
	var out, errOut bytes.Buffer
	require.NoError(t, Run(strings.NewReader(sample), &out, &errOut))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	assert.Equal(t, []string{"ID", "BENCHMARK", "MEASURED", "TARGET", "RESULT"}, strings.Fields(lines[0]))
	// Compare rows field by field, whatever the column padding.
	var norm []string
	for _, l := range lines {
		norm = append(norm, strings.Join(strings.Fields(l), " "))
	}
	table := strings.Join(norm, "\n")
	for _, want := range [][]string{
		{"W1", "BenchmarkW1Fill-2", "45.3", "ns/op", "<=", "50", "ns/op", "PASS"},
		{"W1", "BenchmarkW1Churn-2", "1", "allocs/op", "==", "0", "allocs/op", "MISS"},
		{"W2", "BenchmarkW2BestFit/children=65000-2", "812.5", "ns/op", "<=", "1000", "ns/op", "PASS"},
		{"W4", "BenchmarkW4SyncAddrsPerSec-2", "1234000", "addrs/s", ">=", "1000000", "addrs/s", "PASS"},
		{"W5", "BenchmarkW5DurableAllocsPerSec-2", "8123", "allocs/s", ">=", "10000", "allocs/s", "MISS"},
		{"W6", "BenchmarkW6RestartSeconds-2", "0.912", "s", "<=", "1", "s", "PASS"},
		{"W6", "*W6HeapBytesPerAlloc*", "not", "run", "<=", "64", "B/alloc", "MISS"},
		{"-", "BenchmarkAllocateRelease-2", "612", "ns/op", "-", "-"},
	} {
		assert.Contains(t, table, strings.Join(want, " "), "table lacks a row\n%s", table)
	}
	assert.Equal(t, "5 PASS, 16 MISS, 4 SKIP", norm[len(norm)-1]) // W8's two, E1's five and N1's two targets are not in the sample, W9 is skipped
	assert.Contains(t, errOut.String(), "--- FAIL: BenchmarkW6HeapBytesPerAlloc")
	assert.Contains(t, errOut.String(), "BenchmarkW9Fleet was skipped: W9 runs the real Porch")

	err := Run(strings.NewReader("PASS\n"), &out, &errOut)
	assert.ErrorContains(t, err, "no benchmark results")
}
