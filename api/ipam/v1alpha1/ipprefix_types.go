package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IPPrefixSpec is the desired state of an IPPrefix.
type IPPrefixSpec struct {
	// Kind is the role of the prefix: aggregate, network, pool or loopback.
	// +optional
	// +kubebuilder:default=network
	Kind PrefixKind `json:"kind,omitempty"`

	// NetworkInstance names the NetworkInstance, in the same namespace, the
	// prefix belongs to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	NetworkInstance string `json:"networkInstance"`

	// Network is the name of the network the prefix belongs to; prefixes
	// carry it as the nephio.org/network-name label.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Network string `json:"network,omitempty"`

	// Prefix is the prefix in CIDR notation. In a network, a host part
	// declares a static address: 10.0.1.10/24 is the address 10.0.1.10 in
	// the network 10.0.1.0/24.
	// +required
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="prefix must be in CIDR notation, e.g. 10.0.1.0/24 or 10.0.1.10/24"
	Prefix string `json:"prefix"`

	// Labels are user labels the prefix carries, in addition to
	// metadata.labels; selectors can match them.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// IPPrefixStatus is the observed state of an IPPrefix.
type IPPrefixStatus struct {
	// Prefix is the prefix as recorded by the IPAM service.
	// +optional
	Prefix string `json:"prefix,omitempty"`

	// Gateway is the gateway address of the prefix's network, if it has one.
	// +optional
	Gateway string `json:"gateway,omitempty"`

	// Conditions are the Synced and Ready conditions of the prefix.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// IPPrefix declares a prefix or a static address in a network instance.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=ipam
// +kubebuilder:printcolumn:name="SYNC",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="STATUS",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="NETWORK",type="string",JSONPath=".spec.networkInstance"
// +kubebuilder:printcolumn:name="KIND",type="string",JSONPath=".spec.kind"
// +kubebuilder:printcolumn:name="NETWORK-NAME",type="string",JSONPath=".spec.network"
// +kubebuilder:printcolumn:name="PREFIX-REQ",type="string",JSONPath=".spec.prefix"
// +kubebuilder:printcolumn:name="PREFIX-ALLOC",type="string",JSONPath=".status.prefix"
// +kubebuilder:printcolumn:name="GATEWAY",type="string",JSONPath=".status.gateway",priority=1
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type IPPrefix struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the prefix.
	// +required
	Spec IPPrefixSpec `json:"spec"`
	// Status is the observed state of the prefix.
	// +optional
	Status IPPrefixStatus `json:"status,omitempty"`
}

// IPPrefixList is a list of IPPrefix resources.
//
// +kubebuilder:object:root=true
type IPPrefixList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the prefixes.
	Items []IPPrefix `json:"items"`
}

func init() {
	knownTypes = append(knownTypes, &IPPrefix{}, &IPPrefixList{})
}
