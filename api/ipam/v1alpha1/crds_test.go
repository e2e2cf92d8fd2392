package v1alpha1

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// column is the part of a printer column a user sees.
type column struct {
	name, jsonPath string
	priority       int32
}

var (
	syncedCol = column{"SYNC", ".status.conditions[?(@.type=='Synced')].status", 0}
	readyCol  = column{"STATUS", ".status.conditions[?(@.type=='Ready')].status", 0}
	ageCol    = column{"AGE", ".metadata.creationTimestamp", 0}
)

// loadCRDs reads every generated CRD, keyed by kind.
func loadCRDs(t *testing.T) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("crds", "*.yaml"))
	require.NoError(t, err)
	crds := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		crd := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(t, yaml.UnmarshalStrict(b, crd), f)
		crds[crd.Spec.Names.Kind] = crd
	}
	require.Len(t, crds, 5, "expected one CRD per kind in crds/, got %v", files)
	return crds
}

// version returns the single served and stored version of crd.
func version(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinitionVersion {
	t.Helper()
	require.Len(t, crd.Spec.Versions, 1)
	v := &crd.Spec.Versions[0]
	require.Equal(t, GroupVersion.Version, v.Name)
	require.True(t, v.Served)
	require.True(t, v.Storage)
	require.NotNil(t, v.Schema)
	require.NotNil(t, v.Schema.OpenAPIV3Schema)
	return v
}

// prop walks the schema along property names; "[]" steps into list items.
func prop(t *testing.T, s apiextensionsv1.JSONSchemaProps, path ...string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for i, p := range path {
		if p == "[]" {
			require.NotNil(t, s.Items, "no items at %v", path[:i+1])
			require.NotNil(t, s.Items.Schema, "no items schema at %v", path[:i+1])
			s = *s.Items.Schema
			continue
		}
		next, ok := s.Properties[p]
		require.True(t, ok, "no property %v", path[:i+1])
		s = next
	}
	return s
}

func rules(s apiextensionsv1.JSONSchemaProps) map[string]string {
	m := map[string]string{}
	for _, r := range s.XValidations {
		m[r.Rule] = r.Message
	}
	return m
}

func enum(t *testing.T, s apiextensionsv1.JSONSchemaProps) []string {
	t.Helper()
	var out []string
	for _, e := range s.Enum {
		var v string
		require.NoError(t, yaml.Unmarshal(e.Raw, &v))
		out = append(out, v)
	}
	return out
}

func TestCRDsCommon(t *testing.T) {
	for kind, crd := range loadCRDs(t) {
		t.Run(kind, func(t *testing.T) {
			assert.Equal(t, GroupVersion.Group, crd.Spec.Group)
			scope := apiextensionsv1.NamespaceScoped
			if kind == KindGlobalInClusterIPPool {
				scope = apiextensionsv1.ClusterScoped
			}
			assert.Equal(t, scope, crd.Spec.Scope)
			assert.Contains(t, crd.Spec.Names.Categories, "ipam", "kubectl get ipam must list %s", kind)
			v := version(t, crd)
			require.NotNil(t, v.Subresources)
			assert.NotNil(t, v.Subresources.Status, "status subresource")

			seen := map[string]bool{}
			for _, c := range v.AdditionalPrinterColumns {
				assert.False(t, seen[c.Name], "duplicate printer column %s", c.Name)
				seen[c.Name] = true
			}

			conds := prop(t, *v.Schema.OpenAPIV3Schema, "status", "conditions")
			require.NotNil(t, conds.XListType)
			assert.Equal(t, "map", *conds.XListType)
			assert.Equal(t, []string{"type"}, conds.XListMapKeys)
		})
	}
}

// poolCols are the printer columns of both Cluster API pools.
var poolCols = []column{syncedCol, readyCol,
	{"ADDRESSES", ".spec.addresses", 0},
	{"TOTAL", ".status.ipAddresses.total", 0},
	{"FREE", ".status.ipAddresses.free", 0},
	{"USED", ".status.ipAddresses.used", 0},
	ageCol,
}

func TestCRDPrinterColumns(t *testing.T) {
	want := map[string][]column{
		"NetworkInstance": {syncedCol, readyCol, ageCol},
		"IPPrefix": {
			syncedCol, readyCol,
			{"NETWORK", ".spec.networkInstance", 0},
			{"KIND", ".spec.kind", 0},
			{"NETWORK-NAME", ".spec.network", 0},
			{"PREFIX-REQ", ".spec.prefix", 0},
			{"PREFIX-ALLOC", ".status.prefix", 0},
			{"GATEWAY", ".status.gateway", 1},
			ageCol,
		},
		"IPAllocation": {
			syncedCol, readyCol,
			{"NETWORK", ".spec.networkInstance", 1},
			{"KIND", ".spec.kind", 0},
			{"AF", ".spec.addressFamily", 0},
			{"PREFIXLENGTH", ".spec.prefixLength", 0},
			{"PREFIX-REQ", ".spec.prefix", 0},
			{"PREFIX-ALLOC", ".status.prefix", 0},
			{"GATEWAY", ".status.gateway", 0},
			ageCol,
		},
		KindInClusterIPPool:       poolCols,
		KindGlobalInClusterIPPool: poolCols,
	}
	for kind, crd := range loadCRDs(t) {
		t.Run(kind, func(t *testing.T) {
			var got []column
			for _, c := range version(t, crd).AdditionalPrinterColumns {
				got = append(got, column{c.Name, c.JSONPath, c.Priority})
			}
			assert.Equal(t, want[kind], got)
		})
	}
}

func TestCRDPrefixKindEnum(t *testing.T) {
	kinds := []string{string(PrefixKindAggregate), string(PrefixKindNetwork), string(PrefixKindPool), string(PrefixKindLoopback)}
	crds := loadCRDs(t)
	for _, kind := range []string{"IPPrefix", "IPAllocation"} {
		t.Run(kind, func(t *testing.T) {
			s := prop(t, *version(t, crds[kind]).Schema.OpenAPIV3Schema, "spec", "kind")
			assert.Equal(t, kinds, enum(t, s))
			require.NotNil(t, s.Default, "spec.kind default")
			assert.JSONEq(t, `"network"`, string(s.Default.Raw))
		})
	}
}

func TestCRDCIDRRules(t *testing.T) {
	crds := loadCRDs(t)
	for _, tc := range []struct {
		kind string
		path []string
	}{
		{"NetworkInstance", []string{"spec", "prefixes", "[]", "prefix"}},
		{"IPPrefix", []string{"spec", "prefix"}},
		{"IPAllocation", []string{"spec", "prefix"}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			s := prop(t, *version(t, crds[tc.kind]).Schema.OpenAPIV3Schema, tc.path...)
			assert.Contains(t, rules(s), "isCIDR(self)")
			require.NotNil(t, s.MaxLength, "a bounded length keeps the CEL cost estimate low")
		})
	}
}

