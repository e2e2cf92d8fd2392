package ipamfn_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kptdev/krm-functions-sdk/go/fn"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/functions/engine"
	"github.com/nephio-project/ipam/functions/internal/pkgtest"
	"github.com/nephio-project/ipam/functions/ipamfn"
	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

func TestFunctionWithoutIPAMResourcesNeedsNoServer(t *testing.T) {
	objs := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
	rl := &fn.ResourceList{Items: objs, FunctionConfig: fn.NewEmptyKubeObject()}
	ok, err := ipamfn.Function{Getenv: func(string) string { return "" }}.Process(rl)
	if !ok || err != nil || len(rl.Results) > 0 {
		t.Fatalf("Function: ok %v, err %v, results %v", ok, err, rl.Results)
	}
}

func TestFunctionWithoutServerSaysWhatToSet(t *testing.T) {
	objs := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "resources.yaml", pkgtest.Seed)
	before := pkgtest.Snapshot(objs)
	rl := &fn.ResourceList{Items: objs, FunctionConfig: fn.NewEmptyKubeObject()}
	ok, err := ipamfn.Function{Getenv: func(string) string { return "" }}.Process(rl)
	if ok || !errors.Is(err, engine.ErrFailed) || len(rl.Results) != 1 {
		t.Fatalf("ok %v, err %v, results %v", ok, err, rl.Results)
	}
	if msg := rl.Results[0].Message; !strings.Contains(msg, "data.server") || !strings.Contains(msg, "IPAM_SERVER") {
		t.Errorf("message %q does not say what to set", msg)
	}
	if strings.Join(pkgtest.Snapshot(objs), "\n") != strings.Join(before, "\n") {
		t.Error("items changed")
	}
}

func TestFunctionUnreachableServer(t *testing.T) {
	// A port nobody listens on: bind one, close it.
	srv := servertest.Start(t, server.Config{}, false)
	addr := srv.Addr
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	objs := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "resources.yaml", pkgtest.Seed)
	rl := &fn.ResourceList{Items: objs, FunctionConfig: configMap(t, map[string]string{"server": addr, "timeout": "3s"})}
	start := time.Now()
	ok, err := ipamfn.Function{}.Process(rl)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s with a 3s timeout", d)
	}
	if ok || err == nil || len(rl.Results) != 1 {
		t.Fatalf("ok %v, err %v, results %v", ok, err, rl.Results)
	}
	want := "ipam-fn: cannot reach ipam-server at " + addr + " (set data.server (host:port) in the functionConfig or the IPAM_SERVER environment variable): "
	if msg := rl.Results[0].Message; !strings.HasPrefix(msg, want) || rl.Results[0].Severity != fn.Error {
		t.Errorf("result %q, want prefix %q", msg, want)
	}
	// A refused loopback address is what a function container without
	// network sees: the result says what kpt needs.
	if msg := rl.Results[0].Message; !strings.Contains(msg, "connection refused") || !strings.Contains(msg, "--allow-network") {
		t.Errorf("result %q: want the refusal and the --allow-network hint", msg)
	}
}

func TestFunctionServerFromEnvironment(t *testing.T) {
	srv := servertest.Start(t, server.Config{}, false)
	objs := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "resources.yaml", pkgtest.Seed)
	rl := &fn.ResourceList{Items: objs, FunctionConfig: configMap(t, map[string]string{"owner": "env-owner"})}
	getenv := func(k string) string {
		if k == "IPAM_SERVER" {
			return srv.Addr
		}
		return ""
	}
	if ok, err := (ipamfn.Function{Getenv: getenv}).Process(rl); !ok || err != nil {
		t.Fatalf("ok %v, err %v, results %v", ok, err, rl.Results)
	}
	// The owner came from data.owner: the server knows alloc1 under it.
	resp, err := srv.Client(t).Get(context.Background(), &ipamv1.GetRequest{
		Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, Key: &ipamv1.Key{Owner: "env-owner", Name: "alloc1"}})
	if err != nil || resp.GetObject().GetAllocation().GetResult().GetPrefix() != "10.0.1.2/24" {
		t.Fatalf("Get alloc1 of env-owner: %v %v", resp, err)
	}
}

func TestFunctionTLS(t *testing.T) {
	certs := servertest.WriteCerts(t, t.TempDir())
	srv := servertest.Start(t, server.Config{TLSCert: certs.ServerCert, TLSKey: certs.ServerKey, ClientCA: certs.CA}, false)
	cfg := map[string]string{"server": srv.Addr, "tlsCA": certs.CA, "tlsCert": certs.ClientCert, "tlsKey": certs.ClientKey}
	rl := &fn.ResourceList{Items: pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "resources.yaml", pkgtest.Seed), FunctionConfig: configMap(t, cfg)}
	if ok, err := (ipamfn.Function{}).Process(rl); !ok || err != nil {
		t.Fatalf("mTLS: ok %v, err %v, results %v", ok, err, rl.Results)
	}
	// Without the client certificate the server refuses: an error result.
	delete(cfg, "tlsCert")
	delete(cfg, "tlsKey")
	rl = &fn.ResourceList{Items: pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "resources.yaml", pkgtest.Seed), FunctionConfig: configMap(t, cfg)}
	if ok, err := (ipamfn.Function{}).Process(rl); ok || err == nil || len(rl.Results) != 1 {
		t.Fatalf("no client cert: ok %v, err %v, results %v", ok, err, rl.Results)
	}
}

