// Command benchtable reads `go test -bench -benchmem` output on stdin and
// prints each benchmark against the project's performance targets:
//
//	go test -run '^$' -bench . -benchmem ./... > bin/bench.txt
//	go run ./service/internal/benchtable < bin/bench.txt
//
// Misses are reported, not fatal: timings are machine-dependent.
package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
)

func main() {
	if err := Run(os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

// Run parses benchmark output from in and writes the target table to out;
// failed benchmarks are named on errOut.
func Run(in io.Reader, out, errOut io.Writer) error {
	parsed, err := Parse(in)
	if err != nil {
		return err
	}
	for _, f := range parsed.Failures {
		fmt.Fprintln(errOut, "benchtable: failure in input:", f)
	}
	for _, name := range slices.Sorted(maps.Keys(parsed.Skipped)) {
		fmt.Fprintf(errOut, "benchtable: %s was skipped: %s\n", name, parsed.Skipped[name])
	}
	if len(parsed.Results) == 0 {
		return errors.New("no benchmark results in input")
	}
	return Write(out, Rows(parsed.Results, targets, parsed.Skipped))
}
