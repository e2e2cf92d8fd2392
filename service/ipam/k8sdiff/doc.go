// Package k8sdiff holds the differential tests of the allocation core's
// Kubernetes rules (label keys and values) against k8s.io/apimachinery,
// which the core itself never imports. It has no code of its own.
package k8sdiff
