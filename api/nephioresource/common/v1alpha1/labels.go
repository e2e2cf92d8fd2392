package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// System label keys of Nephio's resource backend. Claims carry them in
// spec.labels (interface-fn and the specializers write the owner keys) and
// select prefixes by them; they mean here what they mean in Nephio.
const (
	// LabelApp names the application a resource belongs to.
	LabelApp = "nephio.org/app"
	// LabelAction, as an annotation with value "get", asks for the current
	// claim without making one.
	LabelAction = "nephio.org/action"
	// ActionGet is the value of LabelAction that reads a claim.
	ActionGet = "get"

	// LabelOwnerGVK is the group, version and kind of the claim's owner.
	LabelOwnerGVK = "nephio.org/owner-gvk"
	// LabelOwnerNsnName is the name of the claim's owner.
	LabelOwnerNsnName = "nephio.org/owner-nsn-name"
	// LabelOwnerNsnNamespace is the namespace of the claim's owner.
	LabelOwnerNsnNamespace = "nephio.org/owner-nsn-namespace"
	// LabelGVK is the group, version and kind of the claim itself.
	LabelGVK = "nephio.org/gvk"
	// LabelNsnName is the name of the claim itself.
	LabelNsnName = "nephio.org/nsn-name"
	// LabelNsnNamespace is the namespace of the claim itself.
	LabelNsnNamespace = "nephio.org/nsn-namespace"
	// LabelOwnerRef is a reference to the claim's owner object.
	LabelOwnerRef = "nephio.org/owner-ref"

	// LabelPrefixKind is the kind of a prefix: network, loopback, pool or
	// aggregate.
	LabelPrefixKind = "nephio.org/prefix-kind"
	// LabelAddressFamily is the address family of a prefix: ipv4 or ipv6.
	LabelAddressFamily = "nephio.org/address-family"
	// LabelSubnet is the subnet a prefix belongs to.
	LabelSubnet = "nephio.org/subnet"
	// LabelPool marks a prefix as a pool.
	LabelPool = "nephio.org/pool"
	// LabelGateway is "true" on the address that is its network's gateway.
	LabelGateway = "nephio.org/gateway"

	// LabelClusterName is the workload cluster a prefix or claim is for.
	LabelClusterName = "nephio.org/cluster-name"
	// LabelSiteName is the site a prefix or claim is for.
	LabelSiteName = "nephio.org/site-name"
	// LabelRegion is the region a prefix or claim is for.
	LabelRegion = "nephio.org/region"
	// LabelAvailabilityZone is the availability zone a prefix or claim is for.
	LabelAvailabilityZone = "nephio.org/availability-zone"
	// LabelInterface is the interface a claim is for (n3, n6, ...).
	LabelInterface = "nephio.org/interface"
	// LabelNetworkName is the network a prefix belongs to.
	LabelNetworkName = "nephio.org/network-name"
	// LabelPurpose is what a prefix is for.
	LabelPurpose = "nephio.org/purpose"
	// LabelPartOf is the application a resource is part of.
	LabelPartOf = "app.kubernetes.io/part-of"
	// LabelIndex is an index a resource is known by.
	LabelIndex = "nephio.org/index"

	// LabelClaimedPrefix records the prefix a claim got.
	LabelClaimedPrefix = "nephio.org/claimed-prefix"
	// LabelClaimedGateway records the gateway a claim got.
	LabelClaimedGateway = "nephio.org/claimed-gateway"
)

// AnnotationSpecializerOwner on a claim names the function that created
// it (e.g. req.nephio.org/v1alpha1.Interface.n3); Kptfile conditions of
// such owners are kept as they are.
const AnnotationSpecializerOwner = "specializer.nephio.org/owner"

// UserDefinedLabels are the labels a resource carries in its spec,
// besides metadata.labels.
type UserDefinedLabels struct {
	// Labels are user labels the resource carries; selectors match them.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// ClaimLabels are the labels of a claim and the selector that picks what
// it claims from.
type ClaimLabels struct {
	UserDefinedLabels `json:",inline"`

	// Selector picks the prefixes (or VLAN index) the claim is served
	// from by their labels.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// ConditionedStatus is the Synced and Ready conditions of a resource.
type ConditionedStatus struct {
	// Conditions are the Synced and Ready conditions of the resource.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ObjectReference names the object a claim or prefix refers to (a
// NetworkInstance, a VLANIndex): by name, optionally with its namespace.
type ObjectReference struct {
	// Name is the name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Namespace is the namespace of the object.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}
