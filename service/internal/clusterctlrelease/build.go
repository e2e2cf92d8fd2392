package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Contract is the Cluster API contract the provider serves: the release
// series of every version this tool writes maps to it.
const Contract = "v1beta2"

// ProviderLabel is the label clusterctl finds a provider's objects by.
const ProviderLabel = "cluster.x-k8s.io/provider"

// Options say what to build.
type Options struct {
	// Blueprint is the kpt package the manifests are read from.
	Blueprint string
	// Out is the directory the artifacts are written under.
	Out string
	// Provider is the provider's clusterctl name (clusterctl init --ipam
	// <Provider>); its objects are labelled ipam-<Provider>.
	Provider string
	// Version is the release, a semantic version (v1.2.3, v0.0.0-abc):
	// the local repository's folder and the release series of metadata.yaml.
	Version string
	// Tag is the image tag of the components.
	Tag string
	// Registry is the canonical registry and path of the images (the
	// images make images builds, ipam-server:<tag>, are
	// docker.io/library/ipam-server:<tag>).
	Registry string
	// Skip names the objects of the blueprint left out of the components
	// (the Porch injector: no part of a Cluster API provider).
	Skip []string
}

// semver is a semantic version with a leading v, as clusterctl requires of
// a repository's versions.
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// providerName is what clusterctl accepts as a provider's name.
var providerName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,50}[a-z0-9])?$`)

// registry is a registry host with a path, lower case.
var registry = regexp.MustCompile(`^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+$`)

// imageTag is a container image tag.
var imageTag = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

func parseFlags(args []string, errOut io.Writer) (Options, error) {
	var o Options
	var skip string
	fs := flag.NewFlagSet("clusterctlrelease", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&o.Blueprint, "blueprint", "blueprints/ipam", "the kpt package the manifests are read from")
	fs.StringVar(&o.Out, "out", "bin/release", "the directory the artifacts are written under")
	fs.StringVar(&o.Provider, "provider", "nephio", "the provider's clusterctl name (clusterctl init --ipam NAME)")
	fs.StringVar(&o.Version, "version", "", "the release, a semantic version such as v0.1.0 (required)")
	fs.StringVar(&o.Tag, "tag", "", "the image tag (default: the version)")
	fs.StringVar(&o.Registry, "registry", "docker.io/library", "the canonical registry and path of the images")
	fs.StringVar(&skip, "skip", "ipam-injector", "comma-separated names of blueprint objects left out")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.Tag == "" {
		o.Tag = o.Version
	}
	if skip != "" {
		o.Skip = strings.Split(skip, ",")
	}
	return o, o.validate()
}

func (o Options) validate() error {
	switch {
	case !semver.MatchString(o.Version):
		return fmt.Errorf("--version %q: not a semantic version such as v0.1.0 (clusterctl requires one)", o.Version)
	case !providerName.MatchString(o.Provider):
		return fmt.Errorf("--provider %q: lower-case letters, digits and '-', at most 52 characters", o.Provider)
	case !imageTag.MatchString(o.Tag):
		return fmt.Errorf("--tag %q: not an image tag", o.Tag)
	case !registry.MatchString(o.Registry):
		return fmt.Errorf("--registry %q: not a canonical registry and path such as docker.io/library", o.Registry)
	case o.Blueprint == "" || o.Out == "":
		return errors.New("--blueprint and --out must not be empty")
	}
	return nil
}

// Build writes the artifacts of o and returns the files written.
func Build(o Options) ([]string, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	components, err := Components(o)
	if err != nil {
		return nil, err
	}
	metadata, err := Metadata(o.Version)
	if err != nil {
		return nil, err
	}
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(out, "ipam-"+o.Provider, o.Version)
	componentsFile := filepath.Join(dir, "ipam-components.yaml")
	config := fmt.Sprintf("# clusterctl configuration for the local repository next to it:\n"+
		"#   clusterctl generate provider --ipam %s --config %s\n"+
		"providers:\n  - name: %s\n    type: IPAMProvider\n    url: file://%s\n",
		o.Provider, filepath.Join(out, "clusterctl.yaml"), o.Provider, componentsFile)
	files := []struct {
		path string
		data []byte
	}{
		{componentsFile, components},
		{filepath.Join(dir, "metadata.yaml"), metadata},
		{filepath.Join(out, "clusterctl.yaml"), []byte(config)},
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	for _, f := range files {
		// Write aside and rename: a reader never sees half a file.
		tmp := f.path + ".tmp"
		if err := os.WriteFile(tmp, f.data, 0o644); err != nil {
			return written, err
		}
		if err := os.Rename(tmp, f.path); err != nil {
			return written, err
		}
		written = append(written, f.path)
	}
	return written, nil
}

// Metadata is the metadata.yaml of version: its release series serves
// Contract.
func Metadata(version string) ([]byte, error) {
	m := semver.FindStringSubmatch(version)
	if m == nil {
		return nil, fmt.Errorf("version %q: not a semantic version", version)
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return fmt.Appendf(nil, "# The Cluster API contract each release series of the provider serves.\n"+
		"apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\nkind: Metadata\nreleaseSeries:\n"+
		"  - major: %d\n    minor: %d\n    contract: %s\n", major, minor, Contract), nil
}

// Variable is the clusterctl variable a blueprint setter becomes, with the
// setter's value as its default: NEPHIO_IPAM_NAMESPACE for namespace,
// NEPHIO_IPAM_SERVER_IMAGE for ipam-server-image (provider nephio).
func Variable(provider, setter string) string {
	name := strings.TrimPrefix(setter, "ipam-")
	return strings.ToUpper(strings.ReplaceAll(provider+"_ipam_"+name, "-", "_"))
}

// setterComment is the kpt setter comment of a field.
var setterComment = regexp.MustCompile(`^#\s*kpt-set:\s*(.+)$`)

