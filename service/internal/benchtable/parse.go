package main

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// Metric is one measured value of a benchmark, e.g. 45.3 ns/op.
type Metric struct {
	Value float64
	Unit  string
}

// Result is one benchmark result line of `go test -bench` output.
type Result struct {
	// Pkg is the import path from the preceding "pkg:" line, if any.
	Pkg string
	// Name is the benchmark name as printed, with sub-benchmark path and
	// GOMAXPROCS suffix, e.g. BenchmarkW1Fill/size=16-2.
	Name string
	// Iterations is the number of iterations the benchmark ran.
	Iterations int64
	// Metrics are the value/unit pairs in the order printed.
	Metrics []Metric
}

// Metric returns the value reported in unit and whether it was reported.
func (r Result) Metric(unit string) (float64, bool) {
	for _, m := range r.Metrics {
		if m.Unit == unit {
			return m.Value, true
		}
	}
	return 0, false
}

// Output is what Parse found in a `go test -bench` run.
type Output struct {
	// Results are the benchmark results in input order.
	Results []Result
	// Failures are the lines reporting a failed benchmark or package.
	Failures []string
	// Skipped are the benchmarks reported skipped ("--- SKIP: BenchmarkX",
	// which go test prints with -v and a benchmark may print itself), by
	// name, with the reason (the line after, if indented) or "".
	Skipped map[string]string
}

// Parse reads `go test -bench [-benchmem]` output. Lines that are not
// benchmark results are ignored, except "pkg:" lines, which set the package
// of the results that follow, and failure lines, which are collected. When
// a benchmark prints to stdout, go test writes its name, then that output,
// then its numbers on a line of their own; such a result is joined back
// together.
func Parse(r io.Reader) (Output, error) {
	var (
		out     Output
		pkg     string
		pending string // a benchmark name whose numbers have not come yet
		skipped string // the benchmark of the last SKIP line, while its reason may follow
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg, pending = strings.TrimSpace(p), ""
			continue
		}
		if i := strings.Index(line, "--- SKIP: Benchmark"); i >= 0 {
			if f := strings.Fields(line[i+len("--- SKIP: "):]); len(f) > 0 {
				if out.Skipped == nil {
					out.Skipped = map[string]string{}
				}
				skipped, out.Skipped[f[0]] = f[0], ""
			}
			pending = ""
			continue
		}
		if skipped != "" && strings.HasPrefix(line, "    ") {
			if out.Skipped[skipped] == "" {
				out.Skipped[skipped] = strings.TrimSpace(line)
			}
			continue
		}
		skipped = ""
		if i := strings.Index(line, "--- FAIL: Benchmark"); i >= 0 {
			out.Failures = append(out.Failures, strings.TrimSpace(line[i:]))
			pending = ""
			continue
		}
		if strings.HasPrefix(line, "FAIL\t") {
			out.Failures = append(out.Failures, strings.TrimSpace(line))
			continue
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		name := pending
		if isBenchmarkName(fields[0]) {
			name, fields = fields[0], fields[1:]
		}
		if name == "" {
			continue
		}
		res, ok := parseNumbers(fields)
		if !ok {
			if name != pending {
				// The name line was followed by the benchmark's own
				// output; its numbers come on a later line.
				pending = name
			}
			continue
		}
		res.Pkg, res.Name = pkg, name
		out.Results = append(out.Results, res)
		pending = ""
	}
	return out, sc.Err()
}

// isBenchmarkName reports whether s is a benchmark name: "Benchmark" followed
// by nothing or by a character that is not a lower-case letter, as `go test`
// requires of benchmark functions.
func isBenchmarkName(s string) bool {
	rest, ok := strings.CutPrefix(s, "Benchmark")
	return ok && (rest == "" || !('a' <= rest[0] && rest[0] <= 'z'))
}

// parseNumbers parses "iterations value unit [value unit]...".
func parseNumbers(fields []string) (Result, bool) {
	if len(fields) < 3 || len(fields)%2 != 1 {
		return Result{}, false
	}
	n, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil {
		return Result{}, false
	}
	res := Result{Iterations: n}
	for i := 1; i < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return Result{}, false
		}
		res.Metrics = append(res.Metrics, Metric{Value: v, Unit: fields[i+1]})
	}
	return res, true
}
