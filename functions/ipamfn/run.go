package ipamfn

import (
	"context"
	"fmt"
	"os"

	"github.com/kptdev/krm-functions-sdk/go/fn"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/functions/engine"
)

// Function is the ipam-fn KRM function as an fn.ResourceListProcessor: it
// reads its Config from the ResourceList's functionConfig, connects to
// ipam-server only when the package has IPAM resources, and runs
// engine.Process.
type Function struct {
	// Getenv reads the environment (for IPAM_SERVER); nil means os.Getenv.
	Getenv func(string) string
}

var _ fn.ResourceListProcessor = Function{}

// Process runs the function over rl: it fills in the status of rl's items
// and appends its results to rl.Results. It returns false, with an error
// that wraps ErrFailed, when any result is an error; then no item changed.
func (f Function) Process(rl *fn.ResourceList) (bool, error) {
	getenv := f.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg, err := ParseConfig(rl.FunctionConfig, getenv)
	if err != nil {
		return f.fail(rl, fn.Results{{Severity: fn.Error, Message: err.Error()}})
	}
	if !engine.HasIPAMObjects(rl.Items) {
		return true, nil
	}
	conn, err := Dial(cfg)
	if err != nil {
		return f.fail(rl, fn.Results{{Severity: fn.Error, Message: err.Error()}})
	}
	defer func() { _ = conn.Close() }()
	_, results, err := engine.Process(context.Background(), ipamv1.NewIPAMClient(conn), cfg.Options(), &rl.Items)
	rl.Results = append(rl.Results, results...)
	if err != nil {
		return false, err
	}
	return true, nil
}

func (f Function) fail(rl *fn.ResourceList, results fn.Results) (bool, error) {
	rl.Results = append(rl.Results, results...)
	return false, fmt.Errorf("%w: %s", engine.ErrFailed, results[0].Message)
}
