package engine

import (
	"strings"
	"testing"

	"github.com/kptdev/krm-functions-sdk/go/fn"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	"github.com/nephio-project/ipam/api/translate"
)

// TestSameTranslationAsTheControllers: an IPAllocation in a package (read
// by ipam-fn and the injector through this package) and the same object
// served by the API server (read by the controllers as a typed object)
// make the same request, or the same error on the same field.
func TestSameTranslationAsTheControllers(t *testing.T) {
	const head = "apiVersion: ipam.nephio.org/v1alpha1\nkind: IPAllocation\nmetadata:\n  name: a\n  namespace: ns\n"
	for _, tc := range []struct{ name, doc string }{
		{"selector and labels", head + "  labels: {app: x, tier: meta}\nspec:\n  kind: network\n  labels: {tier: spec}\n" +
			"  selector:\n    matchLabels: {nephio.org/network-instance: vpc-1}\n"},
		{"pool with a length and family", head + "spec:\n  kind: pool\n  prefixLength: 16\n  addressFamily: ipv6\n  networkInstance: vpc-2\n"},
		{"static prefix", head + "spec:\n  kind: loopback\n  prefix: 10.255.0.1/32\n"},
		{"no spec", head},
		{"matchExpressions", head + "spec:\n  selector:\n    matchLabels: {a: b}\n    matchExpressions:\n    - {key: x, operator: Exists}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := fn.ParseKubeObjects([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			req, _, _, results := buildRequest(Options{Owner: "o"}, objs)

			var typed ipamv1alpha1.IPAllocation
			if err := yaml.Unmarshal([]byte(tc.doc), &typed); err != nil {
				t.Fatal(err)
			}
			want, werr := translate.Allocation("o", &typed)
			if werr != nil {
				fe := werr.(*translate.FieldError)
				if len(results) != 1 || results[0].Field == nil || results[0].Field.Path != fe.Field ||
					!strings.HasPrefix(results[0].Message, fe.Msg) || len(req.GetAllocations()) != 0 {
					t.Fatalf("package: results %v; controllers: %v", results, werr)
				}
				return
			}
			if len(results) != 0 || len(req.GetAllocations()) != 1 || !proto.Equal(req.GetAllocations()[0], want) {
				t.Fatalf("package: %v %v; controllers: %v", req.GetAllocations(), results, want)
			}
		})
	}
}

// TestUnknownSpecFieldIsAWarning: a typo is reported without failing the
// run, as the API server warns and drops the field.
func TestUnknownSpecFieldIsAWarning(t *testing.T) {
	objs, err := fn.ParseKubeObjects([]byte("apiVersion: ipam.nephio.org/v1alpha1\nkind: IPAllocation\nmetadata:\n  name: a\n" +
		"spec:\n  kind: pool\n  prefixLenght: 16\n"))
	if err != nil {
		t.Fatal(err)
	}
	req, _, _, results := buildRequest(Options{Owner: "o"}, objs)
	if len(req.GetAllocations()) != 1 || len(results) != 1 || results[0].Severity != fn.Warning ||
		!strings.Contains(results[0].Message, `unknown field "prefixLenght" is ignored`) || failed(results) != nil {
		t.Fatalf("request %v, results %v", req, results)
	}
}
