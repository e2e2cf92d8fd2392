// Command ipam-fn is the KRM function that allocates the addresses and
// prefixes a kpt package asks for from ipam-server and writes them into
// the package. Run it with kpt fn render (exec or container mode); see
// package ipamfn for what it does. ipam-fn --version prints its version,
// the tag of its image, which --doc names too.
package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/kptdev/krm-functions-sdk/go/fn"

	"github.com/nephio-project/ipam/functions/ipamfn"
)

func main() {
	version := ipamfn.BuildVersion()
	if slices.Contains(os.Args[1:], "--version") {
		fmt.Println("ipam-fn", version)
		return
	}
	metadata, err := ipamfn.CatalogMetadata(version)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ipam-fn: warning:", err)
		metadata = ipamfn.Metadata
	}
	if err := fn.AsMain(ipamfn.Function{}, fn.WithDocs(ipamfn.README, metadata)); err != nil {
		os.Exit(1)
	}
}
