package ipamfn

import _ "embed"

// README is the function's documentation (functions/ipamfn/README.md); its
// mdtogo sections are what `ipam-fn --help` prints.
//
//go:embed README.md
var README []byte

// Metadata is the function's catalog metadata (metadata.yaml), printed
// with README by `ipam-fn --doc`.
//
//go:embed metadata.yaml
var Metadata []byte
