package server_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// TestReadsAnswerOnlySettledState: Get, List and Tree read while a change
// they see is uncommitted, and its commit then fails: they read again
// once it is undone, and never answer with it.
func TestReadsAnswerOnlySettledState(t *testing.T) {
	for _, tc := range []struct {
		name string
		read func(svc *server.Service) (shows bool, err error)
	}{
		{"Get", func(svc *server.Service) (bool, error) {
			_, err := svc.Get(context.Background(), &ipamv1.GetRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE, Key: &ipamv1.Key{Name: "undone"}})
			if status.Code(err) == codes.NotFound {
				return false, nil
			}
			return err == nil, err
		}},
		{"List", func(svc *server.Service) (bool, error) {
			resp, err := svc.List(context.Background(), &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_NETWORK_INSTANCE})
			for _, o := range resp.GetObjects() {
				if o.GetNetworkInstance().GetKey().GetName() == "undone" {
					return true, err
				}
			}
			return false, err
		}},
		{"Tree", func(svc *server.Service) (bool, error) {
			_, err := svc.Tree(context.Background(), &ipamv1.TreeRequest{NetworkInstance: "undone"})
			if status.Code(err) == codes.NotFound {
				return false, nil
			}
			return err == nil, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &servertest.UndoingCommitter{Owner: "o", Undone: "undone"}
			a := ipam.New(ipam.WithCommitter(c))
			c.A = a
			if err := a.CreateNetworkInstance(context.Background(), ipam.NetworkInstance{Key: ipam.Key{Owner: "o", Name: "undone"}}); err != nil {
				t.Fatal(err)
			}
			shows, err := tc.read(server.NewService(a, server.NewHub(nil, 0, nil), nil))
			if err != nil {
				t.Fatal(err)
			}
			if shows {
				t.Fatal("the answer shows network instance undone, whose commit failed")
			}
			if c.Barriers.Load() < 2 {
				t.Fatalf("the read settled %d times, want a second time after the failure", c.Barriers.Load())
			}
		})
	}
}
