// Package v1alpha1 is the NVIDIA k8s-ipam API (nv-ipam.nvidia.com/v1alpha1:
// IPPool, per-node blocks of addresses) with NVIDIA's field names, served
// by ipam-controller with the blocks held by ipam-server. Its CRDs are
// generated from these types into crds/.
//
// +kubebuilder:object:generate=true
// +groupName=nv-ipam.nvidia.com
package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The group, version and kinds of this API.
const (
	// Group is the API group of NVIDIA's k8s-ipam.
	Group = "nv-ipam.nvidia.com"
	// Version is the API version of this package.
	Version = "v1alpha1"
	// KindIPPool is the kind of IPPool.
	KindIPPool = "IPPool"
	// LabelNode is the label of a node's block in ipam-server: the node's
	// name. A node-local plugin lists its blocks by it.
	LabelNode = "nv-ipam.nvidia.com/node"
	// LabelPool is the label of a node's block in ipam-server: the pool's
	// namespace.name.
	LabelPool = "nv-ipam.nvidia.com/pool"
	// ReasonPoolExhausted is the Ready reason (and Warning event) when a
	// matching node gets no block.
	ReasonPoolExhausted = "PoolExhausted"
)

// ExcludeRange is a range of addresses no block hands out.
type ExcludeRange struct {
	// StartIP is the first excluded address.
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="must be an IP address"
	StartIP string `json:"startIP"`
	// EndIP is the last excluded address.
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="must be an IP address"
	EndIP string `json:"endIP"`
}

// Route is a route the pool's users install.
type Route struct {
	// Dst is the destination of the route, in CIDR notation.
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="must be in CIDR notation"
	Dst string `json:"dst"`
}

// IPPoolSpec is the desired state of an IPPool.
//
// +kubebuilder:validation:XValidation:rule="!has(self.gateway) || cidr(self.subnet).containsIP(self.gateway)",message="gateway must be inside subnet"
type IPPoolSpec struct {
	// Subnet is the pool's subnet.
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="subnet must be in CIDR notation"
	Subnet string `json:"subnet"`
	// PerNodeBlockSize is the number of addresses of each node's block.
	// +kubebuilder:validation:Minimum=2
	PerNodeBlockSize int `json:"perNodeBlockSize"`
	// Gateway is the subnet's gateway; it may lie in a node's block (the
	// plugin never hands it to a pod).
	// +optional
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="gateway must be an IP address"
	Gateway string `json:"gateway,omitempty"`
	// Exclusions are ranges no block hands out.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Exclusions []ExcludeRange `json:"exclusions,omitempty"`
	// DefaultGateway makes the gateway the pods' default route.
	// +optional
	DefaultGateway bool `json:"defaultGateway,omitempty"`
	// Routes are routes the pool's users install.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Routes []Route `json:"routes,omitempty"`
	// NodeSelector picks the nodes that get a block: terms ORed, the
	// expressions of a term ANDed; all nodes when empty.
	// +optional
	NodeSelector *corev1.NodeSelector `json:"nodeSelector,omitempty"`
}

// Allocation is the block of one node.
type Allocation struct {
	// NodeName is the node.
	NodeName string `json:"nodeName"`
	// StartIP is the first address of the block.
	StartIP string `json:"startIP"`
	// EndIP is the last address of the block.
	EndIP string `json:"endIP"`
}

