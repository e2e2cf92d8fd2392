// Package v1alpha1 is Nephio's vlan.resource.nephio.org/v1alpha1 API
// (VLANIndex, VLANClaim) with Nephio's field names. A VLANIndex is a pool
// of VLAN IDs 1-4094; a VLANClaim takes one ID (the lowest free one, or
// spec.vlanID) or a range of them (spec.range) from it. Its CRDs are
// generated from these types into crds/.
//
// +kubebuilder:object:generate=true
// +groupName=vlan.resource.nephio.org
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
	Group = "vlan.resource.nephio.org"
	// Version is the API version of this package.
	Version = "v1alpha1"
	// APIVersion is Group/Version, as written in apiVersion.
	APIVersion = Group + "/" + Version
	// KindVLANIndex is the kind of VLANIndex.
	KindVLANIndex = "VLANIndex"
	// KindVLANClaim is the kind of VLANClaim.
	KindVLANClaim = "VLANClaim"
)

var (
	// GroupVersion is the API group and version of the types in this package.
	GroupVersion = schema.GroupVersion{Group: Group, Version: Version}
	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &VLANIndex{}, &VLANIndexList{}, &VLANClaim{}, &VLANClaimList{})
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
