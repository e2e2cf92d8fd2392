package ipamfn

import (
	"bytes"
	"fmt"
	"regexp"
	"runtime/debug"
	"strings"
)

// Version is ipam-fn's version, the tag of its image: make build and make
// images set it from git describe. Empty means the module version of the
// build, if any, else "dev".
var Version = ""

// DevVersion is the version of a build nobody versioned: its image is
// ipam-fn:dev and its source the main branch.
const DevVersion = "dev"

// BuildVersion is Version, or the module version of the build, or
// DevVersion.
func BuildVersion() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return DevVersion
}

var (
	// describeAfterTag is git describe's <tag>-<n>-g<commit>.
	describeAfterTag = regexp.MustCompile(`^.+-[0-9]+-g([0-9a-f]{7,40})$`)
	// commitOnly is git describe --always without a tag: the commit.
	commitOnly = regexp.MustCompile(`^[0-9a-f]{7,40}$`)
	// pseudoVersion is a Go module pseudo-version, ending in its commit.
	pseudoVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+-(?:.*\.)?[0-9]{14}-([0-9a-f]{12})$`)
)

// SourceRef is the Git ref the source of version is at: the commit of a
// build between tags (git describe's v1.2.3-4-gabcdef0, a bare commit, a
// Go pseudo-version), the tag itself otherwise, "main" for DevVersion and
// for "unknown" (make's version outside Git). A -dirty build names the
// commit it was built on.
func SourceRef(version string) string {
	v := strings.TrimSuffix(version, "-dirty")
	if m := pseudoVersion.FindStringSubmatch(v); m != nil {
		return m[1]
	}
	if m := describeAfterTag.FindStringSubmatch(v); m != nil {
		return m[1]
	}
	switch {
	case commitOnly.MatchString(v):
		return v
	case v == "" || v == DevVersion || v == "unknown":
		return "main"
	}
	return v
}

// Placeholders of the committed metadata.yaml that CatalogMetadata
// versions.
const (
	devImage   = "/ipam-fn:" + DevVersion + "\n"
	mainSource = "/tree/main/"
)

// imageTag is what a container image tag may be.
var imageTag = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// CatalogMetadata is the catalog entry (Metadata) of ipam-fn at version:
// its image tagged version, its source and example package at
// SourceRef(version).
func CatalogMetadata(version string) ([]byte, error) {
	if !imageTag.MatchString(version) {
		return nil, fmt.Errorf("version %q: not an image tag", version)
	}
	if n := bytes.Count(Metadata, []byte(devImage)); n != 1 {
		return nil, fmt.Errorf("metadata.yaml: %d images %q, want 1", n, strings.TrimSpace(devImage))
	}
	if n := bytes.Count(Metadata, []byte(mainSource)); n < 2 {
		return nil, fmt.Errorf("metadata.yaml: %d URLs at %q, want the source and an example package", n, mainSource)
	}
	// The committed file's header speaks of the committed file.
	body := Metadata
	for bytes.HasPrefix(body, []byte("#")) {
		_, body, _ = bytes.Cut(body, []byte("\n"))
	}
	out := fmt.Appendf(nil, "# The kpt function catalog entry of ipam-fn %s.\n", version)
	out = append(out, bytes.Replace(body, []byte(devImage), []byte("/ipam-fn:"+version+"\n"), 1)...)
	return bytes.ReplaceAll(out, []byte(mainSource), []byte("/tree/"+SourceRef(version)+"/")), nil
}
