package nephioresource_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestCRDs: the generated CRDs have Nephio's names, scope, category and
// printer columns, and a status subresource.
func TestCRDs(t *testing.T) {
	crds := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, dir := range []string{"ipam/v1alpha1/crds", "vlan/v1alpha1/crds"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		require.NoError(t, err)
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			crd := &apiextensionsv1.CustomResourceDefinition{}
			require.NoError(t, yaml.UnmarshalStrict(b, crd), f)
			crds[crd.Spec.Names.Kind] = crd
		}
	}
	cols := func(names ...string) []string { return names }
	for kind, want := range map[string]struct {
		name    string
		columns []string
	}{
		"NetworkInstance": {"networkinstances.ipam.resource.nephio.org", cols("SYNC", "STATUS", "NETWORK-INSTANCE", "PREFIX0", "PREFIX1", "PREFIX2", "PREFIX3", "PREFIX4", "AGE")},
		"IPPrefix":        {"ipprefixes.ipam.resource.nephio.org", cols("SYNC", "STATUS", "NETWORK-INSTANCE", "KIND", "SUBNET", "PREFIX-REQ", "PREFIX-ALLOC", "AGE")},
		"IPClaim":         {"ipclaims.ipam.resource.nephio.org", cols("SYNC", "STATUS", "NETWORK-INSTANCE", "KIND", "AF", "PREFIXLENGTH", "PREFIX-REQ", "PREFIX-ALLOC", "GATEWAY", "AGE")},
		"VLANIndex":       {"vlanindices.vlan.resource.nephio.org", cols("SYNC", "STATUS", "AGE")},
		"VLANClaim":       {"vlanclaims.vlan.resource.nephio.org", cols("SYNC", "STATUS", "INDEX", "VLAN-REQ", "RANGE-REQ", "VLAN-ALLOC", "RANGE-ALLOC", "AGE")},
	} {
		crd := crds[kind]
		require.NotNil(t, crd, "no CRD of kind %s", kind)
		assert.Equal(t, want.name, crd.Name)
		assert.Equal(t, apiextensionsv1.NamespaceScoped, crd.Spec.Scope, kind)
		assert.Equal(t, []string{"nephio", "resource"}, crd.Spec.Names.Categories, kind)
		require.Len(t, crd.Spec.Versions, 1, kind)
		v := crd.Spec.Versions[0]
		assert.Equal(t, "v1alpha1", v.Name)
		assert.True(t, v.Served && v.Storage, kind)
		require.NotNil(t, v.Subresources, kind)
		assert.NotNil(t, v.Subresources.Status, kind)
		var got []string
		for _, c := range v.AdditionalPrinterColumns {
			got = append(got, c.Name)
		}
		assert.Equal(t, want.columns, got, kind)
	}
	require.Len(t, crds, 5)
	// The fields Nephio's packages use, with Nephio's JSON names.
	spec := crds["IPClaim"].Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties
	for _, f := range []string{"kind", "networkInstance", "addressFamily", "prefix", "prefixLength", "index", "createPrefix", "selector", "labels"} {
		assert.Contains(t, spec, f, "IPClaim spec.%s", f)
	}
	assert.Equal(t, `"network"`, string(spec["kind"].Default.Raw))
	st := crds["IPClaim"].Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties
	for _, f := range []string{"prefix", "gateway", "expiryTime", "conditions"} {
		assert.Contains(t, st, f, "IPClaim status.%s", f)
	}
	vspec := crds["VLANClaim"].Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties
	for _, f := range []string{"vlanIndex", "vlanID", "range", "selector", "labels"} {
		assert.Contains(t, vspec, f, "VLANClaim spec.%s", f)
	}
	vst := crds["VLANClaim"].Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties
	for _, f := range []string{"vlanID", "vlanRange", "conditions"} {
		assert.Contains(t, vst, f, "VLANClaim status.%s", f)
	}
}