// TestFunctionOwnerNotGranted: a package that names another package as
// its owner (data.owner) is refused when the function's identity may not
// change that owner, and the other package's allocations stay.
func TestFunctionOwnerNotGranted(t *testing.T) {
	dir := t.TempDir()
	certs := servertest.WriteCerts(t, dir)
	policy := dir + "/policy.yaml"
	if err := os.WriteFile(policy, []byte(`apiVersion: ipam.nephio.org/v1alpha1
kind: AuthorizationPolicy
rules:
- identities: [cn:ipamctl]
  owners: [seed-pkg]
  networkInstances: ["*"]
  write: true
  read: true
`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := servertest.Start(t, server.Config{TLSCert: certs.ServerCert, TLSKey: certs.ServerKey, ClientCA: certs.CA, AuthzPolicy: policy}, false)
	cfg := map[string]string{"server": srv.Addr, "tlsCA": certs.CA, "tlsCert": certs.ClientCert, "tlsKey": certs.ClientKey}
	rl := &fn.ResourceList{Items: pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "resources.yaml", pkgtest.Seed), FunctionConfig: configMap(t, cfg)}
	if ok, err := (ipamfn.Function{}).Process(rl); !ok || err != nil {
		t.Fatalf("own package: ok %v, err %v, results %v", ok, err, rl.Results)
	}
	// The same identity renders a copy claiming owner other-package: refused,
	// and seed-pkg keeps its allocations.
	cfg["owner"] = "other-package"
	objs := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "resources.yaml", pkgtest.Seed)
	before := pkgtest.Snapshot(objs)
	rl = &fn.ResourceList{Items: objs, FunctionConfig: configMap(t, cfg)}
	ok, err := (ipamfn.Function{}).Process(rl)
	if ok || err == nil || len(rl.Results) != 1 || !strings.Contains(rl.Results[0].Message, "PermissionDenied") {
		t.Fatalf("other owner: ok %v, err %v, results %v", ok, err, rl.Results)
	}
	if !strings.Contains(rl.Results[0].Message, `"cn:ipamctl"`) || !strings.Contains(rl.Results[0].Message, `"other-package"`) {
		t.Errorf("the result does not name the identity and owner: %s", rl.Results[0].Message)
	}
	if strings.Join(pkgtest.Snapshot(objs), "\n") != strings.Join(before, "\n") {
		t.Error("items changed although the Sync was refused")
	}
	c := srv.Dial(t, grpc.WithTransportCredentials(credentials.NewTLS(certs.ClientTLS(t, true))))
	resp, err := ipamv1.NewIPAMClient(c).List(context.Background(), &ipamv1.ListRequest{Kind: ipamv1.ObjectKind_OBJECT_KIND_ALLOCATION, Owner: "seed-pkg"})
	if err != nil || len(resp.GetObjects()) != 3 {
		t.Fatalf("seed-pkg's allocations after the refused render: %v, %v", resp, err)
	}
}

