package ipamfn_test

import (
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/nephio-project/ipam/functions/ipamfn"
)

func TestSourceRef(t *testing.T) {
	for _, tc := range []struct{ version, want string }{
		{"v0.3.0", "v0.3.0"},
		{"v0.3.0-dirty", "v0.3.0"},
		{"v0.3.0-5-g267ee2a", "267ee2a"},
		{"v0.3.0-rc.1-12-g267ee2a4b1-dirty", "267ee2a4b1"},
		{"267ee2a", "267ee2a"},
		{"267ee2a-dirty", "267ee2a"},
		{"v0.0.0-20261127143205-c06b4e8a1b2c", "c06b4e8a1b2c"},
		{"v0.3.1-0.20261127143205-c06b4e8a1b2c", "c06b4e8a1b2c"},
		{"dev", "main"},
		{"unknown", "main"},
		{"", "main"},
	} {
		if got := ipamfn.SourceRef(tc.version); got != tc.want {
			t.Errorf("SourceRef(%q) = %q, want %q", tc.version, got, tc.want)
		}
	}
}

func TestCatalogMetadata(t *testing.T) {
	for _, tc := range []struct {
		version, image, source, example string
	}{
		{"v0.3.0", "docker.io/library/ipam-fn:v0.3.0",
			"https://github.com/nephio-project/ipam/tree/v0.3.0/functions/ipamfn",
			"https://github.com/nephio-project/ipam/tree/v0.3.0/testdata/seed"},
		{"v0.3.0-5-g267ee2a", "docker.io/library/ipam-fn:v0.3.0-5-g267ee2a",
			"https://github.com/nephio-project/ipam/tree/267ee2a/functions/ipamfn",
			"https://github.com/nephio-project/ipam/tree/267ee2a/testdata/seed"},
		{"dev", "docker.io/library/ipam-fn:dev",
			"https://github.com/nephio-project/ipam/tree/main/functions/ipamfn",
			"https://github.com/nephio-project/ipam/tree/main/testdata/seed"},
	} {
		t.Run(tc.version, func(t *testing.T) {
			data, err := ipamfn.CatalogMetadata(tc.version)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(data), "# The kpt function catalog entry of ipam-fn "+tc.version+".\n") {
				t.Errorf("header: %q", strings.SplitN(string(data), "\n", 2)[0])
			}
			var m struct {
				Image              string   `yaml:"image"`
				Description        string   `yaml:"description"`
				SourceURL          string   `yaml:"sourceURL"`
				ExamplePackageURLs []string `yaml:"examplePackageURLs"`
			}
			if err := yaml.Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			if m.Image != tc.image || m.SourceURL != tc.source || len(m.ExamplePackageURLs) != 1 || m.ExamplePackageURLs[0] != tc.example {
				t.Errorf("image %q, sourceURL %q, examplePackageURLs %q; want %q, %q, [%q]",
					m.Image, m.SourceURL, m.ExamplePackageURLs, tc.image, tc.source, tc.example)
			}
			if m.Description == "" {
				t.Error("no description")
			}
		})
	}
}

func TestCatalogMetadataRefusesABadVersion(t *testing.T) {
	for _, v := range []string{"", "v1 2", "-x", "a/b"} {
		if _, err := ipamfn.CatalogMetadata(v); err == nil || !strings.Contains(err.Error(), "not an image tag") {
			t.Errorf("CatalogMetadata(%q) = %v, want an error naming it not an image tag", v, err)
		}
	}
}
