// Package injector is ipam-injector as a library: a controller-runtime
// controller that watches Porch PackageRevisions and, for every Draft
// holding IPAM resources (ipam.nephio.org/v1alpha1 NetworkInstance,
// IPPrefix, IPAllocation, and the other kinds the package engine serves,
// Nephio's IPClaims and VLANClaims among them), runs the same Sync as the ipam-fn KRM function
// (engine.Process) with owner "<repository>/<package>", writes the filled
// status back into the revision's resources only when something changed,
// and sets the Kptfile condition ConditionType that a readiness gate can
// require before approval. A periodic garbage collection releases the
// allocations of packages that no longer have any PackageRevision.
package injector
