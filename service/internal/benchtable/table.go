package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Cmp is how a measured value is compared with a target value.
type Cmp int

const (
	// AtMost passes when measured <= target.
	AtMost Cmp = iota
	// AtLeast passes when measured >= target.
	AtLeast
	// Equal passes when measured == target.
	Equal
)

// String returns the comparison as an operator.
func (c Cmp) String() string {
	switch c {
	case AtMost:
		return "<="
	case AtLeast:
		return ">="
	default:
		return "=="
	}
}

func (c Cmp) holds(measured, target float64) bool {
	switch c {
	case AtMost:
		return measured <= target
	case AtLeast:
		return measured >= target
	default:
		return measured == target
	}
}

// Target is a performance target for the benchmarks whose name contains Match.
type Target struct {
	// ID is the workload id of the performance targets, e.g. W1.
	ID string
	// Match is a substring of the benchmark names the target applies to.
	Match string
	// Unit is the unit of the metric, as printed by go test, e.g. ns/op.
	Unit string
	// Cmp is how the measured value must compare with Value.
	Cmp Cmp
	// Value is the target value.
	Value float64
}

// String returns the target as it is printed, e.g. "<= 50 ns/op".
func (t Target) String() string {
	return fmt.Sprintf("%s %s %s", t.Cmp, formatValue(t.Value), t.Unit)
}

// Row is one line of the table.
type Row struct {
	ID        string
	Benchmark string
	Measured  string
	Target    string
	// Result is PASS, MISS, SKIP (the benchmark was skipped), or "-" for
	// a benchmark without a target.
	Result string
}

// Rows evaluates results against targets: one row per (result, target) pair
// that applies, one row with target "-" per result no target applies to, and
// per target that no result applies to one SKIP row when a skipped
// benchmark's name contains its Match, one MISS row otherwise.
func Rows(results []Result, targets []Target, skipped map[string]string) []Row {
	var rows []Row
	used := make([]bool, len(targets))
	for _, r := range results {
		matched := false
		for i, t := range targets {
			if !strings.Contains(r.Name, t.Match) {
				continue
			}
			matched, used[i] = true, true
			row := Row{ID: t.ID, Benchmark: r.Name, Measured: "not reported", Target: t.String(), Result: "MISS"}
			if v, ok := r.Metric(t.Unit); ok {
				row.Measured = formatValue(v) + " " + t.Unit
				if t.Cmp.holds(v, t.Value) {
					row.Result = "PASS"
				}
			}
			rows = append(rows, row)
		}
		if !matched {
			measured := "-"
			if len(r.Metrics) > 0 {
				measured = formatValue(r.Metrics[0].Value) + " " + r.Metrics[0].Unit
			}
			rows = append(rows, Row{ID: "-", Benchmark: r.Name, Measured: measured, Target: "-", Result: "-"})
		}
	}
	for i, t := range targets {
		if used[i] {
			continue
		}
		row := Row{ID: t.ID, Benchmark: "*" + t.Match + "*", Measured: "not run", Target: t.String(), Result: "MISS"}
		for name := range skipped {
			if strings.Contains(name, t.Match) {
				row.Benchmark, row.Measured, row.Result = name, "skipped", "SKIP"
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// Write prints rows as an aligned table followed by a one-line summary.
func Write(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tBENCHMARK\tMEASURED\tTARGET\tRESULT")
	pass, miss, skip := 0, 0, 0
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Benchmark, r.Measured, r.Target, r.Result)
		switch r.Result {
		case "PASS":
			pass++
		case "MISS":
			miss++
		case "SKIP":
			skip++
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	summary := fmt.Sprintf("\n%d PASS, %d MISS", pass, miss)
	if skip > 0 {
		summary += fmt.Sprintf(", %d SKIP", skip)
	}
	_, err := fmt.Fprintln(w, summary)
	return err
}

// formatValue prints v with a precision that suits its magnitude.
func formatValue(v float64) string {
	a := math.Abs(v)
	switch {
	case v == math.Trunc(v) && a < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}
