package nodeipam

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// nvStore is a store file of NVIDIA's node daemon (version 1): an IPPool
// with its block and two reservations (one since moved out of the block),
// a CIDRPool of the same name, and a reservation whose interface name is
// invalid.
const nvStore = `{"version":1,"checksum":123,"pools":{
 "pool1":{"name":"pool1","last_pool_config":"{\"subnet\":\"192.168.0.0/16\",\"startIP\":\"192.168.0.25\",\"endIP\":\"192.168.0.48\",\"gateway\":\"192.168.0.1\",\"exclusions\":null,\"routes\":[{\"dst\":\"10.10.0.0/16\"}],\"defaultGateway\":true}",
  "entries":{
   "aaa_net1":{"container_id":"aaa","interface_name":"net1","ip_address":"192.168.0.25","metadata":{"create_time":"2026-01-02T03:04:05.123Z","pod_uuid":"u-a","pod_name":"pod-a","pod_namespace":"default","device_id":"0000:3b:00.2"}},
   "bbb_net1":{"container_id":"bbb","interface_name":"net1","ip_address":"192.168.0.60","metadata":{"pod_name":"pod-b","pod_namespace":"default"}},
   "ccc_bad":{"container_id":"ccc","interface_name":"a/b","ip_address":"192.168.0.26","metadata":{}}}},
 "cidrpool/pool1":{"name":"pool1","last_pool_config":"{\"subnet\":\"10.90.1.0/24\",\"startIP\":\"10.90.1.1\",\"endIP\":\"10.90.1.254\",\"gateway\":\"10.90.1.1\"}",
  "entries":{"aaa_net2":{"container_id":"aaa","interface_name":"net2","ip_address":"10.90.1.2","metadata":{"pod_name":"pod-a","pod_namespace":"default"}}}}}}`

func TestImportNVIDIA(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store")
	if err := os.WriteFile(path, []byte(nvStore), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := ImportNVIDIA(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Imported || rep.Pools != 2 || rep.Reserved != 3 || len(rep.Skipped) != 1 {
		t.Fatalf("report %+v", rep)
	}
	if _, err := os.Stat(path + NVIDIAStoreSuffix); err != nil {
		t.Fatal(err)
	}
	// Again: the path is our store now; nothing to do.
	if rep, err := ImportNVIDIA(path, Options{}); err != nil || rep.Imported {
		t.Fatalf("second import: %+v %v", rep, err)
	}
	e := openEngine(t, path)
	a := &Request{Type: IPPool, Pools: []string{"pool1"}, ContainerID: "aaa", IfName: "net1"}
	res, err := e.Allocate(ctx, a)
	if err != nil || res[0].IP.String() != "192.168.0.25/16" || res[0].Gateway.String() != "192.168.0.1" || len(res[0].Routes) != 2 {
		t.Fatalf("aaa: %v %v", res, err)
	}
	if err := e.IsAllocated(ctx, &Request{Type: IPPool, Pools: []string{"pool1"}, ContainerID: "bbb", IfName: "net1"}); err != nil {
		t.Fatal(err)
	}
	if err := e.IsAllocated(ctx, &Request{Type: CIDRPool, Pools: []string{"pool1"}, ContainerID: "aaa", IfName: "net2"}); err != nil {
		t.Fatal(err)
	}
	held := e.List()
	if len(held) != 3 {
		t.Fatalf("held %+v", held)
	}
	for _, h := range held {
		if h.ContainerID == "aaa" && h.IfName == "net1" && (h.Pod.DeviceID != "0000:3b:00.2" || h.Pod.UID != "u-a" || h.Created.Year() != 2026) {
			t.Fatalf("metadata %+v", h)
		}
	}
	// The next address skips the imported one; .60 is outside the block
	// and reported.
	if got := alloc1(t, e, req("new", "pool1")); got != "192.168.0.26/16" {
		t.Fatal(got)
	}
	if s := e.Stats(); s[1].Outside != 1 {
		t.Fatalf("stats %+v", s)
	}
	got, err := e.Allocate(ctx, &Request{Type: CIDRPool, Pools: []string{"pool1"}, ContainerID: "new", IfName: "net2"})
	if err != nil || got[0].IP.String() != "10.90.1.3/24" {
		t.Fatalf("cidr new: %v %v", got, err)
	}
}

func TestImportNVIDIARefusesGarbage(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"notjson": "{", "version": `{"version":2,"pools":{}}`} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ImportNVIDIA(path, Options{}); err == nil {
			t.Fatalf("%s imported", name)
		}
		if data, _ := os.ReadFile(path); string(data) != content {
			t.Fatalf("%s changed", name)
		}
	}
	if _, err := ImportNVIDIA(filepath.Join(dir, "none"), Options{}); err != nil {
		t.Fatal(err)
	}
}
