package cmd_test

import (
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/nephio-project/ipam/service/server/servertest"
)

const module = "github.com/nephio-project/ipam"

// roles says of every shipped binary whether it is a client of the
// service, which must not link its core, or a server, which embeds it by
// design. TestClientsDoNotCarryTheCore fails for a binary not listed here.
var roles = map[string]string{
	"ipamctl":         "client",
	"ipam-fn":         "client",
	"ipam-injector":   "client",
	"ipam-controller": "client", // the controllers translate and call ipam-server; they embed no core
	"nv-ipam":         "client", // the CNI plugin calls ipam-node
	"ipam-server":     "server",
	"ipam-node":       "server", // NVIDIA's node daemon keeps its own pools
}

// serverOnly are the packages (and everything under them) that make up the
// server side: the allocation core and its internals, the stores and the
// gRPC server. Clients share only api/ (types, proto, translation, vocab),
// service/client and the package engine.
var serverOnly = []string{
	module + "/service/ipam",
	module + "/service/internal",
	module + "/service/store",
	module + "/service/server",
}

// allowed are client dependencies on server-only packages that cannot be
// cut, by binary, each with the reason: none today. An entry here is a
// decision, written down; do not add one to make the test pass.
var allowed = map[string][]string{}

func isServerOnly(p string) bool {
	return slices.ContainsFunc(serverOnly, func(s string) bool { return p == s || strings.HasPrefix(p, s+"/") })
}

// TestClientsDoNotCarryTheCore: no client binary links the allocation
// core, its internals, the stores or the server; the failure names the
// import chain that pulls one in.
func TestClientsDoNotCarryTheCore(t *testing.T) {
	root := servertest.ModuleRoot(t)
	for _, p := range mainPackages(t, root) {
		name := path.Base(p)
		t.Run(name, func(t *testing.T) {
			switch roles[name] {
			case "server":
				t.Skip("a server embeds the core by design")
			case "client":
			default:
				t.Fatalf("%s is neither a client nor a server: classify it in roles", name)
			}
			cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./"+p)
			cmd.Dir = root
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps ./%s: %v", p, err)
			}
			imports := map[string][]string{}
			for line := range strings.Lines(string(out)) {
				f := strings.Fields(line)
				imports[f[0]] = f[1:]
			}
			for _, chain := range offending(module+"/"+p, imports) {
				if !slices.Contains(allowed[name], chain[len(chain)-1]) {
					t.Errorf("%s links the server-only %s: %s", name, chain[len(chain)-1], strings.Join(chain, " -> "))
				}
			}
		})
	}
}

// offending returns, for every server-only package reachable from root in
// the import graph, the shortest import chain from root to it. The search
// does not go through a server-only package, so each chain names the
// first one on its way.
func offending(root string, imports map[string][]string) [][]string {
	from := map[string]string{root: ""}
	queue := []string{root}
	var chains [][]string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if isServerOnly(p) {
			var chain []string
			for q := p; q != ""; q = from[q] {
				chain = append(chain, strings.TrimPrefix(q, module+"/"))
			}
			slices.Reverse(chain)
			chains = append(chains, chain)
			continue
		}
		for _, q := range imports[p] {
			if _, seen := from[q]; !seen {
				from[q] = p
				queue = append(queue, q)
			}
		}
	}
	return chains
}
