package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kinds of the Cluster API pools this group serves.
const (
	// KindInClusterIPPool is the kind of InClusterIPPool.
	KindInClusterIPPool = "InClusterIPPool"
	// KindGlobalInClusterIPPool is the kind of GlobalInClusterIPPool.
	KindGlobalInClusterIPPool = "GlobalInClusterIPPool"
)

// InClusterIPPoolSpec is the desired state of an InClusterIPPool or a
// GlobalInClusterIPPool: the field names of the Cluster API in-cluster
// IPAM provider, so that a pool moves between the two by changing its
// apiVersion.
//
// +kubebuilder:validation:XValidation:rule="self.addresses.all(a, a.contains(':')) || self.addresses.all(a, !a.contains(':'))",message="addresses: IPv4 and IPv6 cannot be mixed in one pool"
// +kubebuilder:validation:XValidation:rule="!has(self.gateway) || self.gateway.contains(':') == self.addresses[0].contains(':')",message="gateway: must be of the addresses' family"
// +kubebuilder:validation:XValidation:rule="!has(self.excludedAddresses) || self.excludedAddresses.all(a, a.contains(':') == self.addresses[0].contains(':'))",message="excludedAddresses: must be of the addresses' family"
// +kubebuilder:validation:XValidation:rule="self.addresses[0].contains(':') || self.prefix <= 32",message="prefix: at most 32 for IPv4"
type InClusterIPPoolSpec struct {
	// Addresses are the addresses the pool hands out: CIDRs
	// (10.0.0.128/28), ranges (10.0.0.24-10.0.0.32) and single addresses
	// (10.0.0.10), all of one family.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=81
	// +kubebuilder:validation:items:XValidation:rule="isIP(self) || isCIDR(self) || (self.split('-').size() == 2 && isIP(self.split('-')[0]) && isIP(self.split('-')[1]) && ip(self.split('-')[0]).family() == ip(self.split('-')[1]).family())",message="each address must be an IP, a CIDR or a range first-last of one family"
	Addresses []string `json:"addresses"`

	// Prefix is the prefix length of the network the addresses belong to;
	// every IPAddress of the pool carries it.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=128
	Prefix int32 `json:"prefix"`

	// Gateway is the gateway of the network; it is never handed out and
	// every IPAddress of the pool carries it. It must lie in the network
	// (the /prefix) of every addresses entry; the controller checks that,
	// as a CEL rule would exceed the API server's cost budget.
	// +optional
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="gateway must be an IP address"
	Gateway string `json:"gateway,omitempty"`

	// ExcludedAddresses are never handed out: CIDRs, ranges and single
	// addresses, like addresses.
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=81
	// +kubebuilder:validation:items:XValidation:rule="isIP(self) || isCIDR(self) || (self.split('-').size() == 2 && isIP(self.split('-')[0]) && isIP(self.split('-')[1]) && ip(self.split('-')[0]).family() == ip(self.split('-')[1]).family())",message="each excluded address must be an IP, a CIDR or a range first-last of one family"
	ExcludedAddresses []string `json:"excludedAddresses,omitempty"`

	// AllocateReservedIPAddresses lets the pool hand out the first and last
	// address of its network, which are reserved by default.
	// +optional
	AllocateReservedIPAddresses bool `json:"allocateReservedIPAddresses,omitempty"`
}

// IPAddressStatusSummary counts the addresses of a pool.
type IPAddressStatusSummary struct {
	// Total is how many addresses the pool can hand out.
	Total int `json:"total"`
	// Used is how many IPAddresses reference the pool.
	Used int `json:"used"`
	// Free is Total minus the used addresses that lie in the pool.
	Free int `json:"free"`
	// OutOfRange counts the IPAddresses of the pool that lie outside its
	// addresses.
	OutOfRange int `json:"outOfRange"`
}

// InClusterIPPoolStatus is the observed state of a pool.
type InClusterIPPoolStatus struct {
	// Addresses counts the pool's addresses.
	// +optional
	Addresses *IPAddressStatusSummary `json:"ipAddresses,omitempty"`

	// Conditions are the Synced and Ready conditions of the pool: Ready is
	// True once ipam-server holds the pool's ranges as the spec says; an
	// edit ipam-server refuses (one that drops an allocated address) leaves
	// Ready False with the reason, and the pool as it was.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// InClusterIPPool is a pool of addresses for Cluster API IPAddressClaims
// in its namespace, held by ipam-server.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=ipam;cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io/move-hierarchy="
// +kubebuilder:printcolumn:name="SYNC",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="STATUS",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="ADDRESSES",type="string",JSONPath=".spec.addresses"
// +kubebuilder:printcolumn:name="TOTAL",type="integer",JSONPath=".status.ipAddresses.total"
// +kubebuilder:printcolumn:name="FREE",type="integer",JSONPath=".status.ipAddresses.free"
// +kubebuilder:printcolumn:name="USED",type="integer",JSONPath=".status.ipAddresses.used"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type InClusterIPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the pool.
	// +required
	Spec InClusterIPPoolSpec `json:"spec"`
	// Status is the observed state of the pool.
	// +optional
	Status InClusterIPPoolStatus `json:"status,omitempty"`
}

// InClusterIPPoolList is a list of InClusterIPPool resources.
//
// +kubebuilder:object:root=true
type InClusterIPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the pools.
	Items []InClusterIPPool `json:"items"`
}

// GlobalInClusterIPPool is a cluster-wide pool of addresses for Cluster
// API IPAddressClaims of every namespace, held by ipam-server.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=ipam;cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io/move-hierarchy="
// +kubebuilder:printcolumn:name="SYNC",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="STATUS",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="ADDRESSES",type="string",JSONPath=".spec.addresses"
// +kubebuilder:printcolumn:name="TOTAL",type="integer",JSONPath=".status.ipAddresses.total"
// +kubebuilder:printcolumn:name="FREE",type="integer",JSONPath=".status.ipAddresses.free"
// +kubebuilder:printcolumn:name="USED",type="integer",JSONPath=".status.ipAddresses.used"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type GlobalInClusterIPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the pool.
	// +required
	Spec InClusterIPPoolSpec `json:"spec"`
	// Status is the observed state of the pool.
	// +optional
	Status InClusterIPPoolStatus `json:"status,omitempty"`
}

// GlobalInClusterIPPoolList is a list of GlobalInClusterIPPool resources.
//
// +kubebuilder:object:root=true
type GlobalInClusterIPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the pools.
	Items []GlobalInClusterIPPool `json:"items"`
}

func init() {
	knownTypes = append(knownTypes, &InClusterIPPool{}, &InClusterIPPoolList{},
		&GlobalInClusterIPPool{}, &GlobalInClusterIPPoolList{})
}
