// Package authz is ipam-server's authorization policy: which
// authenticated identities may change which owners' objects in which
// network instances, and which may read. It knows nothing of gRPC: the
// server turns a call's client certificate and bearer token into a
// Principal and asks the Policy.
//
// A policy file (ipam-server --authz-policy) reads:
//
//	apiVersion: ipam.nephio.org/v1alpha1
//	kind: AuthorizationPolicy
//	tokens:                      # bearer tokens, by their SHA-256 (hex)
//	- identity: ci
//	  sha256: 2bb80d53...
//	replicas: [cn:ipam-server]   # the certificates of ipam-server replicas
//	rules:
//	- identities: [cn:ipam-controller]
//	  owners: [ipam-controller]  # names; * matches any characters
//	  networkInstances: ["*"]
//	  write: true
//	  read: true
//	- identities: [token:ci]
//	  owners: [ci-*]
//	  networkInstances: [vpc-1]
//	  write: true
//
// Identities are named by kind: cn:<certificate common name>,
// dns:<DNS SAN>, uri:<URI SAN> (a SPIFFE id, say), token:<identity of a
// token>; "anonymous" is a caller with neither a certificate nor a token,
// and "*" in a rule matches every authenticated caller. A call is allowed
// when one rule matches one of the caller's names and grants it; nothing
// else is.
//
// Replicas are the certificate identities of ipam-server's own replicas
// (see Policy.Replica): a replica relays its callers' changes to the
// replica holding the write lead and states who each caller is, and only
// a replica's statement is believed.
package authz

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/nephio-project/ipam/service/ipam"
)

// The policy file's apiVersion and kind.
const (
	APIVersion = "ipam.nephio.org/v1alpha1"
	Kind       = "AuthorizationPolicy"
)

// Anonymous names a caller with neither a verified certificate nor a
// token.
const Anonymous = "anonymous"

// MaxPolicySize bounds the policy file.
const MaxPolicySize = 1 << 20

// ErrDenied is wrapped by every refusal. It is the core's ipam.ErrDenied,
// so a refusal the core reports for a policy's decision is one too.
var ErrDenied = ipam.ErrDenied

// ErrUnknownToken is returned for a bearer token the policy does not know.
var ErrUnknownToken = errors.New("unknown bearer token")

// file is the policy file as written.
type file struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Tokens     []tokenSpec `json:"tokens"`
	Replicas   []string    `json:"replicas"`
	Rules      []ruleSpec  `json:"rules"`
}

type tokenSpec struct {
	Identity string `json:"identity"`
	SHA256   string `json:"sha256"`
}

type ruleSpec struct {
	Identities       []string `json:"identities"`
	Owners           []string `json:"owners"`
	NetworkInstances []string `json:"networkInstances"`
	Write            bool     `json:"write"`
	Read             bool     `json:"read"`
}

// Policy is a parsed policy.
type Policy struct {
	tokens   []token
	replicas []string // certificate identities of ipam-server replicas
	rules    []rule
}

type token struct {
	identity string
	sum      [sha256.Size]byte
}

type rule struct {
	identities []string
	owners     []pattern
	vrfs       []pattern
	write      bool
	read       bool
}

// pattern matches names: "*" matches any sequence of characters ("/"
// included), every other character itself; "*" alone matches every name,
// "ci-*" the names starting with ci-, "*/*" Porch's repository/package
// owners.
type pattern string

func (p pattern) match(s string) bool { return glob(string(p), s) }

// glob matches s against p, whose "*" matches any sequence.
func glob(p, s string) bool {
	star, mark := -1, 0
	i, j := 0, 0
	for j < len(s) {
		switch {
		case i < len(p) && p[i] == '*':
			star, mark = i, j
			i++
		case i < len(p) && p[i] == s[j]:
			i++
			j++
		case star >= 0:
			i, mark = star+1, mark+1
			j = mark
		default:
			return false
		}
	}
	for i < len(p) && p[i] == '*' {
		i++
	}
	return i == len(p)
}

// all reports whether p matches every name.
func (p pattern) all() bool { return strings.Trim(string(p), "*") == "" && p != "" }

// Load reads and parses a policy file.
func Load(path string) (*Policy, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("authorization policy: %w", err)
	}
	if st.Size() > MaxPolicySize {
		return nil, fmt.Errorf("authorization policy %s: %d bytes exceed the limit of %d", path, st.Size(), MaxPolicySize)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("authorization policy: %w", err)
	}
	p, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("authorization policy %s: %w", path, err)
	}
	return p, nil
}

