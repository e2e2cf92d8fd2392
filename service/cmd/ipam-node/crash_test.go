package main_test

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	nodev1 "github.com/nephio-project/ipam/api/proto/nvidia/ipam/node/v1"
	"github.com/nephio-project/ipam/service/node/nodeipam"
)

// unreachable writes a kubeconfig whose API server does not answer.
func unreachable(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["none"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	kc.Contexts["none"] = &clientcmdapi.Context{Cluster: "none"}
	kc.CurrentContext = "none"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKill9 allocates under load from 32 callers, kill -9s ipam-node
// mid-flight, restarts it on the same store and checks that every
// answered allocation is still there with its address, and that no
// address is held twice. The block is set in the store beforehand (the
// engine's own Open and SetPool), so the daemon serves it from disk with
// the API server unreachable.
func TestKill9(t *testing.T) {
	dir := t.TempDir()
	e, err := nodeipam.Open(filepath.Join(dir, "store"), nodeipam.Options{})
	if err != nil {
		t.Fatal(err)
	}
	blk := &nodeipam.Block{Network: netip.MustParsePrefix("10.60.0.0/16"), Start: netip.MustParseAddr("10.60.0.1"),
		End: netip.MustParseAddr("10.60.255.254"), Gateway: netip.MustParseAddr("10.60.0.1")}
	if _, err := e.SetPool(context.Background(), nodeipam.PoolKey{Type: nodeipam.IPPool, Name: "pool1"}, blk); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	kc := unreachable(t)
	ipp := nodev1.PoolType_POOL_TYPE_IPPOOL
	for round := range 3 {
		d := startNode(t, dir, "host-b", kc, "--cni-skip-nv-ipam-binary-copy", "--cni-skip-nv-ipam-config-creation", "--log-level", "info")
		var mu sync.Mutex
		answered := map[string]string{} // container -> address
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for g := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					cid := fmt.Sprintf("r%d-g%d-%d", round, g, i)
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					res, err := d.api.Allocate(ctx, &nodev1.AllocateRequest{Parameters: params(cid, ipp, "pool1")})
					cancel()
					if err != nil {
						return // the daemon is gone
					}
					mu.Lock()
					answered[cid] = res.GetAllocations()[0].GetIp()
					mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Second)
		d.Kill9(t)
		close(stop)
		wg.Wait()
		if len(answered) == 0 {
			t.Fatal("nothing answered before the kill")
		}
		d = startNode(t, dir, "host-b", kc, "--cni-skip-nv-ipam-binary-copy", "--cni-skip-nv-ipam-config-creation", "--log-level", "info")
		holder := map[string]string{}
		for cid, ip := range answered {
			if other, ok := holder[ip]; ok {
				t.Fatalf("%s answered to %s and %s", ip, other, cid)
			}
			holder[ip] = cid
			if _, err := d.api.IsAllocated(context.Background(), &nodev1.IsAllocatedRequest{Parameters: params(cid, ipp, "pool1")}); err != nil {
				t.Fatalf("round %d: %s (%s) lost: %v", round, cid, ip, err)
			}
			res, err := d.api.Allocate(context.Background(), &nodev1.AllocateRequest{Parameters: params(cid, ipp, "pool1")})
			if err != nil || res.GetAllocations()[0].GetIp() != ip {
				t.Fatalf("round %d: %s answered %s, now %v %v", round, cid, ip, res, err)
			}
		}
		// A new container never gets an answered address.
		res, err := d.api.Allocate(context.Background(), &nodev1.AllocateRequest{Parameters: params(fmt.Sprintf("after%d", round), ipp, "pool1")})
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := holder[res.GetAllocations()[0].GetIp()]; ok {
			t.Fatalf("%s handed out again (held by %s)", res.GetAllocations()[0].GetIp(), c)
		}
		if _, err := d.api.IsAllocated(context.Background(), &nodev1.IsAllocatedRequest{Parameters: params("never", ipp, "pool1")}); status.Code(err) != codes.NotFound {
			t.Fatalf("never: %v", err)
		}
		t.Logf("round %d: %d allocations answered before kill -9, all restored", round, len(answered))
		d.Stop(t)
	}
}
