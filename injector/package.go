package injector

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/kptdev/krm-functions-sdk/go/fn"
)

// Annotations that tell the package engine which file an item came from
// (kpt sets the same ones); they are removed again before a file is
// written back.
const (
	annotationPath  = "internal.config.kubernetes.io/path"
	annotationIndex = "internal.config.kubernetes.io/index"
)

// packageFiles is the parsed content of a PackageRevisionResources: the
// YAML files as items, and what each file serialized to when read, so only
// files whose items changed are written back.
type packageFiles struct {
	items  fn.KubeObjects
	before map[string]string // file -> serialization when parsed
}

// isYAML reports whether a package file holds KRM resources.
func isYAML(name string) bool {
	base := path.Base(name)
	return base == "Kptfile" || strings.HasSuffix(base, ".yaml") || strings.HasSuffix(base, ".yml")
}

// parseFiles parses the YAML files of resources into items annotated with
// their path and index.
func parseFiles(resources map[string]string) (*packageFiles, error) {
	p := &packageFiles{before: map[string]string{}}
	for _, name := range slices.Sorted(maps.Keys(resources)) {
		if !isYAML(name) || strings.TrimSpace(resources[name]) == "" {
			continue
		}
		objs, err := fn.ParseKubeObjects([]byte(resources[name]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for i, o := range objs {
			if err := o.SetAnnotation(annotationPath, name); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if err := o.SetAnnotation(annotationIndex, strconv.Itoa(i)); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		p.items = append(p.items, objs...)
		p.before[name] = serialize(objs)
	}
	return p, nil
}

// byFile groups items by the file they came from, in index order.
func byFile(items fn.KubeObjects) map[string]fn.KubeObjects {
	files := map[string]fn.KubeObjects{}
	for _, it := range items {
		p := it.GetAnnotation(annotationPath)
		files[p] = append(files[p], it)
	}
	for _, objs := range files {
		slices.SortStableFunc(objs, func(a, b *fn.KubeObject) int {
			i, _ := strconv.Atoi(a.GetAnnotation(annotationIndex))
			j, _ := strconv.Atoi(b.GetAnnotation(annotationIndex))
			return i - j
		})
	}
	return files
}

// serialize renders objs as one multi-document file, without the path and
// index annotations. It does not modify objs.
func serialize(objs fn.KubeObjects) string {
	var docs []string
	for _, o := range objs {
		c := o.Copy()
		_ = c.RemoveAnnotation(annotationPath)
		_ = c.RemoveAnnotation(annotationIndex)
		_ = c.RemoveAnnotationsIfEmpty()
		docs = append(docs, strings.TrimSpace(c.String()))
	}
	return strings.Join(docs, "\n---\n") + "\n"
}

// changedFiles returns the files whose items now serialize differently
// from when they were parsed, with their new content (new files
// included), and the files none of whose items is left (an IPAddress
// whose claim left the package).
func (p *packageFiles) changedFiles() (out map[string]string, removed []string) {
	out = map[string]string{}
	files := byFile(p.items)
	for name, objs := range files {
		if s := serialize(objs); s != p.before[name] {
			out[name] = s
		}
	}
	for name := range p.before {
		if _, ok := files[name]; !ok {
			removed = append(removed, name)
		}
	}
	slices.Sort(removed)
	return out, removed
}

// kptfile returns the root Kptfile among the items, or nil.
func (p *packageFiles) kptfile() *fn.KubeObject {
	for _, it := range p.items {
		if it.IsGVK("kpt.dev", "v1", "Kptfile") && it.GetAnnotation(annotationPath) == "Kptfile" {
			return it
		}
	}
	return nil
}
