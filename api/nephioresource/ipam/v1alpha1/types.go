package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/common/v1alpha1"
)

// PrefixKind is the role of a prefix: network, loopback, pool or
// aggregate.
// +kubebuilder:validation:Enum=network;loopback;pool;aggregate
type PrefixKind string

// The prefix kinds.
const (
	// PrefixKindNetwork is a subnet of interfaces; it holds addresses.
	PrefixKindNetwork PrefixKind = "network"
	// PrefixKindLoopback holds /32 or /128 loopback addresses.
	PrefixKindLoopback PrefixKind = "loopback"
	// PrefixKindPool is a block handed out in pieces.
	PrefixKindPool PrefixKind = "pool"
	// PrefixKindAggregate is a top-level block of a network instance.
	PrefixKindAggregate PrefixKind = "aggregate"
)

// AddressFamily is ipv4 or ipv6.
// +kubebuilder:validation:Enum=ipv4;ipv6
type AddressFamily string

// Prefix is an aggregate prefix of a network instance.
type Prefix struct {
	// Prefix is the prefix in CIDR notation.
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="prefix must be in CIDR notation, e.g. 10.0.0.0/8"
	Prefix string `json:"prefix"`

	commonv1alpha1.UserDefinedLabels `json:",inline"`
}

// NetworkInstanceSpec is the desired state of a NetworkInstance.
type NetworkInstanceSpec struct {
	// Prefixes are the aggregate prefixes of the network instance.
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	Prefixes []Prefix `json:"prefixes,omitempty"`
}

// NetworkInstanceStatus is the observed state of a NetworkInstance.
type NetworkInstanceStatus struct {
	commonv1alpha1.ConditionedStatus `json:",inline"`

	// Prefixes are the aggregates as recorded by the IPAM service.
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	Prefixes []Prefix `json:"prefixes,omitempty"`
}

// NetworkInstance is a VRF: a routing context with its aggregates. A
// NetworkInstance of ipam.nephio.org of the same name is the same VRF.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories={nephio,resource}
// +kubebuilder:printcolumn:name="SYNC",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="STATUS",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="NETWORK-INSTANCE",type="string",JSONPath=".metadata.name"
// +kubebuilder:printcolumn:name="PREFIX0",type="string",JSONPath=".spec.prefixes[0].prefix"
// +kubebuilder:printcolumn:name="PREFIX1",type="string",JSONPath=".spec.prefixes[1].prefix"
// +kubebuilder:printcolumn:name="PREFIX2",type="string",JSONPath=".spec.prefixes[2].prefix"
// +kubebuilder:printcolumn:name="PREFIX3",type="string",JSONPath=".spec.prefixes[3].prefix"
// +kubebuilder:printcolumn:name="PREFIX4",type="string",JSONPath=".spec.prefixes[4].prefix"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type NetworkInstance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NetworkInstanceSpec   `json:"spec,omitempty"`
	Status NetworkInstanceStatus `json:"status,omitempty"`
}

// NetworkInstanceList is a list of NetworkInstances.
//
// +kubebuilder:object:root=true
type NetworkInstanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NetworkInstance `json:"items"`
}

// IPPrefixSpec is the desired state of an IPPrefix.
type IPPrefixSpec struct {
	// Kind is the role of the prefix.
	// +optional
	// +kubebuilder:default=network
	Kind PrefixKind `json:"kind,omitempty"`

	// NetworkInstance is the network instance the prefix belongs to.
	NetworkInstance commonv1alpha1.ObjectReference `json:"networkInstance"`

	// Prefix is the prefix in CIDR notation; in a network, a host part is
	// a static address (10.0.0.1/24 with the nephio.org/gateway label is
	// the network's gateway).
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="prefix must be in CIDR notation, e.g. 10.0.0.0/24 or 10.0.0.1/24"
	Prefix string `json:"prefix"`

	commonv1alpha1.UserDefinedLabels `json:",inline"`
}

// IPPrefixStatus is the observed state of an IPPrefix.
type IPPrefixStatus struct {
	commonv1alpha1.ConditionedStatus `json:",inline"`

	// Prefix is the prefix as recorded by the IPAM service.
	// +optional
	Prefix *string `json:"prefix,omitempty"`
}

