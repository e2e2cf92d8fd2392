// Package v1alpha1 is the ipam.nephio.org/v1alpha1 API: the NetworkInstance,
// IPPrefix and IPAllocation custom resources through which Kubernetes users
// declare address space and request addresses and prefixes from it.
//
// +kubebuilder:object:generate=true
// +groupName=ipam.nephio.org
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of the types in this package.
	GroupVersion = schema.GroupVersion{Group: "ipam.nephio.org", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