func TestCRDIPPrefixRequired(t *testing.T) {
	spec := prop(t, *version(t, loadCRDs(t)["IPPrefix"]).Schema.OpenAPIV3Schema, "spec")
	assert.ElementsMatch(t, []string{"networkInstance", "prefix"}, spec.Required)
}

func TestCRDIPAllocationValidation(t *testing.T) {
	root := *version(t, loadCRDs(t)["IPAllocation"]).Schema.OpenAPIV3Schema
	spec := prop(t, root, "spec")
	assert.Empty(t, spec.Required, "every IPAllocation spec field is optional")

	kind := prop(t, root, "spec", "kind")
	assert.Equal(t, "aggregates are declared with IPPrefix, not allocated", rules(kind)["self != 'aggregate'"])

	pl := prop(t, root, "spec", "prefixLength")
	require.NotNil(t, pl.Minimum)
	require.NotNil(t, pl.Maximum)
	assert.Equal(t, 0.0, *pl.Minimum)
	assert.Equal(t, 128.0, *pl.Maximum)
	assert.Contains(t, rules(spec),
		"!has(self.prefixLength) || !has(self.addressFamily) || self.addressFamily != 'ipv4' || self.prefixLength <= 32")

	af := prop(t, root, "spec", "addressFamily")
	assert.Equal(t, []string{string(AddressFamilyIPv4), string(AddressFamilyIPv6)}, enum(t, af))

	prop(t, root, "spec", "selector", "matchLabels")
	prop(t, root, "status", "gateway")
	prop(t, root, "status", "prefix")
}

func TestCRDNetworkInstanceStatus(t *testing.T) {
	root := *version(t, loadCRDs(t)["NetworkInstance"]).Schema.OpenAPIV3Schema
	assert.Empty(t, prop(t, root, "spec").Required, "spec may be empty")
	u := prop(t, root, "status", "utilization", "[]")
	assert.ElementsMatch(t, []string{"prefix", "used", "total"}, u.Required)
}

func TestAddToScheme(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, AddToScheme(s))
	for _, kind := range []string{"NetworkInstance", "NetworkInstanceList", "IPPrefix", "IPPrefixList", "IPAllocation", "IPAllocationList"} {
		assert.True(t, s.Recognizes(GroupVersion.WithKind(kind)), kind)
	}
}
