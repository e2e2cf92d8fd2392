// Command ipam-fn is the KRM function that allocates the addresses and
// prefixes a kpt package asks for from ipam-server and writes them into
// the package. Run it with kpt fn render (exec or container mode); see
// package ipamfn for what it does.
package main

import (
	"os"

	"github.com/kptdev/krm-functions-sdk/go/fn"

	"github.com/nephio-project/ipam/functions/ipamfn"
)

func main() {
	if err := fn.AsMain(ipamfn.Function{}, fn.WithDocs(ipamfn.README, ipamfn.Metadata)); err != nil {
		os.Exit(1)
	}
}
