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

var (
	// GroupVersion is the API group and version of the types in this package.
	GroupVersion = schema.GroupVersion{Group: "ipam.nephio.org", Version: "v1alpha1"}

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
