package v1alpha1

import "github.com/nephio-project/ipam/api/vocab"

// Condition types set in status.conditions of every ipam.nephio.org resource.
const (
	// ConditionTypeSynced is True when the resource's spec has been processed
	// by the IPAM service, whatever the outcome.
	ConditionTypeSynced = "Synced"
	// ConditionTypeReady is True when the resource's request is fulfilled:
	// its prefix is recorded or its allocation is made.
	ConditionTypeReady = "Ready"
)

// Condition reasons set in status.conditions of every ipam.nephio.org resource.
const (
	// ReasonReconcileSuccess is the Synced reason when processing succeeded.
	ReasonReconcileSuccess = "ReconcileSuccess"
	// ReasonReconcileFailure is the Synced reason when processing failed.
	ReasonReconcileFailure = "ReconcileFailure"
	// ReasonReady is the Ready reason when the request is fulfilled.
	ReasonReady = "Ready"
	// ReasonFailed is the Ready reason when the request is not fulfilled;
	// the condition message names the cause.
	ReasonFailed = "Failed"
)

// System label keys that every prefix carries and that selectors can match:
// the shared vocabulary of package vocab, defined there once.
const (
	// LabelNetworkInstance names the NetworkInstance a prefix lives in.
	LabelNetworkInstance = vocab.LabelNetworkInstance
	// LabelNetworkName is the network name of a prefix (IPPrefix spec.network).
	LabelNetworkName = vocab.LabelNetworkName
	// LabelPrefixKind is the PrefixKind of a prefix.
	LabelPrefixKind = vocab.LabelPrefixKind
	// LabelAddressFamily is the AddressFamily of a prefix: ipv4 or ipv6.
	LabelAddressFamily = vocab.LabelAddressFamily
	// LabelPrefixLength is the prefix length of a prefix in decimal, e.g. "24".
	LabelPrefixLength = vocab.LabelPrefixLength
	// LabelGateway is "true" on the address that is its network's gateway.
	LabelGateway = vocab.LabelGateway
)

// PrefixKind is the role of a prefix in a network instance: it decides what
// the prefix may contain and what it may be nested in.
// +kubebuilder:validation:Enum=aggregate;network;pool;loopback
type PrefixKind string

const (
	// PrefixKindAggregate is a top-level block of address space owned by a
	// network instance; it holds network, pool and loopback prefixes.
	PrefixKindAggregate PrefixKind = "aggregate"
	// PrefixKindNetwork is a subnet assigned to interfaces; it holds addresses.
	PrefixKindNetwork PrefixKind = "network"
	// PrefixKindPool is a block handed out in pieces; it holds network, pool
	// and loopback prefixes.
	PrefixKindPool PrefixKind = "pool"
	// PrefixKindLoopback is a block of /32 or /128 loopback addresses.
	PrefixKindLoopback PrefixKind = "loopback"
)

// AddressFamily is an IP address family.
// +kubebuilder:validation:Enum=ipv4;ipv6
type AddressFamily string

const (
	// AddressFamilyIPv4 is IPv4.
	AddressFamilyIPv4 AddressFamily = "ipv4"
	// AddressFamilyIPv6 is IPv6.
	AddressFamilyIPv6 AddressFamily = "ipv6"
)
