// Package vocab is the vocabulary that ipam-server and its clients share:
// the kinds of the service's objects as users know them, the system label
// keys every prefix carries, the bound on an owner generation, and how a
// client's value is quoted in an error message.
//
// It is pure Go (the standard library only), so that the allocation core
// (service/ipam) and every client (ipam-fn, ipam-injector, ipamctl,
// ipam-controller) can use the same words without one carrying the other:
// the core re-exports these names, and clients import this package, never
// the core. The wire form of an object kind is the ObjectKind enum of
// api/proto/ipam/v1, whose KindName and KindOf map between the two.
package vocab