func configMap(t *testing.T, data map[string]string) *fn.KubeObject {
	t.Helper()
	o := fn.NewEmptyKubeObject()
	_ = o.SetAPIVersion("v1")
	_ = o.SetKind("ConfigMap")
	_ = o.SetName("ipam-fn-config")
	if len(data) > 0 {
		if err := o.SetNestedStringMap(data, "data"); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

func TestParseConfig(t *testing.T) {
	env := func(k string) string {
		if k == "IPAM_SERVER" {
			return "10.9.9.9:9090"
		}
		return ""
	}
	for _, tc := range []struct {
		name    string
		data    map[string]string
		want    ipamfn.Config
		wantErr string
	}{
		{name: "defaults", want: ipamfn.Config{Server: "10.9.9.9:9090", Prune: true, Timeout: 10 * time.Second}},
		{name: "functionConfig wins", data: map[string]string{"server": "127.0.0.1:9090", "owner": "o", "prune": "false", "timeout": "2s"},
			want: ipamfn.Config{Server: "127.0.0.1:9090", Owner: "o", Prune: false, Timeout: 2 * time.Second}},
		{name: "tls", data: map[string]string{"tlsCA": "ca.pem", "tlsCert": "c.pem", "tlsKey": "k.pem"},
			want: ipamfn.Config{Server: "10.9.9.9:9090", Prune: true, Timeout: 10 * time.Second, TLSCA: "ca.pem", TLSCert: "c.pem", TLSKey: "k.pem"}},
		{name: "bad prune", data: map[string]string{"prune": "yes please"}, wantErr: "data.prune"},
		{name: "bad timeout", data: map[string]string{"timeout": "10"}, wantErr: "data.timeout"},
		{name: "cert without key", data: map[string]string{"tlsCert": "c.pem"}, wantErr: "tlsKey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ipamfn.ParseConfig(configMap(t, tc.data), env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.Server != tc.want.Server || got.Owner != tc.want.Owner || got.Prune != tc.want.Prune ||
				got.Timeout != tc.want.Timeout || got.TLSCA != tc.want.TLSCA || got.TLSCert != tc.want.TLSCert || got.TLSKey != tc.want.TLSKey {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestParseIPAMConfig: the typed functionConfig reads the same settings
// under spec, prune a boolean, and refuses unknown or mistyped fields by
// name; an IPAMConfig among a package's resources is not a request.
func TestParseIPAMConfig(t *testing.T) {
	for _, tc := range []struct {
		name, spec, wantErr string
		want                ipamfn.Config
	}{
		{name: "all fields", spec: "server: 127.0.0.1:9090\nowner: o\nprune: false\ntimeout: 2s\ntlsCA: ca.pem\ntlsCert: c.pem\ntlsKey: k.pem\ntokenFile: t",
			want: ipamfn.Config{Server: "127.0.0.1:9090", Owner: "o", Prune: false, Timeout: 2 * time.Second, TLSCA: "ca.pem", TLSCert: "c.pem", TLSKey: "k.pem", TokenFile: "t"}},
		{name: "defaults", spec: "server: h:1", want: ipamfn.Config{Server: "h:1", Prune: true, Timeout: 10 * time.Second}},
		{name: "typo", spec: "sever: h:1", wantErr: "spec.sever: unknown field"},
		{name: "prune as a string", spec: "prune: \"yes\"", wantErr: "spec.prune"},
		{name: "timeout as a number", spec: "timeout: 10", wantErr: "spec.timeout"},
		{name: "bad duration", spec: "timeout: soon", wantErr: "spec.timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := fn.ParseKubeObject([]byte("apiVersion: ipam.nephio.org/v1alpha1\nkind: IPAMConfig\nmetadata:\n  name: c\nspec:\n  " +
				strings.ReplaceAll(tc.spec, "\n", "\n  ") + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ipamfn.ParseConfig(o, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.Server != tc.want.Server || got.Owner != tc.want.Owner || got.Prune != tc.want.Prune || got.Timeout != tc.want.Timeout ||
				got.TLSCA != tc.want.TLSCA || got.TLSCert != tc.want.TLSCert || got.TLSKey != tc.want.TLSKey || got.TokenFile != tc.want.TokenFile {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
			objs := pkgtest.Items(t, "Kptfile", pkgtest.Kptfile, "config.yaml", o.String())
			if engine.HasIPAMObjects(objs) {
				t.Error("an IPAMConfig alone counts as an IPAM request")
			}
		})
	}
}

// TestFunctionSendsSource: data.source, or else the root Kptfile's
// ipam.nephio.org/source annotation, reaches the server, whose web view
// links the owner to it.
func TestFunctionSendsSource(t *testing.T) {
	wl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := servertest.Start(t, server.Config{WebListener: wl}, false)
	page := func() string {
		resp, err := http.Get("http://" + wl.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	annotated := strings.Replace(pkgtest.Kptfile, "  name: seed-pkg\n",
		"  name: seed-pkg\n  annotations:\n    ipam.nephio.org/source: https://git.example.com/org/pkgs/tree/main/seed\n", 1)
	// The second run renders the first one's output (the package
	// identity it wrote included), as kpt fn render does.
	items := pkgtest.Items(t, "Kptfile", annotated, "resources.yaml", pkgtest.Seed)
	for _, tc := range []struct {
		name string
		cfg  map[string]string
		want string
	}{
		{"annotation", map[string]string{"server": srv.Addr}, `href="https://git.example.com/org/pkgs/tree/main/seed"`},
		{"data.source wins", map[string]string{"server": srv.Addr, "source": "https://git.example.com/org/pkgs/tree/v2/seed"},
			`href="https://git.example.com/org/pkgs/tree/v2/seed"`},
	} {
		rl := &fn.ResourceList{Items: items, FunctionConfig: configMap(t, tc.cfg)}
		if ok, err := (ipamfn.Function{}).Process(rl); !ok || err != nil {
			t.Fatalf("%s: ok %v, err %v, results %v", tc.name, ok, err, rl.Results)
		}
		if p := page(); !strings.Contains(p, tc.want) {
			t.Errorf("%s: the web view's network instance list lacks %s:\n%s", tc.name, tc.want, p)
		}
		items = rl.Items
	}
}
