// Command clusterctlrelease writes the release artifacts of the Cluster API
// IPAM provider, as clusterctl reads them, from the kpt blueprint (the one
// source of the manifests):
//
//	go run ./service/internal/clusterctlrelease --blueprint blueprints/ipam \
//	    --out bin/release --version v0.1.0 --tag v0.1.0
//
// It writes OUT/ipam-<provider>/<version>/ipam-components.yaml and
// metadata.yaml (a clusterctl local repository) and OUT/clusterctl.yaml, a
// clusterctl configuration whose provider entry points at that repository.
// `make release-artifacts` runs it.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	if err := Run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "clusterctlrelease:", err)
		os.Exit(1)
	}
}

// Run parses the command line args and writes the artifacts, saying on out
// what it wrote.
func Run(args []string, out, errOut io.Writer) error {
	opts, err := parseFlags(args, errOut)
	if err != nil {
		return err
	}
	files, err := Build(opts)
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintln(out, "clusterctlrelease: wrote", f)
	}
	return nil
}
