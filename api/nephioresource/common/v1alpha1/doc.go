// Package v1alpha1 holds what Nephio's resource APIs
// (ipam.resource.nephio.org and vlan.resource.nephio.org, version
// v1alpha1) share: the system label keys Nephio's components write and
// match on, the labels and selector of a claim, and the conditions of a
// resource's status.
//
// +kubebuilder:object:generate=true
package v1alpha1
