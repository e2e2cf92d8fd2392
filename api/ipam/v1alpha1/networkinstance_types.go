package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NetworkInstanceSpec is the desired state of a NetworkInstance. It may be
// empty: aggregates can also be declared as IPPrefix resources of kind aggregate.
type NetworkInstanceSpec struct {
	// Prefixes are aggregate prefixes the network instance owns.
	// +optional
	// +listType=map
	// +listMapKey=prefix
	// +kubebuilder:validation:MaxItems=256
	Prefixes []NetworkInstancePrefix `json:"prefixes,omitempty"`
}

// NetworkInstancePrefix is an aggregate prefix declared inline in a NetworkInstance.
type NetworkInstancePrefix struct {
	// Prefix is the aggregate in CIDR notation, e.g. 10.0.0.0/8 or 2001:db8::/32.
	// +required
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="prefix must be in CIDR notation, e.g. 10.0.0.0/8 or 2001:db8::/32"
	Prefix string `json:"prefix"`

	// Labels are user labels the prefix carries; selectors can match them.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// NetworkInstanceStatus is the observed state of a NetworkInstance.
type NetworkInstanceStatus struct {
	// Conditions are the Synced and Ready conditions of the network instance.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Utilization reports, per aggregate of the network instance, how many
	// of its addresses are in use.
	// +optional
	// +listType=map
	// +listMapKey=prefix
	Utilization []PrefixUtilization `json:"utilization,omitempty"`
}

// PrefixUtilization is the address usage of one aggregate prefix. Counts are
// decimal strings because an IPv6 prefix holds more than 2^64 addresses.
type PrefixUtilization struct {
	// Prefix is the aggregate in CIDR notation.
	// +required
	Prefix string `json:"prefix"`

	// Used is the number of addresses of the prefix covered by child
	// prefixes and allocations, in decimal.
	// +required
	// +kubebuilder:validation:Pattern=`^[0-9]+$`
	Used string `json:"used"`

	// Total is the number of addresses in the prefix, in decimal.
	// +required
	// +kubebuilder:validation:Pattern=`^[0-9]+$`
	Total string `json:"total"`
}

// NetworkInstance is a virtual routing and forwarding context (VRF): an
// address space of its own, in which prefixes never overlap.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=ipam
// +kubebuilder:printcolumn:name="SYNC",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="STATUS",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type NetworkInstance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the network instance.
	// +optional
	Spec NetworkInstanceSpec `json:"spec,omitempty"`
	// Status is the observed state of the network instance.
	// +optional
	Status NetworkInstanceStatus `json:"status,omitempty"`
}

// NetworkInstanceList is a list of NetworkInstance resources.
//
// +kubebuilder:object:root=true
type NetworkInstanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the network instances.
	Items []NetworkInstance `json:"items"`
}

func init() {
	knownTypes = append(knownTypes, &NetworkInstance{}, &NetworkInstanceList{})
}
