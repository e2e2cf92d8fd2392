package resource_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	nipamv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/ipam/v1alpha1"
	vlanv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/vlan/v1alpha1"
	resourcepb "github.com/nephio-project/ipam/api/proto/resource"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// TestWireContract: the package, service, method names, field numbers and
// enum values of resource.Resource are those Nephio's clients send.
func TestWireContract(t *testing.T) {
	sd := resourcepb.File_resource_resource_proto.Services().ByName("Resource")
	if sd == nil || sd.FullName() != "resource.Resource" {
		t.Fatalf("service %v", sd)
	}
	for _, m := range []struct {
		name, in, out string
		stream        bool
	}{
		{"CreateIndex", "ClaimRequest", "EmptyResponse", false},
		{"DeleteIndex", "ClaimRequest", "EmptyResponse", false},
		{"GetClaim", "ClaimRequest", "ClaimResponse", false},
		{"Claim", "ClaimRequest", "ClaimResponse", false},
		{"DeleteClaim", "ClaimRequest", "EmptyResponse", false},
		{"WatchClaim", "WatchRequest", "WatchResponse", true},
	} {
		md := sd.Methods().ByName(protoreflect.Name(m.name))
		if md == nil || string(md.Input().Name()) != m.in || string(md.Output().Name()) != m.out || md.IsStreamingServer() != m.stream {
			t.Errorf("method %s: %v", m.name, md)
		}
	}
	fields := map[string]map[string]protowire.Number{
		"ClaimRequest":  {"header": 1, "spec": 2, "expiryTime": 3},
		"ClaimResponse": {"header": 1, "spec": 2, "status": 3, "statusCode": 4, "expiryTime": 5},
		"WatchRequest":  {"header": 1},
		"WatchResponse": {"header": 1, "statusCode": 2},
		"Header":        {"gvk": 1, "nsn": 2, "ownerGvk": 3, "ownerNsn": 4},
		"GVK":           {"group": 1, "version": 2, "kind": 3},
		"NSN":           {"namespace": 1, "name": 2},
		"Instance":      {"nsn": 1},
	}
	msgs := resourcepb.File_resource_resource_proto.Messages()
	for msg, want := range fields {
		md := msgs.ByName(protoreflect.Name(msg))
		if md == nil || md.Fields().Len() != len(want) {
			t.Errorf("message %s: %v", msg, md)
			continue
		}
		for name, num := range want {
			if fd := md.Fields().ByName(protoreflect.Name(name)); fd == nil || fd.Number() != num {
				t.Errorf("%s.%s: %v, want field %d", msg, name, fd, num)
			}
		}
	}
	if resourcepb.StatusCode_Valid != 0 || resourcepb.StatusCode_InValid != 1 || resourcepb.StatusCode_Unknown != 2 {
		t.Error("StatusCode values differ from Valid=0, InValid=1, Unknown=2")
	}
	// A request encoded by hand, field by field, decodes as Nephio means it.
	var gvk, hdr, req []byte
	gvk = protowire.AppendTag(gvk, 1, protowire.BytesType)
	gvk = protowire.AppendString(gvk, "ipam.resource.nephio.org")
	gvk = protowire.AppendTag(gvk, 3, protowire.BytesType)
	gvk = protowire.AppendString(gvk, "IPClaim")
	hdr = protowire.AppendTag(hdr, 1, protowire.BytesType)
	hdr = protowire.AppendBytes(hdr, gvk)
	req = protowire.AppendTag(req, 1, protowire.BytesType)
	req = protowire.AppendBytes(req, hdr)
	req = protowire.AppendTag(req, 2, protowire.BytesType)
	req = protowire.AppendString(req, "{}")
	req = protowire.AppendTag(req, 3, protowire.BytesType)
	req = protowire.AppendString(req, "never")
	var got resourcepb.ClaimRequest
	if err := proto.Unmarshal(req, &got); err != nil || got.GetHeader().GetGvk().GetKind() != "IPClaim" ||
		got.GetHeader().GetGvk().GetGroup() != "ipam.resource.nephio.org" || got.GetSpec() != "{}" || got.GetExpiryTime() != "never" {
		t.Fatalf("hand-encoded request: %v %v", &got, err)
	}
}