// Parse parses a policy; its errors name the field at fault.
func Parse(b []byte) (*Policy, error) {
	var f file
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, err
	}
	if f.APIVersion != APIVersion || f.Kind != Kind {
		return nil, fmt.Errorf("apiVersion/kind: %q/%q, want %s/%s", f.APIVersion, f.Kind, APIVersion, Kind)
	}
	p := &Policy{}
	seen := map[string]bool{}
	for i, t := range f.Tokens {
		field := fmt.Sprintf("tokens[%d]", i)
		if t.Identity == "" || strings.ContainsAny(t.Identity, " *\t\n") {
			return nil, fmt.Errorf("%s.identity: %q is not a name (no spaces or *)", field, t.Identity)
		}
		sum, err := hex.DecodeString(t.SHA256)
		if err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("%s.sha256: not the 64 hex digits of a SHA-256 (sha256sum of the token file, without its newline)", field)
		}
		if seen[t.SHA256] {
			return nil, fmt.Errorf("%s.sha256: the same token is listed twice", field)
		}
		seen[t.SHA256] = true
		tk := token{identity: "token:" + t.Identity}
		copy(tk.sum[:], sum)
		p.tokens = append(p.tokens, tk)
	}
	for i, id := range f.Replicas {
		if err := checkReplica(id); err != nil {
			return nil, fmt.Errorf("replicas[%d]: %w", i, err)
		}
		p.replicas = append(p.replicas, id)
	}
	if len(f.Rules) == 0 {
		return nil, errors.New("rules: a policy without rules refuses every call; list at least one")
	}
	for i, r := range f.Rules {
		field := fmt.Sprintf("rules[%d]", i)
		if len(r.Identities) == 0 {
			return nil, fmt.Errorf("%s.identities: at least one identity is required", field)
		}
		if !r.Write && !r.Read {
			return nil, fmt.Errorf("%s: grants nothing; set write: true, read: true or both", field)
		}
		if r.Write && (len(r.Owners) == 0 || len(r.NetworkInstances) == 0) {
			return nil, fmt.Errorf("%s: write needs owners and networkInstances (use [\"*\"] for all)", field)
		}
		var pr rule
		pr.write, pr.read = r.Write, r.Read
		for j, id := range r.Identities {
			if err := checkIdentity(id); err != nil {
				return nil, fmt.Errorf("%s.identities[%d]: %w", field, j, err)
			}
			pr.identities = append(pr.identities, id)
		}
		for j, o := range r.Owners {
			if o == "" {
				return nil, fmt.Errorf("%s.owners[%d]: empty", field, j)
			}
			pr.owners = append(pr.owners, pattern(o))
		}
		for j, v := range r.NetworkInstances {
			if v == "" {
				return nil, fmt.Errorf("%s.networkInstances[%d]: empty", field, j)
			}
			pr.vrfs = append(pr.vrfs, pattern(v))
		}
		p.rules = append(p.rules, pr)
	}
	return p, nil
}

// checkIdentity accepts "*", "anonymous" and kind:name identities.
func checkIdentity(id string) error {
	if id == "*" || id == Anonymous {
		return nil
	}
	kind, name, ok := strings.Cut(id, ":")
	if !ok || name == "" {
		return fmt.Errorf("%q: write cn:NAME, dns:NAME, uri:URI, token:NAME, anonymous or *", id)
	}
	switch kind {
	case "cn", "dns", "uri", "token":
		return nil
	}
	return fmt.Errorf("%q: unknown kind %q (cn, dns, uri or token)", id, kind)
}

// Principal is an authenticated caller: every name it goes by (its
// certificate's common name and SANs, its token's identity), or
// Anonymous alone.
type Principal struct {
	Names []string
}

// String is the name a refusal quotes: the first name.
func (p Principal) String() string {
	if len(p.Names) == 0 {
		return Anonymous
	}
	return p.Names[0]
}

// anonymous reports whether the caller presented nothing.
func (p Principal) anonymous() bool {
	return len(p.Names) == 0 || len(p.Names) == 1 && p.Names[0] == Anonymous
}

// Token returns the identity of a bearer token, or ErrUnknownToken.
func (p *Policy) Token(tok string) (string, error) {
	sum := sha256.Sum256([]byte(tok))
	found := ""
	for _, t := range p.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
			found = t.identity
		}
	}
	if found == "" {
		return "", ErrUnknownToken
	}
	return found, nil
}

// matches reports whether r applies to pr.
func (r *rule) matches(pr Principal) bool {
	for _, id := range r.identities {
		switch {
		case id == "*": // every authenticated caller
			if !pr.anonymous() {
				return true
			}
		case id == Anonymous:
			if pr.anonymous() {
				return true
			}
		case slices.Contains(pr.Names, id):
			return true
		}
	}
	return false
}

func anyMatch(ps []pattern, s string) bool {
	for _, p := range ps {
		if p.match(s) {
			return true
		}
	}
	return false
}

// Read allows or refuses reading (Get, List, Watch, Tree).
func (p *Policy) Read(pr Principal) error {
	for i := range p.rules {
		if r := &p.rules[i]; r.read && r.matches(pr) {
			return nil
		}
	}
	return fmt.Errorf("%w: identity %s may not read", ErrDenied, quote(pr.String()))
}

// Write allows or refuses a change of owner's objects in each of vrfs.
func (p *Policy) Write(pr Principal, owner string, vrfs []string) error {
	for _, v := range vrfs {
		if !p.writes(pr, owner, v) {
			return fmt.Errorf("%w: identity %s may not change owner %s in network instance %s",
				ErrDenied, quote(pr.String()), quote(owner), quote(v))
		}
	}
	if len(vrfs) == 0 && !p.ownerGranted(pr, owner) {
		return fmt.Errorf("%w: identity %s may not change owner %s", ErrDenied, quote(pr.String()), quote(owner))
	}
	return nil
}

// AllNetworkInstances reports whether pr may change owner's objects in
// every network instance, so the caller need not list the ones an owner
// holds objects in.
func (p *Policy) AllNetworkInstances(pr Principal, owner string) bool {
	for i := range p.rules {
		r := &p.rules[i]
		if r.write && r.matches(pr) && anyMatch(r.owners, owner) && slices.ContainsFunc(r.vrfs, pattern.all) {
			return true
		}
	}
	return false
}

func (p *Policy) writes(pr Principal, owner, vrf string) bool {
	for i := range p.rules {
		if r := &p.rules[i]; r.write && r.matches(pr) && anyMatch(r.owners, owner) && anyMatch(r.vrfs, vrf) {
			return true
		}
	}
	return false
}

func (p *Policy) ownerGranted(pr Principal, owner string) bool {
	for i := range p.rules {
		if r := &p.rules[i]; r.write && r.matches(pr) && anyMatch(r.owners, owner) {
			return true
		}
	}
	return false
}

// quote renders a name for a refusal, cut to ipam.MaxQuoted bytes.
func quote(s string) string { return ipam.Quote(s) }
