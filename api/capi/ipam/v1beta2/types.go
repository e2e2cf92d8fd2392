// Package v1beta2 mirrors the Cluster API IPAM contract types
// (ipam.cluster.x-k8s.io/v1beta2: IPAddressClaim and IPAddress) that the
// Cluster API front reads and writes. Only the fields of the contract are
// mirrored; the CRDs themselves are Cluster API's (api/capi/crds), copied
// from the sigs.k8s.io/cluster-api module, never written here.
//
// +kubebuilder:object:generate=true
// +groupName=ipam.cluster.x-k8s.io
package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Names of the Cluster API IPAM contract.
const (
	// Group is the API group of IPAddressClaim and IPAddress.
	Group = "ipam.cluster.x-k8s.io"
	// Version is the API version mirrored here (the storage version).
	Version = "v1beta2"
	// KindIPAddressClaim is the kind of IPAddressClaim.
	KindIPAddressClaim = "IPAddressClaim"
	// KindIPAddress is the kind of IPAddress.
	KindIPAddress = "IPAddress"
	// ConditionReady is the claim's Ready condition.
	ConditionReady = "Ready"
	// ReasonAllocationFailed is the Ready reason when the allocation fails
	// for any cause but a full pool.
	ReasonAllocationFailed = "AllocationFailed"
	// ReasonPoolNotReady is the Ready reason when the pool is missing or
	// not ready.
	ReasonPoolNotReady = "PoolNotReady"
	// ReasonPoolExhausted is the Ready reason when the pool is full.
	ReasonPoolExhausted = "PoolExhausted"
	// ReasonReady is the Ready reason once the IPAddress exists.
	ReasonReady = "Ready"
	// ReasonPaused is the Ready reason while the claim or its cluster is
	// paused and nothing was allocated yet.
	ReasonPaused = "Paused"
)

// IPPoolReference names the pool a claim allocates from.
type IPPoolReference struct {
	// Name of the pool.
	Name string `json:"name,omitempty"`
	// Kind of the pool.
	Kind string `json:"kind,omitempty"`
	// APIGroup of the pool.
	APIGroup string `json:"apiGroup,omitempty"`
}

// IPAddressClaimSpec is what a claim asks for.
type IPAddressClaimSpec struct {
	// ClusterName is the Cluster the claim belongs to.
	ClusterName string `json:"clusterName,omitempty"`
	// PoolRef is the pool to allocate from.
	PoolRef IPPoolReference `json:"poolRef,omitempty,omitzero"`
}

// IPAddressReference names the IPAddress of a claim.
type IPAddressReference struct {
	// Name of the IPAddress.
	Name string `json:"name,omitempty"`
}

// IPAddressClaimStatus is what a claim got.
type IPAddressClaimStatus struct {
	// Conditions holds the Ready condition.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// AddressRef names the IPAddress created for the claim.
	AddressRef IPAddressReference `json:"addressRef,omitempty,omitzero"`
}

// IPAddressClaim asks an IPAM provider for an address from a pool.
//
// +kubebuilder:object:root=true
type IPAddressClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the request.
	Spec IPAddressClaimSpec `json:"spec,omitempty,omitzero"`
	// Status is the answer.
	Status IPAddressClaimStatus `json:"status,omitempty,omitzero"`
}

// IPAddressClaimList is a list of IPAddressClaims.
//
// +kubebuilder:object:root=true
type IPAddressClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the claims.
	Items []IPAddressClaim `json:"items"`
}

// IPAddressClaimReference names the claim of an IPAddress.
type IPAddressClaimReference struct {
	// Name of the claim, in the IPAddress' namespace.
	Name string `json:"name,omitempty"`
}

// IPAddressSpec is an allocated address.
type IPAddressSpec struct {
	// ClaimRef is the claim the address was allocated for.
	ClaimRef IPAddressClaimReference `json:"claimRef,omitempty,omitzero"`
	// PoolRef is the pool the address was allocated from.
	PoolRef IPPoolReference `json:"poolRef,omitempty,omitzero"`
	// Address is the address, without a prefix length.
	Address string `json:"address,omitempty"`
	// Prefix is the prefix length of the address' network.
	Prefix *int32 `json:"prefix,omitempty"`
	// Gateway is the network's gateway, if it has one.
	Gateway string `json:"gateway,omitempty"`
}

// IPAddress is an address an IPAM provider allocated for a claim.
//
// +kubebuilder:object:root=true
type IPAddress struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the address.
	Spec IPAddressSpec `json:"spec,omitempty,omitzero"`
}

// IPAddressList is a list of IPAddresses.
//
// +kubebuilder:object:root=true
type IPAddressList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the addresses.
	Items []IPAddress `json:"items"`
}

var (
	// GroupVersion is the group and version of the mirrored types.
	GroupVersion = schema.GroupVersion{Group: Group, Version: Version}
	// SchemeBuilder registers the mirrored types.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &IPAddressClaim{}, &IPAddressClaimList{}, &IPAddress{}, &IPAddressList{})
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
	// AddToScheme adds the mirrored types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
