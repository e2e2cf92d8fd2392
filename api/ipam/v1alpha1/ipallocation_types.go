package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IPAllocationSpec is the desired state of an IPAllocation: what to allocate
// and where from.
//
// +kubebuilder:validation:XValidation:rule="!has(self.prefixLength) || !has(self.addressFamily) || self.addressFamily != 'ipv4' || self.prefixLength <= 32",message="prefixLength exceeds 32 for addressFamily ipv4",fieldPath=".prefixLength"
type IPAllocationSpec struct {
	// Kind is what to allocate: an address or prefix from a network
	// (network), a prefix from a pool or aggregate (pool), or a loopback
	// address (loopback). Aggregates are declared, never allocated.
	// +optional
	// +kubebuilder:default=network
	// +kubebuilder:validation:XValidation:rule="self != 'aggregate'",message="aggregates are declared with IPPrefix, not allocated"
	Kind PrefixKind `json:"kind,omitempty"`

	// NetworkInstance names the NetworkInstance, in the same namespace, to
	// allocate from. When empty, the selector's nephio.org/network-instance
	// label names it.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	NetworkInstance string `json:"networkInstance,omitempty"`

	// PrefixLength is the length of the prefix to allocate. When empty, an
	// address is allocated.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	PrefixLength *int32 `json:"prefixLength,omitempty"`

	// Prefix requests this exact prefix or address, in CIDR notation.
	// +optional
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="prefix must be in CIDR notation, e.g. 10.0.1.10/24"
	Prefix string `json:"prefix,omitempty"`

	// AddressFamily restricts the allocation to ipv4 or ipv6.
	// +optional
	AddressFamily AddressFamily `json:"addressFamily,omitempty"`

	// Selector picks the prefixes to allocate from by their labels. Only
	// matchLabels is used.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Labels are user labels the allocated prefix carries, in addition to
	// metadata.labels.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// IPAllocationStatus is the observed state of an IPAllocation.
type IPAllocationStatus struct {
	// Prefix is the allocated prefix. An address taken from a network is
	// written as address/network-length, e.g. 10.0.1.2/24.
	// +optional
	Prefix string `json:"prefix,omitempty"`

	// Gateway is the gateway address of the network the address was taken
	// from, if that network has one.
	// +optional
	Gateway string `json:"gateway,omitempty"`

	// Conditions are the Synced and Ready conditions of the allocation.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// IPAllocation requests an address or a prefix from a network instance.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=ipam
// +kubebuilder:printcolumn:name="SYNC",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="STATUS",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="NETWORK",type="string",JSONPath=".spec.networkInstance",priority=1
// +kubebuilder:printcolumn:name="KIND",type="string",JSONPath=".spec.kind"
// +kubebuilder:printcolumn:name="AF",type="string",JSONPath=".spec.addressFamily"
// +kubebuilder:printcolumn:name="PREFIXLENGTH",type="integer",JSONPath=".spec.prefixLength"
// +kubebuilder:printcolumn:name="PREFIX-REQ",type="string",JSONPath=".spec.prefix"
// +kubebuilder:printcolumn:name="PREFIX-ALLOC",type="string",JSONPath=".status.prefix"
// +kubebuilder:printcolumn:name="GATEWAY",type="string",JSONPath=".status.gateway"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type IPAllocation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the allocation.
	// +optional
	Spec IPAllocationSpec `json:"spec,omitempty"`
	// Status is the observed state of the allocation.
	// +optional
	Status IPAllocationStatus `json:"status,omitempty"`
}

// IPAllocationList is a list of IPAllocation resources.
//
// +kubebuilder:object:root=true
type IPAllocationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the allocations.
	Items []IPAllocation `json:"items"`
}

func init() {
	knownTypes = append(knownTypes, &IPAllocation{}, &IPAllocationList{})
}
