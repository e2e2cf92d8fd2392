// Package functions holds the package engine every client runs over a kpt
// package (package engine: ipam-fn, ipam-injector and ipamctl audit all
// call it), the KRM function ipam-fn (package ipamfn, binary cmd/ipam-fn)
// and its container image, and the audit of packages (package audit). Its tests render
// the golden kpt packages under testdata/ with the real kpt binary against
// a real ipam-server.
package functions