// header names an object of kind of group and its owner.
func header(group, kind, name, ownerGroup, ownerKind, owner string) *resourcepb.Header {
	return &resourcepb.Header{
		Gvk: &resourcepb.GVK{Group: group, Version: "v1alpha1", Kind: kind}, Nsn: &resourcepb.NSN{Namespace: "default", Name: name},
		OwnerGvk: &resourcepb.GVK{Group: ownerGroup, Version: "v1alpha1", Kind: ownerKind}, OwnerNsn: &resourcepb.NSN{Namespace: "default", Name: owner},
	}
}

// ipClaim is the JSON of an IPClaim as Nephio's client sends it: the
// whole object.
func ipClaim(t testing.TB, name, spec string) string {
	t.Helper()
	doc := `{"apiVersion":"ipam.resource.nephio.org/v1alpha1","kind":"IPClaim","metadata":{"name":"` + name + `","namespace":"default"},"spec":` + spec + `}`
	if !json.Valid([]byte(doc)) {
		t.Fatalf("invalid JSON %s", doc)
	}
	return doc
}

func vlanClaim(name, spec string) string {
	return `{"apiVersion":"vlan.resource.nephio.org/v1alpha1","kind":"VLANClaim","metadata":{"name":"` + name + `","namespace":"default"},"spec":` + spec + `}`
}

const (
	ipamGroup = "ipam.resource.nephio.org"
	vlanGroup = "vlan.resource.nephio.org"
	reqGroup  = "req.nephio.org"
)

// infra declares, as Nephio's NetworkInstance and IPPrefix reconcilers
// do through the client, the VRF vpc with aggregate 10.0.0.0/8 and the
// network 10.0.0.1/24 (gateway .1) of cluster01, and the VLAN index
// cluster01.
func infra(t testing.TB, ctx context.Context, c resourcepb.ResourceClient) {
	t.Helper()
	if _, err := c.CreateIndex(ctx, &resourcepb.ClaimRequest{Header: header(ipamGroup, "NetworkInstance", "vpc", ipamGroup, "NetworkInstance", "vpc"),
		Spec: `{"apiVersion":"ipam.resource.nephio.org/v1alpha1","kind":"NetworkInstance","metadata":{"name":"vpc"},"spec":{"prefixes":[{"prefix":"10.0.0.0/8"}]}}`}); err != nil {
		t.Fatalf("CreateIndex vpc: %v", err)
	}
	for _, p := range []struct{ name, owner, ownerKind, spec string }{
		{"vpc-aggregate-10-0-0-0-8", "vpc-aggregate-10-0-0-0-8", "NetworkInstance", `{"kind":"aggregate","networkInstance":{"name":"vpc"},"prefix":"10.0.0.0/8","prefixLength":8,"createPrefix":true}`},
		{"cluster01-n3", "cluster01-n3", "IPPrefix", `{"kind":"network","networkInstance":{"name":"vpc"},"prefix":"10.0.0.1/24","prefixLength":24,"createPrefix":true,` +
			`"labels":{"nephio.org/cluster-name":"cluster01","nephio.org/gateway":"true"}}`},
	} {
		resp, err := c.Claim(ctx, &resourcepb.ClaimRequest{Header: header(ipamGroup, "IPClaim", p.name, ipamGroup, p.ownerKind, p.owner), Spec: ipClaim(t, p.name, p.spec), ExpiryTime: "never"})
		if err != nil || resp.GetStatusCode() != resourcepb.StatusCode_Valid {
			t.Fatalf("Claim %s: %v %v", p.name, resp, err)
		}
	}
	if _, err := c.CreateIndex(ctx, &resourcepb.ClaimRequest{Header: header(vlanGroup, "VLANIndex", "cluster01", vlanGroup, "VLANIndex", "cluster01"),
		Spec: `{"apiVersion":"vlan.resource.nephio.org/v1alpha1","kind":"VLANIndex","metadata":{"name":"cluster01"},"spec":{}}`}); err != nil {
		t.Fatalf("CreateIndex cluster01: %v", err)
	}
}

// status decodes the status of a ClaimResponse into obj.
func statusOf(t *testing.T, resp *resourcepb.ClaimResponse, obj any) {
	t.Helper()
	if err := json.Unmarshal([]byte(resp.GetStatus()), obj); err != nil {
		t.Fatalf("status %q: %v", resp.GetStatus(), err)
	}
}

