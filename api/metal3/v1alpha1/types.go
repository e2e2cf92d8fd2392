package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IPAddressStr is an IPv4 or IPv6 address.
// +kubebuilder:validation:MaxLength=39
// +kubebuilder:validation:XValidation:rule="isIP(self)",message="must be an IP address"
type IPAddressStr string

// IPSubnetStr is an IPv4 or IPv6 subnet in CIDR notation; its host part,
// if any, is where a subnet-only entry starts (after it).
// +kubebuilder:validation:MaxLength=43
// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="must be a subnet in CIDR notation"
type IPSubnetStr string

// Pool is one entry of an IPPool: a range start-end, a range from start to
// the end of subnet, or a subnet (its addresses after the one written).
//
// +kubebuilder:validation:XValidation:rule="has(self.start) || has(self.subnet)",message="start or subnet is required"
// +kubebuilder:validation:XValidation:rule="!has(self.start) || !has(self.end) || ip(self.start).family() == ip(self.end).family()",message="start and end must be of one family"
type Pool struct {
	// Start is the first address of the entry.
	// +optional
	Start *IPAddressStr `json:"start,omitempty"`
	// End is the last address of the entry (default: the end of subnet).
	// +optional
	End *IPAddressStr `json:"end,omitempty"`
	// Subnet bounds the entry; alone, the entry is the subnet's addresses
	// after the one written.
	// +optional
	Subnet *IPSubnetStr `json:"subnet,omitempty"`
	// Prefix overrides the pool's prefix for addresses of this entry.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	Prefix int `json:"prefix,omitempty"`
	// Gateway overrides the pool's gateway for addresses of this entry.
	// +optional
	Gateway *IPAddressStr `json:"gateway,omitempty"`
	// DNSServers overrides the pool's DNS servers for this entry.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	DNSServers []IPAddressStr `json:"dnsServers,omitempty"`
}

// IPPoolSpec is the desired state of an IPPool.
type IPPoolSpec struct {
	// ClusterName is the Cluster the pool belongs to; while it is paused the
	// pool and its claims are not reconciled.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	ClusterName *string `json:"clusterName,omitempty"`
	// NamePrefix starts the names of the pool's IPAddresses (default: the
	// pool's name). It cannot change.
	// +optional
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="namePrefix is immutable"
	NamePrefix string `json:"namePrefix,omitempty"`
	// Pools are the entries addresses are taken from, in order.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Pools []Pool `json:"pools,omitempty"`
	// PreAllocations reserve an address for the claim of that name.
	// +optional
	// +kubebuilder:validation:MaxProperties=4096
	PreAllocations map[string]IPAddressStr `json:"preAllocations,omitempty"`
	// Prefix is the prefix length of the pool's addresses.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	Prefix int `json:"prefix,omitempty"`
	// Gateway is the gateway of the pool's addresses; never handed out.
	// +optional
	Gateway *IPAddressStr `json:"gateway,omitempty"`
	// DNSServers are the DNS servers of the pool's addresses.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	DNSServers []IPAddressStr `json:"dnsServers,omitempty"`
}

// IPPoolStatus is the observed state of an IPPool.
type IPPoolStatus struct {
	// LastUpdated is when the status last changed.
	// +optional
	LastUpdated *metav1.Time `json:"lastUpdated,omitempty"`
	// Allocations maps each claim name to its address.
	// +optional
	// +kubebuilder:validation:MaxProperties=4096
	Allocations map[string]IPAddressStr `json:"indexes,omitempty"`
	// Conditions are the Synced and Ready conditions: Ready is True once
	// ipam-server holds the pool as its spec says; an edit it refuses (one
	// that drops an allocated address) leaves Ready False with the reason.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// IPPool is a set of address ranges claims are served from.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=ippools,scope=Namespaced,categories=metal3;ipam
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:printcolumn:name="CLUSTER",type="string",JSONPath=".spec.clusterName"
// +kubebuilder:printcolumn:name="STATUS",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type IPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the pool.
	// +optional
	Spec IPPoolSpec `json:"spec,omitempty"`
	// Status is the observed state of the pool.
	// +optional
	Status IPPoolStatus `json:"status,omitempty"`
}

// IPPoolList is a list of IPPools.
//
// +kubebuilder:object:root=true
type IPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the pools.
	Items []IPPool `json:"items"`
}

// IPClaimSpec is the desired state of an IPClaim.
type IPClaimSpec struct {
	// Pool is the IPPool to allocate from (namespace: the claim's).
	// +kubebuilder:validation:XValidation:rule="self.name != ''",message="pool.name is required"
	Pool corev1.ObjectReference `json:"pool"`
}

// IPClaimStatus is the observed state of an IPClaim.
type IPClaimStatus struct {
	// Address is the IPAddress allocated for the claim.
	// +optional
	Address *corev1.ObjectReference `json:"address,omitempty"`
	// ErrorMessage says why the claim has no address.
	// +optional
	ErrorMessage *string `json:"errorMessage,omitempty"`
}

// IPClaim asks for an address of an IPPool; the annotation ipAddress asks
// for that address.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=ipclaims,scope=Namespaced,categories=metal3;ipam
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:printcolumn:name="POOL",type="string",JSONPath=".spec.pool.name"
// +kubebuilder:printcolumn:name="ADDRESS",type="string",JSONPath=".status.address.name"
// +kubebuilder:printcolumn:name="ERROR",type="string",JSONPath=".status.errorMessage"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type IPClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the request.
	Spec IPClaimSpec `json:"spec"`
	// Status is the answer.
	// +optional
	Status IPClaimStatus `json:"status,omitempty"`
}

// IPClaimList is a list of IPClaims.
//
// +kubebuilder:object:root=true
type IPClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the claims.
	Items []IPClaim `json:"items"`
}

// IPAddressSpec is an allocated address.
type IPAddressSpec struct {
	// Claim is the IPClaim the address is for; empty for an address taken
	// out of the pool by hand.
	// +optional
	Claim corev1.ObjectReference `json:"claim,omitempty"`
	// Pool is the IPPool the address belongs to.
	Pool corev1.ObjectReference `json:"pool"`
	// Address is the address.
	Address IPAddressStr `json:"address"`
	// Prefix is the prefix length of the address' network.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	Prefix int `json:"prefix,omitempty"`
	// Gateway is the gateway of the address' network.
	// +optional
	Gateway *IPAddressStr `json:"gateway,omitempty"`
	// DNSServers are the DNS servers for the address.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	DNSServers []IPAddressStr `json:"dnsServers,omitempty"`
}

// IPAddress is an address of an IPPool, allocated for an IPClaim (or
// created by hand to keep the address out of the pool).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ipaddresses,scope=Namespaced,categories=metal3;ipam
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:validation:XValidation:rule="self.spec == oldSelf.spec",message="spec is immutable"
// +kubebuilder:printcolumn:name="ADDRESS",type="string",JSONPath=".spec.address"
// +kubebuilder:printcolumn:name="POOL",type="string",JSONPath=".spec.pool.name"
// +kubebuilder:printcolumn:name="CLAIM",type="string",JSONPath=".spec.claim.name"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type IPAddress struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the address.
	Spec IPAddressSpec `json:"spec"`
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
