// Package v1alpha1 is the ipam.nephio.org/v1alpha1 API: the NetworkInstance,
// IPPrefix and IPAllocation custom resources through which Kubernetes users
// declare address space and request addresses and prefixes from it.
//
// +kubebuilder:object:generate=true
// +groupName=ipam.nephio.org
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
	Group = "ipam.nephio.org"
	// Version is the API version of this package.
	Version = "v1alpha1"
	// APIVersion is Group/Version, as written in apiVersion.
	APIVersion = Group + "/" + Version
	// KindNetworkInstance is the kind of NetworkInstance.
	KindNetworkInstance = "NetworkInstance"
	// KindIPPrefix is the kind of IPPrefix.
	KindIPPrefix = "IPPrefix"
	// KindIPAllocation is the kind of IPAllocation.
	KindIPAllocation = "IPAllocation"
)

var (
	// GroupVersion is the API group and version of the types in this package.
	GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// knownTypes are the types of this package, each with its list.
var knownTypes []runtime.Object

// addKnownTypes registers knownTypes under GroupVersion.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, knownTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