// TestClaims runs Nephio's calls against a real ipam-server through a
// client built from the .proto: IPClaims and VLANClaims are made, made
// again unchanged, read, and released, and WatchClaim reports each
// change and each release.
func TestClaims(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	c := resourcepb.NewResourceClient(srv.Dial(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	infra(t, ctx, c)

	watch, err := c.WatchClaim(ctx, &resourcepb.WatchRequest{Header: &resourcepb.Header{
		Gvk: &resourcepb.GVK{Group: ipamGroup, Version: "v1alpha1", Kind: "IPClaim"}, OwnerGvk: &resourcepb.GVK{Group: reqGroup, Version: "v1alpha1", Kind: "Interface"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Header(); err != nil { // the watch is open
		t.Fatal(err)
	}

	n3 := &resourcepb.ClaimRequest{Header: header(ipamGroup, "IPClaim", "upf-n3", reqGroup, "Interface", "n3"), ExpiryTime: "2030-01-01T00:00:00Z",
		Spec: ipClaim(t, "upf-n3", `{"kind":"network","networkInstance":{"name":"vpc"},"selector":{"matchLabels":{"nephio.org/cluster-name":"cluster01"}},"labels":{"nephio.org/owner-gvk":"Interface.v1alpha1.req.nephio.org","nephio.org/owner-nsn-name":"n3",`+
			`"nephio.org/owner-nsn-namespace":"default","nephio.org/gvk":"IPClaim.v1alpha1.ipam.resource.nephio.org","nephio.org/nsn-name":"upf-n3","nephio.org/nsn-namespace":"default"}}`)}
	var first *resourcepb.ClaimResponse
	for range 2 { // the same claim again is the same answer
		resp, err := c.Claim(ctx, n3)
		if err != nil {
			t.Fatal(err)
		}
		var got nipamv1alpha1.IPClaim
		statusOf(t, resp, &got)
		if got.Status.Prefix == nil || *got.Status.Prefix != "10.0.0.2/24" || got.Status.Gateway == nil || *got.Status.Gateway != "10.0.0.1" ||
			got.Kind != "IPClaim" || got.Name != "upf-n3" || resp.GetStatusCode() != resourcepb.StatusCode_Valid ||
			!proto.Equal(resp.GetHeader(), n3.GetHeader()) || resp.GetSpec() != n3.GetSpec() || resp.GetExpiryTime() != n3.GetExpiryTime() {
			t.Fatalf("Claim n3: %v", resp)
		}
		if first != nil && resp.GetStatus() != first.GetStatus() {
			t.Fatalf("the same claim again answered %s, first %s", resp.GetStatus(), first.GetStatus())
		}
		first = resp
	}
	ev, err := watch.Recv()
	if err != nil || ev.GetStatusCode() != resourcepb.StatusCode_Unknown || ev.GetHeader().GetNsn().GetName() != "upf-n3" ||
		ev.GetHeader().GetGvk().GetKind() != "IPClaim" || ev.GetHeader().GetOwnerNsn().GetName() != "n3" || ev.GetHeader().GetOwnerGvk().GetKind() != "Interface" {
		t.Fatalf("watch after the claim: %v %v", ev, err)
	}

	idx := &resourcepb.ClaimRequest{Header: header(ipamGroup, "IPClaim", "upf-n3-idx", reqGroup, "Interface", "n3"),
		Spec: ipClaim(t, "upf-n3-idx", `{"networkInstance":{"name":"vpc"},"index":7,"selector":{"matchLabels":{"nephio.org/cluster-name":"cluster01"}}}`)}
	resp, err := c.Claim(ctx, idx)
	var byIndex nipamv1alpha1.IPClaim
	if err == nil {
		statusOf(t, resp, &byIndex)
	}
	if err != nil || byIndex.Status.Prefix == nil || *byIndex.Status.Prefix != "10.0.0.7/24" {
		t.Fatalf("index 7: %v %v", resp, err)
	}
	if ev, err := watch.Recv(); err != nil || ev.GetHeader().GetNsn().GetName() != "upf-n3-idx" {
		t.Fatalf("watch after the index claim: %v %v", ev, err)
	}

	got, err := c.GetClaim(ctx, n3)
	if err != nil || got.GetStatus() != first.GetStatus() {
		t.Fatalf("GetClaim n3: %v %v", got, err)
	}

	// VLANs: the lowest free ID, a range, a size, a static ID, and IDs
	// outside 1-4094 refused.
	for _, v := range []struct{ name, spec, field, want string }{
		{"n3", `{"vlanIndex":{"name":"cluster01"}}`, "vlanID", "1"},
		{"trunk", `{"vlanIndex":{"name":"cluster01"},"range":"100-109"}`, "vlanRange", "100-109"},
		{"spare", `{"vlanIndex":{"name":"cluster01"},"range":"3"}`, "vlanRange", "2-4"},
		{"top", `{"vlanIndex":{"name":"cluster01"},"vlanID":4094}`, "vlanID", "4094"},
	} {
		resp, err := c.Claim(ctx, &resourcepb.ClaimRequest{Header: header(vlanGroup, "VLANClaim", v.name, reqGroup, "Interface", "n3"), Spec: vlanClaim(v.name, v.spec)})
		if err != nil {
			t.Fatalf("VLANClaim %s: %v", v.name, err)
		}
		var raw struct {
			Status map[string]any `json:"status"`
		}
		statusOf(t, resp, &raw)
		var vc vlanv1alpha1.VLANClaim
		statusOf(t, resp, &vc)
		if s := strings.Trim(mustJSON(t, raw.Status[v.field]), `"`); s != v.want {
			t.Fatalf("VLANClaim %s: status.%s = %s, want %s (%s)", v.name, v.field, s, v.want, resp.GetStatus())
		}
	}
	for _, bad := range []string{`{"vlanIndex":{"name":"cluster01"},"vlanID":4095}`, `{"vlanIndex":{"name":"cluster01"},"range":"0-5"}`} {
		_, err := c.Claim(ctx, &resourcepb.ClaimRequest{Header: header(vlanGroup, "VLANClaim", "bad", reqGroup, "Interface", "n3"), Spec: vlanClaim("bad", bad)})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("VLANClaim %s: %v, want InvalidArgument", bad, err)
		}
	}

	// A taken ID is refused in the claim's words.
	_, err = c.Claim(ctx, &resourcepb.ClaimRequest{Header: header(vlanGroup, "VLANClaim", "dup", reqGroup, "Interface", "n3"), Spec: vlanClaim("dup", `{"vlanIndex":{"name":"cluster01"},"vlanID":1}`)})
	if status.Code(err) != codes.AlreadyExists || !strings.Contains(status.Convert(err).Message(), "VLAN ID 1 is already held by VLANClaim default/n3") {
		t.Fatalf("a taken VLAN ID: %v, want AlreadyExists naming VLAN ID 1 and VLANClaim default/n3", err)
	}

	// An index whose IDs are claimed is not deleted.
	vlanIndex := &resourcepb.ClaimRequest{Header: header(vlanGroup, "VLANIndex", "cluster01", vlanGroup, "VLANIndex", "cluster01")}
	if _, err := c.DeleteIndex(ctx, vlanIndex); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("DeleteIndex of a VLAN index with claims: %v, want FailedPrecondition", err)
	}

	// Release: the watcher hears InValid, the claim is gone, and its
	// address is free again.
	if _, err := c.DeleteClaim(ctx, n3); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := watch.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetHeader().GetNsn().GetName() == "upf-n3" {
			if ev.GetStatusCode() != resourcepb.StatusCode_InValid {
				t.Fatalf("watch after the release: %v", ev)
			}
			break
		}
	}
	if _, err := c.GetClaim(ctx, n3); status.Code(err) != codes.NotFound {
		t.Fatalf("GetClaim after DeleteClaim: %v, want NotFound", err)
	}
	if _, err := c.DeleteClaim(ctx, n3); err != nil {
		t.Fatalf("DeleteClaim of a released claim: %v", err)
	}
	other := &resourcepb.ClaimRequest{Header: header(ipamGroup, "IPClaim", "upf-n6", reqGroup, "Interface", "n6"),
		Spec: ipClaim(t, "upf-n6", `{"networkInstance":{"name":"vpc"},"selector":{"matchLabels":{"nephio.org/cluster-name":"cluster01"}}}`)}
	if resp, err := c.Claim(ctx, other); err != nil || !strings.Contains(resp.GetStatus(), `"prefix":"10.0.0.2/24"`) {
		t.Fatalf("a claim after the release: %v %v", resp, err)
	}

	// Once its claims are released, the VLAN index goes, and deleting it
	// again is no error.
	for _, name := range []string{"n3", "trunk", "spare", "top"} {
		if _, err := c.DeleteClaim(ctx, &resourcepb.ClaimRequest{Header: header(vlanGroup, "VLANClaim", name, reqGroup, "Interface", "n3"), Spec: vlanClaim(name, `{"vlanIndex":{"name":"cluster01"}}`)}); err != nil {
			t.Fatalf("DeleteClaim VLANClaim %s: %v", name, err)
		}
	}
	for range 2 {
		if _, err := c.DeleteIndex(ctx, vlanIndex); err != nil {
			t.Fatalf("DeleteIndex of a VLAN index without claims: %v", err)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBadRequests: requests the service cannot serve are refused with
// InvalidArgument naming the field, and change nothing.
func TestBadRequests(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	c := resourcepb.NewResourceClient(srv.Dial(t))
	ctx := context.Background()
	good := header(ipamGroup, "IPClaim", "x", reqGroup, "Interface", "n3")
	noOwner := proto.Clone(good).(*resourcepb.Header)
	noOwner.OwnerNsn = nil
	wrongKind := proto.Clone(good).(*resourcepb.Header)
	wrongKind.Gvk.Kind = "IPAllocation"
	slash := proto.Clone(good).(*resourcepb.Header)
	slash.OwnerNsn.Name = "a/b"
	for _, tc := range []struct {
		name string
		req  *resourcepb.ClaimRequest
		want string
	}{
		{"no header", &resourcepb.ClaimRequest{}, "header: is required"},
		{"no owner", &resourcepb.ClaimRequest{Header: noOwner}, "header: header.ownerGvk.kind and header.ownerNsn.name are required"},
		{"a kind of another API", &resourcepb.ClaimRequest{Header: wrongKind}, "header.gvk:"},
		{"a / in the owner", &resourcepb.ClaimRequest{Header: slash}, "holds a /"},
		{"a spec too large", &resourcepb.ClaimRequest{Header: good, Spec: strings.Repeat(" ", 65<<10)}, "spec: 66560 bytes exceed the limit of 65536"},
		{"a spec that is no JSON", &resourcepb.ClaimRequest{Header: good, Spec: "{"}, "spec: cannot be read as a IPClaim"},
		{"no network instance", &resourcepb.ClaimRequest{Header: good, Spec: ipClaim(t, "x", `{}`)}, "spec.networkInstance.name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Claim(ctx, tc.req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.want) {
				t.Fatalf("%v, want InvalidArgument with %q", err, tc.want)
			}
		})
	}
}

// TestAuthorization: the owner the policy checks is the header's owner.
func TestAuthorization(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte(`apiVersion: ipam.nephio.org/v1alpha1
kind: AuthorizationPolicy
rules:
- identities: [anonymous]
  owners: ["resource:ipam.resource.nephio.org/*", "resource:vlan.resource.nephio.org/*", "resource:req.nephio.org/v1alpha1/Interface/default/*"]
  networkInstances: ["*"]
  write: true
  read: true
`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := servertest.Start(t, server.Config{AuthzPolicy: policy}, false)
	c := resourcepb.NewResourceClient(srv.Dial(t))
	ctx := context.Background()
	infra(t, ctx, c)
	spec := ipClaim(t, "c", `{"networkInstance":{"name":"vpc"},"selector":{"matchLabels":{"nephio.org/cluster-name":"cluster01"}}}`)
	if _, err := c.Claim(ctx, &resourcepb.ClaimRequest{Header: header(ipamGroup, "IPClaim", "c", reqGroup, "Interface", "n3"), Spec: spec}); err != nil {
		t.Fatalf("an owner the policy grants: %v", err)
	}
	_, err := c.Claim(ctx, &resourcepb.ClaimRequest{Header: header(ipamGroup, "IPClaim", "c", reqGroup, "DataNetwork", "internet"), Spec: spec})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("an owner the policy does not grant: %v, want PermissionDenied", err)
	}
	if _, err := c.DeleteClaim(ctx, &resourcepb.ClaimRequest{Header: header(ipamGroup, "IPClaim", "c", reqGroup, "DataNetwork", "internet"), Spec: spec}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("DeleteClaim for an owner the policy does not grant: %v, want PermissionDenied", err)
	}
}
