// Package v1alpha1 is the Metal3 IP Address Manager API
// (ipam.metal3.io/v1alpha1: IPPool, IPClaim, IPAddress) with Metal3's
// field names, served by ipam-controller as a drop-in for Metal3's own
// controller, with the allocations held by ipam-server. Its CRDs are
// generated from these types into crds/.
//
// +kubebuilder:object:generate=true
// +groupName=ipam.metal3.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The group, version and kinds of this API.
const (
	// Group is the API group of the Metal3 IP Address Manager.
	Group = "ipam.metal3.io"
	// Version is the API version of this package.
	Version = "v1alpha1"
	// KindIPPool is the kind of IPPool.
	KindIPPool = "IPPool"
	// KindIPClaim is the kind of IPClaim.
	KindIPClaim = "IPClaim"
	// KindIPAddress is the kind of IPAddress.
	KindIPAddress = "IPAddress"
	// AnnotationIPAddress on an IPClaim asks for that address.
	AnnotationIPAddress = "ipAddress"
	// IPPoolFinalizer holds a pool until no IPAddress uses it.
	IPPoolFinalizer = "ippool.ipam.metal3.io"
	// IPClaimFinalizer holds a claim until its address is released.
	IPClaimFinalizer = "ipclaim.ipam.metal3.io"
	// IPAddressFinalizer holds an IPAddress until its claim goes.
	IPAddressFinalizer = "ipaddress.ipam.metal3.io"
)

// Error messages of IPClaim status.errorMessage, in Metal3's wording.
const (
	// ErrExhausted: no pool entry has a free address.
	ErrExhausted = "Exhausted IP Pools"
	// ErrPreAllocatedOutOfBounds: the claim's pre-allocated address lies in
	// no pool entry.
	ErrPreAllocatedOutOfBounds = "Pre-allocated IP out of bounds"
	// ErrRequestedNotAvailable: the ipAddress annotation names an address
	// that is taken or lies in no pool entry.
	ErrRequestedNotAvailable = "Requested IP not available"
)

var (
	// GroupVersion is the API group and version of the types in this package.
	GroupVersion = schema.GroupVersion{Group: Group, Version: Version}
	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &IPPool{}, &IPPoolList{}, &IPClaim{}, &IPClaimList{}, &IPAddress{}, &IPAddressList{})
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
