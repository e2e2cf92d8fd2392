package functions_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

// w7Allocations is the size of the W7 package.
const w7Allocations = 1000

// BenchmarkW7RenderRatio measures `kpt fn render` of a package with 1,000
// IPAllocations through ipam-fn against a real ipam-server, and the same
// render through a no-op exec function, and reports their ratio (target
// ≤ 2). Each iteration renders a fresh copy under a fresh owner, so every
// render allocates 1,000 addresses; the owner's allocations are released
// afterwards so the server's state does not grow.
func BenchmarkW7RenderRatio(b *testing.B) {
	bins := binaries(b)
	kptPath(b)
	addr := startServer(b)
	parent := b.TempDir()

	infra := writePackage(b, parent, "w7-infra", filepath.Join(bins, "ipam-fn"), map[string]string{"server": addr},
		map[string]string{"resources.yaml": `apiVersion: ipam.nephio.org/v1alpha1
kind: NetworkInstance
metadata:
  name: vpc-w7
spec:
  prefixes:
  - prefix: 10.0.0.0/8
---
apiVersion: ipam.nephio.org/v1alpha1
kind: IPPrefix
metadata:
  name: w7-net
  labels:
    nephio.org/gateway: "true"
spec:
  prefix: 10.16.0.1/12
  network: w7-net
  networkInstance: vpc-w7
`})
	if out, ok := render(b, infra, b.TempDir()); !ok {
		b.Fatalf("infra render failed:\n%s", out)
	}

	var resources strings.Builder
	for i := range w7Allocations {
		if i > 0 {
			resources.WriteString("---\n")
		}
		fmt.Fprintf(&resources, "# interface %d of the workload\n", i)
		resources.WriteString(allocation(fmt.Sprintf("w7-alloc-%04d", i), "vpc-w7", "w7-net"))
	}

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := ipamv1.NewIPAMClient(conn)

	var ipamTime, noopTime time.Duration
	n := 0
	for b.Loop() {
		n++
		owner := fmt.Sprintf("w7-%d", n)
		iter := filepath.Join(parent, owner)
		files := map[string]string{"resources.yaml": resources.String()}

		noop := writePackage(b, iter, "noop", filepath.Join(bins, "noop"), map[string]string{"server": addr, "owner": owner}, files)
		pkg := writePackage(b, iter, "ipam", filepath.Join(bins, "ipam-fn"), map[string]string{"server": addr, "owner": owner}, files)
		// Alternate which render goes first so neither gets a warmer cache.
		renders := []struct {
			dir   string
			total *time.Duration
		}{{noop, &noopTime}, {pkg, &ipamTime}}
		if n%2 == 0 {
			renders[0], renders[1] = renders[1], renders[0]
		}
		for _, r := range renders {
			start := time.Now()
			out, ok := render(b, r.dir, b.TempDir())
			*r.total += time.Since(start)
			if !ok {
				b.Fatalf("render of %s failed:\n%s", r.dir, out)
			}
		}
		if n == 1 {
			got, err := os.ReadFile(filepath.Join(pkg, "resources.yaml"))
			if err != nil {
				b.Fatal(err)
			}
			if c := strings.Count(string(got), "\n  prefix: 10.16."); c != w7Allocations {
				b.Fatalf("%d of %d allocations got an address", c, w7Allocations)
			}
		}
		// Release the owner's allocations: an empty desired set, pruned.
		if _, err := client.Sync(context.Background(), &ipamv1.SyncRequest{Owner: owner, Prune: true}); err != nil {
			b.Fatal(err)
		}
		if err := os.RemoveAll(iter); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(ipamTime)/float64(noopTime), "ratio")
	b.ReportMetric(float64(ipamTime.Milliseconds())/float64(n), "ipam-ms/render")
	b.ReportMetric(float64(noopTime.Milliseconds())/float64(n), "noop-ms/render")
}
