// Package functions holds the KRM functions of the IPAM: ipam-fn (package
// ipamfn, binary cmd/ipam-fn) and its container image. Its tests render
// the golden kpt packages under testdata/ with the real kpt binary against
// a real ipam-server.
package functions
