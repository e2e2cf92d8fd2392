package authz

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestReplicas: replicas are named by certificate identities only, and
// Replica recognizes a principal by any of its names.
func TestReplicas(t *testing.T) {
	rules := "rules:\n- identities: ['*']\n  read: true\n"
	for _, tc := range []struct {
		name, replicas, want string
	}{
		{"cn", "[cn:ipam-server]", ""},
		{"dns and uri", "[dns:ipam-server.ipam-system.svc, uri:spiffe://cluster/ipam-server]", ""},
		{"token", "[token:ci]", `replicas[0]: "token:ci": a replica is named by its certificate`},
		{"every caller", "['*']", `replicas[0]: "*"`},
		{"anonymous", "[anonymous]", `replicas[0]: "anonymous"`},
		{"pattern", "[cn:ipam-*]", `replicas[0]: "cn:ipam-*"`},
		{"empty name", "[cn:x, 'dns:']", `replicas[1]: "dns:"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(head + "replicas: " + tc.replicas + "\n" + rules))
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !p.HasReplicas() {
				t.Error("HasReplicas: false")
			}
		})
	}

	p, err := Parse([]byte(head + "replicas: [cn:ipam-server, uri:spiffe://c/ipam]\n" + rules))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		names []string
		want  bool
	}{
		{[]string{"dns:ipam-server", "cn:ipam-server"}, true},
		{[]string{"uri:spiffe://c/ipam"}, true},
		{[]string{"cn:ipamctl"}, false},
		{[]string{"token:ipam-server"}, false},
		{[]string{Anonymous}, false},
		{nil, false},
	} {
		if got := p.Replica(Principal{Names: tc.names}); got != tc.want {
			t.Errorf("Replica(%v) = %v, want %v", tc.names, got, tc.want)
		}
	}
	none, err := Parse([]byte(head + rules))
	if err != nil {
		t.Fatal(err)
	}
	if none.HasReplicas() || none.Replica(Principal{Names: []string{"cn:ipam-server"}}) {
		t.Error("a policy without replicas names one")
	}
}

// TestBlueprintPolicyNamesReplicas: the blueprint's policy names
// ipam-server's certificate as the replicas', and none of the clients'.
func TestBlueprintPolicyNamesReplicas(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "blueprints", "ipam", "authz-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	p, err := Parse([]byte(cm.Data["policy.yaml"]))
	if err != nil {
		t.Fatalf("blueprints/ipam/authz-policy.yaml: %v", err)
	}
	if !p.Replica(Principal{Names: []string{"cn:ipam-server"}}) {
		t.Error("cn:ipam-server is not a replica")
	}
	for _, c := range []string{"cn:ipam-controller", "cn:ipam-injector", "cn:ipam-fn"} {
		if p.Replica(Principal{Names: []string{c}}) {
			t.Errorf("%s is a replica", c)
		}
	}
}