// IPPrefix declares a prefix or a static address in a network instance.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories={nephio,resource}
// +kubebuilder:printcolumn:name="SYNC",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="STATUS",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="NETWORK-INSTANCE",type="string",JSONPath=".spec.networkInstance.name"
// +kubebuilder:printcolumn:name="KIND",type="string",JSONPath=".spec.kind"
// +kubebuilder:printcolumn:name="SUBNET",type="string",JSONPath=".spec.subnetName"
// +kubebuilder:printcolumn:name="PREFIX-REQ",type="string",JSONPath=".spec.prefix"
// +kubebuilder:printcolumn:name="PREFIX-ALLOC",type="string",JSONPath=".status.prefix"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type IPPrefix struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IPPrefixSpec   `json:"spec,omitempty"`
	Status IPPrefixStatus `json:"status,omitempty"`
}

// IPPrefixList is a list of IPPrefixes.
//
// +kubebuilder:object:root=true
type IPPrefixList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPPrefix `json:"items"`
}

// IPClaimSpec is the desired state of an IPClaim.
type IPClaimSpec struct {
	// Kind is the kind of prefix claimed from.
	// +optional
	// +kubebuilder:default=network
	Kind PrefixKind `json:"kind,omitempty"`

	// NetworkInstance is the network instance claimed from.
	NetworkInstance commonv1alpha1.ObjectReference `json:"networkInstance"`

	// AddressFamily restricts the claim to ipv4 or ipv6.
	// +optional
	AddressFamily *AddressFamily `json:"addressFamily,omitempty"`

	// Prefix asks for exactly this address or prefix.
	// +optional
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="prefix must be in CIDR notation, e.g. 10.0.0.10/24"
	Prefix *string `json:"prefix,omitempty"`

	// PrefixLength is the length of the prefix claimed (pool, aggregate,
	// or createPrefix); an address claim is written with its network's
	// length.
	// +optional
	// +kubebuilder:validation:Maximum=128
	PrefixLength *uint8 `json:"prefixLength,omitempty"`

	// Index asks for the address at this offset of the selected prefix:
	// index 7 in 10.0.0.0/24 is 10.0.0.7/24.
	// +optional
	Index *uint32 `json:"index,omitempty"`

	// CreatePrefix claims a prefix of prefixLength rather than an
	// address (kind network or loopback).
	// +optional
	CreatePrefix *bool `json:"createPrefix,omitempty"`

	commonv1alpha1.ClaimLabels `json:",inline"`
}

// IPClaimStatus is the observed state of an IPClaim.
type IPClaimStatus struct {
	commonv1alpha1.ConditionedStatus `json:",inline"`

	// Prefix is the address or prefix claimed.
	// +optional
	Prefix *string `json:"prefix,omitempty"`

	// Gateway is the gateway of the claimed address's network.
	// +optional
	Gateway *string `json:"gateway,omitempty"`

	// ExpiryTime is when the claim expires; claims of this product do not
	// expire and leave it empty.
	// +optional
	ExpiryTime *string `json:"expiryTime,omitempty"`
}

// IPClaim claims an address or prefix from a network instance.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories={nephio,resource}
// +kubebuilder:printcolumn:name="SYNC",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="STATUS",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="NETWORK-INSTANCE",type="string",JSONPath=".spec.networkInstance.name"
// +kubebuilder:printcolumn:name="KIND",type="string",JSONPath=".spec.kind"
// +kubebuilder:printcolumn:name="AF",type="string",JSONPath=".spec.addressFamily"
// +kubebuilder:printcolumn:name="PREFIXLENGTH",type="string",JSONPath=".spec.prefixLength"
// +kubebuilder:printcolumn:name="PREFIX-REQ",type="string",JSONPath=".spec.prefix"
// +kubebuilder:printcolumn:name="PREFIX-ALLOC",type="string",JSONPath=".status.prefix"
// +kubebuilder:printcolumn:name="GATEWAY",type="string",JSONPath=".status.gateway"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type IPClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IPClaimSpec   `json:"spec,omitempty"`
	Status IPClaimStatus `json:"status,omitempty"`
}

// IPClaimList is a list of IPClaims.
//
// +kubebuilder:object:root=true
type IPClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPClaim `json:"items"`
}
