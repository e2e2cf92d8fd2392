// Package nodeipam is the allocation engine of ipam-node, NVIDIA's node
// daemon served by the project's allocation core: it hands the addresses
// of the node's block of each pool (an IPPool's status allocation for the
// node, a CIDRPool's prefix for the node) to containers, and persists them
// in the project's file store before it answers.
//
// # In the allocation core
//
// Each pool (type and name: an IPPool and a CIDRPool may share a name) is a
// network instance of its own, "ippool.<name>" or "cidrpool.<name>". The
// network of the node's block (the IPPool's subnet, the CIDRPool node
// prefix) is a network prefix whose exclusions cover every address but
// the block's (minus the pool's exclusions), the gateway and the
// addresses still held: the core's lowest-free search then hands out the
// block's addresses only. The gateway is a one-address range, handed out
// to the requests that select it (allocate_default_gateway) only.
//
// A container's interface is an owner of the core, "<ifname>/<container
// id>", with one allocation per pool (namespace: the pool type, name: the
// pool's name) labelled with the pod's metadata and its creation time. A
// call naming two pools is one Sync of that owner: both or neither.
//
// # Block changes
//
// When the block changes, the network is set up again: allocations outside
// the new block stay (the pods still use them) and are reported, and their
// addresses are never handed out again; releasing one sets the network up
// again. A network the block left (the subnet or the node's prefix
// changed) stays while it holds allocations, with everything else
// excluded. A new network that overlaps one still held cannot be set up:
// the pool hands out nothing new until those allocations are released.
//
// The last known blocks are written to pools.json next to the store
// (atomically: a temporary file, fsynced, renamed) before the core is
// changed, and Open sets every block up again from it, so a daemon
// restarted without the API server serves at once.
package nodeipam
