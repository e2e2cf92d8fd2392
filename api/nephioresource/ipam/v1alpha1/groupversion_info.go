// Package v1alpha1 is Nephio's ipam.resource.nephio.org/v1alpha1 API
// (NetworkInstance, IPPrefix, IPClaim) with Nephio's field names, as
// Nephio's interface-fn, specializers and nad-fn write and read it. The
// product serves it beside ipam.nephio.org over the same translation and
// core: an IPClaim is an IPAllocation under another name, and both
// groups' NetworkInstances of one name are one VRF. Its CRDs are
// generated from these types into crds/.
//
// +kubebuilder:object:generate=true
// +groupName=ipam.resource.nephio.org
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The group, version and kinds of this API as they appear in apiVersion
// and kind.
const (
	// Group is the API group of every kind in this package.
	Group = "ipam.resource.nephio.org"
	// Version is the API version of this package.
	Version = "v1alpha1"
	// APIVersion is Group/Version, as written in apiVersion.
	APIVersion = Group + "/" + Version
	// KindNetworkInstance is the kind of NetworkInstance.
	KindNetworkInstance = "NetworkInstance"
	// KindIPPrefix is the kind of IPPrefix.
	KindIPPrefix = "IPPrefix"
	// KindIPClaim is the kind of IPClaim.
	KindIPClaim = "IPClaim"
)

var (
	// GroupVersion is the API group and version of the types in this package.
	GroupVersion = schema.GroupVersion{Group: Group, Version: Version}
	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &NetworkInstance{}, &NetworkInstanceList{}, &IPPrefix{}, &IPPrefixList{}, &IPClaim{}, &IPClaimList{})
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
