// Command peertable reads the output of `go test -bench` in package
// peerbench and prints one row per workload: the time per operation of
// this project and of each peer, and how many times faster this project is
// than the fastest peer of each kind. There are two kinds: the IPAMs,
// whose calls the allocation core's API ("ours") answers, and the bare
// data structures, which the core's own structures ("ours-core") answer.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Result is one measurement of a benchmark line: workload/impl and its
// value, ns/op or, for the row "<workload> heap", the heap-B/alloc metric.
type Result struct {
	Workload, Impl string
	Value          float64
}

// heapSuffix names the row of a workload's heap-B/alloc metric.
const heapSuffix = " heap"

// parse reads the benchmark lines of out. A benchmark is named
// Benchmark<Workload>/<params>/<impl>[-procs]; a heap-B/alloc metric on
// its line becomes a row of its own.
func parse(r io.Reader) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || f[3] != "ns/op" {
			continue
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndexByte(name, '-'); i > strings.LastIndexByte(name, '/') {
			name = name[:i] // the GOMAXPROCS suffix
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			continue
		}
		ns, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f[0], err)
		}
		wl, impl := strings.ReplaceAll(name[:i], "/", " "), name[i+1:]
		out = append(out, Result{Workload: wl, Impl: impl, Value: ns})
		for j := 4; j+1 < len(f); j += 2 {
			if f[j+1] != "heap-B/alloc" {
				continue
			}
			v, err := strconv.ParseFloat(f[j], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f[0], err)
			}
			out = append(out, Result{Workload: wl + heapSuffix, Impl: impl, Value: v})
		}
	}
	return out, sc.Err()
}

// A group is one of this project's implementations and the peers it is
// compared with: those that do the same work.
type group struct {
	ours  string   // the implementation of this project
	peers []string // its peers, in column order
	ratio string   // the heading of the speed-up column
}

// groups are the columns of the table, in order.
var groups = []group{
	{"ours", []string{"go-ipam", "nephio-rib"}, "ours vs fastest IPAM"},
	{"ours-core", []string{"netipx", "k8s-bitmap"}, "ours-core vs fastest structure"},
}

// table writes the rows: workload, then for each group its implementation,
// its peers and the speed-up over the fastest of them. A result of an
// implementation no group names is an error.
func table(w io.Writer, results []Result) error {
	var workloads []string
	by := map[[2]string]float64{}
	for _, r := range results {
		known := false
		for _, g := range groups {
			known = known || r.Impl == g.ours || slices.Contains(g.peers, r.Impl)
		}
		if !known {
			return fmt.Errorf("%s: unknown implementation %q", r.Workload, r.Impl)
		}
		if !slices.Contains(workloads, r.Workload) {
			workloads = append(workloads, r.Workload)
		}
		by[[2]string{r.Workload, r.Impl}] = r.Value
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := []string{"workload"}
	for _, g := range groups {
		head = append(append(append(head, g.ours), g.peers...), g.ratio)
	}
	fmt.Fprintf(tw, "%s\t\n", strings.Join(head, "\t"))
	for _, wl := range workloads {
		unit := cell
		if strings.HasSuffix(wl, heapSuffix) {
			unit = bytesPerAlloc
		}
		row := []string{wl}
		for _, g := range groups {
			ours, ok := by[[2]string{wl, g.ours}]
			row = append(row, unit(ours, ok))
			best := 0.0
			for _, p := range g.peers {
				v, ok := by[[2]string{wl, p}]
				row = append(row, unit(v, ok))
				if ok && (best == 0 || v < best) {
					best = v
				}
			}
			ratio := "-"
			if ok && best > 0 && ours > 0 {
				ratio = fmt.Sprintf("%.1f×", best/ours)
			}
			row = append(row, ratio)
		}
		fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// bytesPerAlloc writes a heap-B/alloc value.
func bytesPerAlloc(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.0f B/alloc", v)
}

// cell writes a time per operation.
func cell(ns float64, ok bool) string {
	if !ok {
		return "-"
	}
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.1f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	case ns < 100:
		return fmt.Sprintf("%.1f ns", ns)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

func main() {
	results, err := parse(os.Stdin)
	if err == nil && len(results) == 0 {
		err = fmt.Errorf("no benchmark results on stdin")
	}
	if err == nil {
		err = table(os.Stdout, results)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peertable:", err)
		os.Exit(1)
	}
}
