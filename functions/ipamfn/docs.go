package ipamfn

import _ "embed"

// README is the function's documentation (functions/ipamfn/README.md); its
// mdtogo sections are what `ipam-fn --help` prints.
//
//go:embed README.md
var README []byte

// Metadata is the function's catalog metadata as committed
// (metadata.yaml): the entry of a development build, which
// CatalogMetadata versions for `ipam-fn --doc` and make catalog.
//
//go:embed metadata.yaml
var Metadata []byte
