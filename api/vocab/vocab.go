package vocab

import (
	"strconv"
	"unicode/utf8"
)

// Object kinds as users know them: the kind an error message names
// (ItemError.object on the wire; ItemError.kind is its typed form, which
// package translate maps back to these).
const (
	// ObjNetworkInstance is a network instance (VRF).
	ObjNetworkInstance = "NetworkInstance"
	// ObjPrefix is an IPPrefix.
	ObjPrefix = "IPPrefix"
	// ObjRange is an IP range.
	ObjRange = "IPRange"
	// ObjAllocation is an IPAllocation.
	ObjAllocation = "IPAllocation"
	// ObjSync is a Sync request itself, named by the errors about the
	// request rather than one of its objects (its owner, identity,
	// generation); it has no ObjectKind.
	ObjSync = "Sync"
)

// System label keys that every selectable prefix carries and that
// selectors can match.
const (
	// LabelNetworkInstance names the NetworkInstance a prefix lives in.
	LabelNetworkInstance = "nephio.org/network-instance"
	// LabelNetworkName is the network name of a prefix (IPPrefix spec.network).
	LabelNetworkName = "nephio.org/network-name"
	// LabelPrefixKind is the PrefixKind of a prefix.
	LabelPrefixKind = "nephio.org/prefix-kind"
	// LabelAddressFamily is the AddressFamily of a prefix: ipv4 or ipv6.
	LabelAddressFamily = "nephio.org/address-family"
	// LabelPrefixLength is the prefix length of a prefix in decimal, e.g. "24".
	LabelPrefixLength = "nephio.org/prefix-length"
	// LabelGateway is "true" on the address that is its network's gateway.
	LabelGateway = "nephio.org/gateway"
)

// MaxGeneration bounds the owner generation a Sync may carry
// (SyncRequest.generation), far above what renders reach, so that the
// owner's next generation never wraps around.
const MaxGeneration = 1 << 62

// MaxQuoted is how much of a client's value an error message repeats.
const MaxQuoted = 64

// Quote renders a client's value for an error message: quoted with Go
// escapes, and cut to MaxQuoted bytes with its full length named.
func Quote(s string) string {
	if len(s) <= MaxQuoted {
		return strconv.Quote(s)
	}
	cut := MaxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "... (" + strconv.Itoa(len(s)) + " bytes)"
}
