package main_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	nodev1 "github.com/nephio-project/ipam/api/proto/nvidia/ipam/node/v1"
)

// nvidiaStore is a store file NVIDIA's node daemon wrote: pool1's block
// (192.168.0.25-.48 of 192.168.0.0/16) and two pods' reservations.
const nvidiaStore = `{"version":1,"checksum":1,"pools":{"pool1":{"name":"pool1",
 "last_pool_config":"{\"subnet\":\"192.168.0.0/16\",\"startIP\":\"192.168.0.25\",\"endIP\":\"192.168.0.48\",\"gateway\":\"192.168.0.1\",\"exclusions\":null,\"routes\":null,\"defaultGateway\":false}",
 "entries":{
  "c0ffee_net1":{"container_id":"c0ffee","interface_name":"net1","ip_address":"192.168.0.25","metadata":{"create_time":"2026-11-27T08:00:00Z","pod_uuid":"u1","pod_name":"web-0","pod_namespace":"default"}},
  "beef_net1":{"container_id":"beef","interface_name":"net1","ip_address":"192.168.0.27","metadata":{"pod_name":"web-1","pod_namespace":"default"}}}}}}`

// TestNVIDIAStoreSwap replaces NVIDIA's daemon on a node: ipam-node
// starts on NVIDIA's store file (the API server unreachable), imports it,
// keeps every pod's address, hands out the next free one, keeps the file
// as <path>.nvidia.json, and answers the health checks.
func TestNVIDIAStoreSwap(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	if err := os.WriteFile(store, []byte(nvidiaStore), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startNode(t, dir, "host-b", unreachable(t))
	d.waitLineOut(t, "imported NVIDIA's store")
	ctx := context.Background()
	ipp := nodev1.PoolType_POOL_TYPE_IPPOOL
	for cid, want := range map[string]string{"c0ffee": "192.168.0.25/16", "beef": "192.168.0.27/16"} {
		p := &nodev1.IPAMParameters{Pools: []string{"pool1"}, CniContainerid: cid, CniIfname: "net1"}
		if _, err := d.api.IsAllocated(ctx, &nodev1.IsAllocatedRequest{Parameters: p}); err != nil {
			t.Fatalf("%s: %v", cid, err)
		}
		res, err := d.api.Allocate(ctx, &nodev1.AllocateRequest{Parameters: p})
		if err != nil || res.GetAllocations()[0].GetIp() != want || res.GetAllocations()[0].GetGateway() != "192.168.0.1" {
			t.Fatalf("%s: %v %v, want %s", cid, res, err, want)
		}
	}
	res, err := d.api.Allocate(ctx, &nodev1.AllocateRequest{Parameters: params("new", ipp, "pool1")})
	if err != nil || res.GetAllocations()[0].GetIp() != "192.168.0.26/16" {
		t.Fatalf("new: %v %v", res, err)
	}
	if fi, err := os.Stat(store); err != nil || !fi.IsDir() {
		t.Fatalf("the store is not our directory: %v", err)
	}
	if data, err := os.ReadFile(store + ".nvidia.json"); err != nil || string(data) != nvidiaStore {
		t.Fatalf("NVIDIA's file not kept: %v", err)
	}
	hc, err := healthpb.NewHealthClient(d.conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC health: %v %v", hc, err)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + d.health + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	d.Stop(t)
}
