// Package v1beta2 mirrors the one part of the Cluster API Cluster
// (cluster.x-k8s.io/v1beta2) that an IPAM provider reads: whether the
// cluster is paused, and the labels and annotations every Cluster API
// object shares.
//
// +kubebuilder:object:generate=true
// +groupName=cluster.x-k8s.io
package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Names of the Cluster API core contract an IPAM provider honours.
const (
	// Group is the API group of Cluster.
	Group = "cluster.x-k8s.io"
	// Version is the API version mirrored here.
	Version = "v1beta2"
	// KindCluster is the kind of Cluster.
	KindCluster = "Cluster"
	// ClusterNameLabel names the Cluster an object belongs to.
	ClusterNameLabel = "cluster.x-k8s.io/cluster-name"
	// PausedAnnotation on an object stops controllers from processing it.
	PausedAnnotation = "cluster.x-k8s.io/paused"
)

// ClusterSpec is the part of a Cluster's spec an IPAM provider reads.
type ClusterSpec struct {
	// Paused stops controllers from processing the Cluster and its objects.
	Paused *bool `json:"paused,omitempty"`
}

// Cluster is a Cluster API cluster, as far as an IPAM provider reads it.
//
// +kubebuilder:object:root=true
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the part of the spec that is read.
	Spec ClusterSpec `json:"spec,omitempty"`
}

// ClusterList is a list of Clusters.
//
// +kubebuilder:object:root=true
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the clusters.
	Items []Cluster `json:"items"`
}

var (
	// GroupVersion is the group and version of the mirrored types.
	GroupVersion = schema.GroupVersion{Group: Group, Version: Version}
	// SchemeBuilder registers the mirrored types.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &Cluster{}, &ClusterList{})
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
	// AddToScheme adds the mirrored types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