// setterRef is one ${name} of a setter comment.
var setterRef = regexp.MustCompile(`\$\{([A-Za-z0-9_-]+)\}`)

// Components is the ipam-components.yaml of o: every object of the
// blueprint but its local configuration and the skipped ones, with the
// provider label, the images at o.Tag, and every other kpt setter turned
// into a clusterctl variable that defaults to the setter's value.
func Components(o Options) ([]byte, error) {
	setters, err := readSetters(o.Blueprint)
	if err != nil {
		return nil, err
	}
	values := map[string]string{}
	for name, def := range setters {
		switch {
		case name == "tag":
			values[name] = o.Tag
		case strings.HasSuffix(name, "-image"):
			// clusterctl parses every image reference as a canonical
			// name, even where it leaves variables alone (generate
			// provider --describe, init --list-images): images are
			// literal, and clusterctl's own images: configuration
			// overrides them.
			values[name] = o.Registry + "/" + def
		default:
			values[name] = "${" + Variable(o.Provider, name) + ":=" + def + "}"
		}
	}
	files, err := manifestFiles(o.Blueprint)
	if err != nil {
		return nil, err
	}
	var namespaces, others []*yaml.RNode
	for _, f := range files {
		nodes, err := readNodes(f)
		if err != nil {
			return nil, err
		}
		for _, n := range nodes {
			if n.GetAnnotations()["config.kubernetes.io/local-config"] == "true" || slices.Contains(o.Skip, n.GetName()) {
				continue
			}
			what := fmt.Sprintf("%s: %s %s", f, n.GetKind(), n.GetName())
			if err := applySetters(n.YNode(), values, what); err != nil {
				return nil, err
			}
			labels := n.GetLabels()
			labels[ProviderLabel] = "ipam-" + o.Provider
			if err := n.SetLabels(labels); err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			if n.GetKind() == "Namespace" {
				namespaces = append(namespaces, n)
			} else {
				others = append(others, n)
			}
		}
	}
	if len(namespaces) != 1 {
		return nil, fmt.Errorf("%s: %d Namespace objects; clusterctl needs exactly one", o.Blueprint, len(namespaces))
	}
	var buf bytes.Buffer
	buf.WriteString("# The Cluster API IPAM provider " + o.Provider + " (clusterctl init --ipam " + o.Provider + "), built from the kpt blueprint.\n")
	if err := (kio.ByteWriter{Writer: &buf}).Write(append(namespaces, others...)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readSetters reads the setters.yaml of the blueprint.
func readSetters(dir string) (map[string]string, error) {
	nodes, err := readNodes(filepath.Join(dir, "setters.yaml"))
	if err != nil {
		return nil, err
	}
	if len(nodes) != 1 {
		return nil, fmt.Errorf("%s: want one ConfigMap of setters, got %d objects", filepath.Join(dir, "setters.yaml"), len(nodes))
	}
	return nodes[0].GetDataMap(), nil
}

// manifestFiles lists the blueprint's YAML files, the CRDs last, in name
// order: the Kptfile and setters.yaml are its local configuration, the
// inventory (resourcegroup.yaml) and the trial Secrets (trial-secrets.yaml)
// belong to one installation.
func manifestFiles(dir string) ([]string, error) {
	var files []string
	for _, glob := range []string{"*.yaml", filepath.Join("crds", "*.yaml")} {
		m, err := filepath.Glob(filepath.Join(dir, glob))
		if err != nil {
			return nil, err
		}
		slices.Sort(m)
		for _, f := range m {
			switch filepath.Base(f) {
			case "setters.yaml", "resourcegroup.yaml", "trial-secrets.yaml":
				continue
			}
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no manifests", dir)
	}
	return files, nil
}

func readNodes(path string) ([]*yaml.RNode, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	nodes, err := (&kio.ByteReader{Reader: bytes.NewReader(data), OmitReaderAnnotations: true}).Read()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return nodes, nil
}

// applySetters sets every field of the tree under n that carries a kpt
// setter comment to the comment's template with values filled in, and
// drops the comment. A setter without a value is an error naming what.
func applySetters(n *yaml.Node, values map[string]string, what string) error {
	if n.Kind == yaml.ScalarNode {
		m := setterComment.FindStringSubmatch(strings.TrimSpace(n.LineComment))
		if m == nil {
			return nil
		}
		var missing []string
		v := setterRef.ReplaceAllStringFunc(m[1], func(ref string) string {
			name := setterRef.FindStringSubmatch(ref)[1]
			val, ok := values[name]
			if !ok {
				missing = append(missing, name)
			}
			return val
		})
		if len(missing) > 0 {
			return fmt.Errorf("%s: setter %q has no value in setters.yaml", what, missing[0])
		}
		n.Value, n.Tag, n.Style, n.LineComment = strings.TrimSpace(v), "!!str", 0, ""
		return nil
	}
	for _, c := range n.Content {
		if err := applySetters(c, values, what); err != nil {
			return err
		}
	}
	return nil
}
