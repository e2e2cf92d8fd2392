package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

// TestTruncatedLogRefusesToStart: ipam-server, as a process, acknowledges
// allocations; its log files are then deleted. It refuses to start,
// naming the lost batches and --recover-truncated; with the flag it
// starts, logs the lost range, and the next start is clean.
func TestTruncatedLogRefusesToStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs ipam-server")
	}
	dir := t.TempDir()
	p := runServer(t, "--data-dir", dir, "--demo")
	ctx := context.Background()
	for _, name := range []string{"a1", "a2", "a3"} {
		if _, err := p.client.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{Key: key(name), NetworkInstance: "vpc-1",
			Selector: map[string]string{"nephio.org/network-name": "net1"}}}); err != nil {
			t.Fatal(err)
		}
	}
	p.stop(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	snaps, _ := filepath.Glob(filepath.Join(dir, "*.snap"))
	if len(files) == 0 {
		t.Fatal("no segment in the data directory")
	}
	for _, f := range append(files, snaps...) {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}

	p = runServer(t, "--data-dir", dir)
	if p.client != nil || p.cmd.ProcessState.Success() {
		t.Fatalf("ipam-server started on a log without its acknowledged batches:\n%s", p.output())
	}
	if out := p.output(); !strings.Contains(out, "acknowledged batches are missing") || !strings.Contains(out, "--recover-truncated") ||
		!strings.Contains(out, "batches 1-") {
		t.Fatalf("the refusal does not say what is missing and what to do:\n%s", out)
	}

	p = runServer(t, "--data-dir", dir, "--recover-truncated")
	if p.client == nil {
		t.Fatalf("ipam-server --recover-truncated did not start:\n%s", p.output())
	}
	if out := p.output(); !strings.Contains(out, "accepting the loss") || !strings.Contains(out, `"lost":"batches 1-`) {
		t.Fatalf("the recovery does not log the lost range:\n%s", out)
	}
	p.stop(t)

	p = runServer(t, "--data-dir", dir)
	if p.client == nil || strings.Contains(p.output(), "accepting the loss") {
		t.Fatalf("the start after the recovery is not clean:\n%s", p.output())
	}
}