// IPPoolStatus is the observed state of an IPPool.
type IPPoolStatus struct {
	// Allocations are the nodes' blocks, by node name.
	// +optional
	Allocations []Allocation `json:"allocations,omitempty"`
	// Conditions are the Synced and Ready conditions: Ready is False with
	// reason PoolExhausted when a matching node got no block.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// IPPool gives each matching node a block of addresses of a subnet.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=ippools,scope=Namespaced,categories=nv-ipam;ipam
// +kubebuilder:printcolumn:name="SUBNET",type="string",JSONPath=".spec.subnet"
// +kubebuilder:printcolumn:name="BLOCK",type="integer",JSONPath=".spec.perNodeBlockSize"
// +kubebuilder:printcolumn:name="STATUS",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type IPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the pool.
	Spec IPPoolSpec `json:"spec"`
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

var (
	// GroupVersion is the API group and version of the types in this package.
	GroupVersion = schema.GroupVersion{Group: Group, Version: Version}
	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &IPPool{}, &IPPoolList{}, &CIDRPool{}, &CIDRPoolList{})
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// KindCIDRPool is the kind of CIDRPool.
const KindCIDRPool = "CIDRPool"

// CIDRPoolStaticAllocation pins a node's prefix.
type CIDRPoolStaticAllocation struct {
	// NodeName is the node.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName"`
	// Prefix is the node's prefix, of perNodeNetworkPrefix length.
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="prefix must be in CIDR notation"
	Prefix string `json:"prefix"`
	// Gateway is the node's gateway (default: gatewayIndex's address).
	// +optional
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="gateway must be an IP address"
	Gateway string `json:"gateway,omitempty"`
}

// CIDRPoolSpec is the desired state of a CIDRPool.
type CIDRPoolSpec struct {
	// CIDR is the pool's prefix the nodes' prefixes are cut from.
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="cidr must be in CIDR notation"
	CIDR string `json:"cidr"`
	// PerNodeNetworkPrefix is the length of each node's prefix.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=128
	PerNodeNetworkPrefix int32 `json:"perNodeNetworkPrefix"`
	// GatewayIndex makes the address at that index of each node's prefix
	// its gateway.
	// +optional
	// +kubebuilder:validation:Minimum=0
	GatewayIndex *int32 `json:"gatewayIndex,omitempty"`
	// Exclusions are ranges the node-local plugin never hands out.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Exclusions []ExcludeRange `json:"exclusions,omitempty"`
	// StaticAllocations pin nodes' prefixes.
	// +optional
	// +kubebuilder:validation:MaxItems=4096
	StaticAllocations []CIDRPoolStaticAllocation `json:"staticAllocations,omitempty"`
	// NodeSelector picks the nodes that get a prefix: all when empty.
	// +optional
	NodeSelector *corev1.NodeSelector `json:"nodeSelector,omitempty"`
	// DefaultGateway makes the gateway the pods' default route.
	// +optional
	DefaultGateway bool `json:"defaultGateway,omitempty"`
	// Routes are routes the pool's users install.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Routes []Route `json:"routes,omitempty"`
}

// CIDRPoolAllocation is the prefix of one node.
type CIDRPoolAllocation struct {
	// NodeName is the node.
	NodeName string `json:"nodeName"`
	// Prefix is the node's prefix.
	Prefix string `json:"prefix"`
	// Gateway is the node's gateway, if the pool has one.
	// +optional
	Gateway string `json:"gateway,omitempty"`
}

// CIDRPoolStatus is the observed state of a CIDRPool.
type CIDRPoolStatus struct {
	// Allocations are the nodes' prefixes, by node name.
	// +optional
	Allocations []CIDRPoolAllocation `json:"allocations,omitempty"`
	// Conditions are the Synced and Ready conditions, as for IPPool.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CIDRPool gives each matching node a prefix of a CIDR.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=cidrpools,scope=Namespaced,categories=nv-ipam;ipam
// +kubebuilder:printcolumn:name="CIDR",type="string",JSONPath=".spec.cidr"
// +kubebuilder:printcolumn:name="PER-NODE",type="integer",JSONPath=".spec.perNodeNetworkPrefix"
// +kubebuilder:printcolumn:name="STATUS",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type CIDRPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the pool.
	Spec CIDRPoolSpec `json:"spec"`
	// Status is the observed state of the pool.
	// +optional
	Status CIDRPoolStatus `json:"status,omitempty"`
}

// CIDRPoolList is a list of CIDRPools.
//
// +kubebuilder:object:root=true
type CIDRPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the pools.
	Items []CIDRPool `json:"items"`
}
