package authz

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

const head = "apiVersion: ipam.nephio.org/v1alpha1\nkind: AuthorizationPolicy\n"

// TestParse: bad policies are refused with the field named.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"ok", head + "rules:\n- identities: [cn:a]\n  owners: [a]\n  networkInstances: ['*']\n  write: true\n", ""},
		{"wrong kind", "apiVersion: v1\nkind: ConfigMap\nrules: []\n", "apiVersion/kind"},
		{"unknown field", head + "rules:\n- identities: [cn:a]\n  owner: [a]\n  read: true\n", `unknown field "owner"`},
		{"no rules", head, "rules: a policy without rules"},
		{"no identities", head + "rules:\n- read: true\n", "rules[0].identities"},
		{"grants nothing", head + "rules:\n- identities: [cn:a]\n", "rules[0]: grants nothing"},
		{"write without owners", head + "rules:\n- identities: [cn:a]\n  write: true\n  networkInstances: ['*']\n", "write needs owners"},
		{"bad identity kind", head + "rules:\n- identities: [user:a]\n  read: true\n", `rules[0].identities[0]: "user:a": unknown kind`},
		{"identity without kind", head + "rules:\n- identities: [alice]\n  read: true\n", "rules[0].identities[0]"},
		{"bad token hash", head + "tokens:\n- identity: ci\n  sha256: abc\nrules:\n- identities: [token:ci]\n  read: true\n", "tokens[0].sha256"},
		{"token identity with a star", head + "tokens:\n- identity: 'c*'\n  sha256: " + strings.Repeat("ab", 32) + "\nrules:\n- identities: [token:ci]\n  read: true\n", "tokens[0].identity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestDecisions: owner and network-instance patterns, "*" and anonymous.
func TestDecisions(t *testing.T) {
	p, err := Parse([]byte(head + `rules:
- identities: [cn:ops]
  owners: ["*"]
  networkInstances: ["*"]
  write: true
- identities: [uri:spiffe://x/ci]
  owners: [ci-*]
  networkInstances: [vpc-1, lab-*]
  write: true
- identities: ["*"]
  read: true
- identities: [cn:inj]
  owners: ["*/*"]
  networkInstances: ["*"]
  write: true
- identities: [anonymous]
  owners: [demo]
  networkInstances: [demo-vrf]
  write: true
`))
	if err != nil {
		t.Fatal(err)
	}
	ops := Principal{Names: []string{"cn:ops"}}
	ci := Principal{Names: []string{"uri:spiffe://x/ci", "cn:ci"}}
	anon := Principal{Names: []string{Anonymous}}
	for _, tc := range []struct {
		name  string
		pr    Principal
		owner string
		vrfs  []string
		ok    bool
	}{
		{"ops anything", ops, "whatever", []string{"any"}, true},
		{"ci own prefix", ci, "ci-pkg", []string{"vpc-1", "lab-7"}, true},
		{"ci other owner", ci, "prod-pkg", []string{"vpc-1"}, false},
		{"ci other vrf", ci, "ci-pkg", []string{"vpc-1", "prod"}, false},
		{"ci owner only", ci, "ci-x", nil, true},
		{"prefix is not a substring", ci, "xci-pkg", nil, false},
		{"porch owners", Principal{Names: []string{"cn:inj"}}, "repo/pkg", []string{"vpc-1"}, true},
		{"porch pattern needs a slash", Principal{Names: []string{"cn:inj"}}, "k8s", []string{"vpc-1"}, false},
		{"anonymous demo", anon, "demo", []string{"demo-vrf"}, true},
		{"anonymous other", anon, "ci-pkg", []string{"vpc-1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Write(tc.pr, tc.owner, tc.vrfs)
			if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrDenied) {
				t.Fatalf("Write = %v, want allowed %v", err, tc.ok)
			}
		})
	}
	if p.Read(ci) != nil || p.Read(anon) == nil {
		t.Error(`"*" reads must cover authenticated callers and not anonymous ones`)
	}
	if !p.AllNetworkInstances(ops, "x") || p.AllNetworkInstances(ci, "ci-x") {
		t.Error("AllNetworkInstances")
	}
	long := strings.Repeat("o", 10_000)
	if err := p.Write(ci, long, nil); err == nil || len(err.Error()) > 300 {
		t.Errorf("refusal of a long owner: %d bytes", len(err.Error()))
	}
}

// FuzzPattern: a pattern matches what the regular expression with ".*"
// for each "*" matches.
func FuzzPattern(f *testing.F) {
	f.Add("ci-*", "ci-pkg")
	f.Add("*", "")
	f.Add("*/*", "repo/pkg")
	f.Add("a*b*c", "aXbYbc")
	f.Add("exact", "exactly")
	f.Fuzz(func(t *testing.T, pat, s string) {
		if !utf8.ValidString(pat) || !utf8.ValidString(s) {
			t.Skip("the reference regexp needs UTF-8")
		}
		parts := strings.Split(pat, "*")
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		re := regexp.MustCompile("(?s)^" + strings.Join(parts, ".*") + "$")
		if got, want := pattern(pat).match(s), re.MatchString(s); got != want {
			t.Fatalf("pattern %q on %q: %v, want %v", pat, s, got, want)
		}
	})
}

// TestBlueprintPolicy: the policy the blueprint ships parses and grants
// each component its owners only.
func TestBlueprintPolicy(t *testing.T) {
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
	ctl := Principal{Names: []string{"cn:ipam-controller"}}
	inj := Principal{Names: []string{"cn:ipam-injector"}}
	if p.Write(ctl, "k8s", []string{"vpc-1"}) != nil || p.Write(ctl, "repo/pkg", []string{"vpc-1"}) == nil ||
		p.Write(inj, "repo/pkg", []string{"vpc-1"}) != nil || p.Write(inj, "k8s", []string{"vpc-1"}) == nil {
		t.Error("the blueprint's policy does not keep the controllers' and the injector's owners apart")
	}
	// The fronts: claims and blocks under k8s.<front>, each pool under its ID.
	for _, pool := range []string{"k8s.capi.inclusterippool.default.nodes", "k8s.metal3.ippool.default.pool1", "k8s.nvidia.ippool.kube-system.pool1"} {
		front := strings.Join(strings.Split(pool, ".")[:2], ".")
		if p.Write(ctl, front, []string{pool}) != nil || p.Write(ctl, pool, []string{pool}) != nil ||
			p.Write(inj, front, []string{pool}) == nil || p.Write(inj, pool, []string{pool}) == nil {
			t.Errorf("the blueprint's policy does not give %s's owners to the controllers alone", front)
		}
	}
}
