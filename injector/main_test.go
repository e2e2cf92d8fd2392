package injector

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// TestMain gives controller-runtime's global logger a sink: the tests'
// own clients (watches of PackageRevisions) log through it, and without
// one controller-runtime prints a warning with a stack trace instead. The
// injectors the tests start log through Config.Logger.
func TestMain(m *testing.M) {
	log.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
