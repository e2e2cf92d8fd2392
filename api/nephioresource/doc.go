// Package nephioresource holds Nephio's resource APIs, which the product
// serves beside ipam.nephio.org: ipam.resource.nephio.org/v1alpha1
// (package ipam/v1alpha1), vlan.resource.nephio.org/v1alpha1 (package
// vlan/v1alpha1) and what they share (package common/v1alpha1). Its
// tests check the generated CRDs of both.
package nephioresource
