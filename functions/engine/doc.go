// Package engine is the package engine that every client of the IPAM runs
// over a kpt package: the KRM function ipam-fn (functions/ipamfn), the
// Porch injector ipam-injector (package injector) and ipamctl audit
// (functions/audit) all call the same Process.
//
// It synchronizes the IPAM resources of a package with ipam-server: it
// reads the package's NetworkInstances, IPPrefixes and IPAllocations
// (ipam.nephio.org/v1alpha1), its pools and their Cluster API
// IPAddressClaims and Metal3 IPClaims into their typed form, makes one
// Sync call through the shared translation (package translate), and
// writes the answers into their status and into one condition per claim
// of the root Kptfile (SetKptfileCondition is its one writer of Kptfile
// conditions, which keeps what it does not own). Each client supplies its
// own Options.
//
// The layout reads in one direction: api (types, proto, translation) →
// client (service/client) → the package engine (this package) or the
// controllers (service/fronts/controllers) → the binaries (ipam-fn,
// ipam-injector, ipamctl, ipam-controller). The engine carries no part of
// the allocation core: it speaks to ipam-server through the API, and
// shares the core's words through package vocab.
package engine
