// Package peerbench runs the same workloads against this project's
// allocation core and against the IPAM libraries users come from, in one
// `go test -bench` run, so that the numbers compare: the core's API
// against metal-stack/go-ipam (memory backend) and the routing table
// Nephio's backend allocates with (hansthienpondt/nipam, which rebuilds
// the free set on each claim); the core's data structures alone against
// go4.org/netipx IPSet free-space search (the technique of Nephio's
// in-cluster backend, its free set kept between calls) and the bitmap of
// Kubernetes' service-IP allocator.
//
// It is a module of its own so that the peers never become dependencies
// of the product. `make bench-peers` runs it and prints the table
// (cmd/peertable).
package peerbench
