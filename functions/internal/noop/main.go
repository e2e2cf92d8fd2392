// Command noop is a KRM function that returns its input unchanged. The
// render benchmark uses it as the baseline cost of running an exec function
// under kpt fn render.
package main

import (
	"os"

	"github.com/kptdev/krm-functions-sdk/go/fn"
)

func main() {
	if err := fn.AsMain(fn.ResourceListProcessorFunc(func(*fn.ResourceList) (bool, error) { return true, nil })); err != nil {
		os.Exit(1)
	}
}
