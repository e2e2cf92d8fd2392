package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/common/v1alpha1"
)

// VLANIndexSpec is the desired state of a VLANIndex.
type VLANIndexSpec struct {
	commonv1alpha1.UserDefinedLabels `json:",inline"`
}

// VLANIndexStatus is the observed state of a VLANIndex.
type VLANIndexStatus struct {
	commonv1alpha1.ConditionedStatus `json:",inline"`
}

// VLANIndex is a pool of VLAN IDs (1-4094), e.g. one per cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories={nephio,resource}
// +kubebuilder:printcolumn:name="SYNC",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="STATUS",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type VLANIndex struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VLANIndexSpec   `json:"spec,omitempty"`
	Status VLANIndexStatus `json:"status,omitempty"`
}

// VLANIndexList is a list of VLANIndexes.
//
// +kubebuilder:object:root=true
type VLANIndexList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VLANIndex `json:"items"`
}

// VLANClaimSpec is the desired state of a VLANClaim: with neither vlanID
// nor range, the lowest free ID of the index.
type VLANClaimSpec struct {
	// VLANIndex is the index the claim takes from.
	VLANIndex commonv1alpha1.ObjectReference `json:"vlanIndex"`

	// VLANID asks for exactly this ID.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4094
	VLANID *uint16 `json:"vlanID,omitempty"`

	// VLANRange asks for a range of IDs: "100-200" for exactly those, or
	// a size ("10") for the lowest free run of that many.
	// +optional
	// +kubebuilder:validation:MaxLength=9
	// +kubebuilder:validation:Pattern=`^[0-9]{1,4}(-[0-9]{1,4})?$`
	VLANRange *string `json:"range,omitempty"`

	commonv1alpha1.ClaimLabels `json:",inline"`
}

// VLANClaimStatus is the observed state of a VLANClaim.
type VLANClaimStatus struct {
	commonv1alpha1.ConditionedStatus `json:",inline"`

	// VLANID is the ID claimed.
	// +optional
	VLANID *uint16 `json:"vlanID,omitempty"`

	// VLANRange is the range claimed, "first-last".
	// +optional
	VLANRange *string `json:"vlanRange,omitempty"`

	// ExpiryTime is when the claim expires; claims of this product do not
	// expire and leave it empty.
	// +optional
	ExpiryTime string `json:"expiryTime,omitempty"`
}

// VLANClaim claims a VLAN ID or a range of IDs from a VLANIndex.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories={nephio,resource}
// +kubebuilder:printcolumn:name="SYNC",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="STATUS",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="INDEX",type="string",JSONPath=".spec.vlanIndex.name"
// +kubebuilder:printcolumn:name="VLAN-REQ",type="string",JSONPath=".spec.vlanID"
// +kubebuilder:printcolumn:name="RANGE-REQ",type="string",JSONPath=".spec.range"
// +kubebuilder:printcolumn:name="VLAN-ALLOC",type="string",JSONPath=".status.vlanID"
// +kubebuilder:printcolumn:name="RANGE-ALLOC",type="string",JSONPath=".status.vlanRange"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type VLANClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VLANClaimSpec   `json:"spec,omitempty"`
	Status VLANClaimStatus `json:"status,omitempty"`
}

// VLANClaimList is a list of VLANClaims.
//
// +kubebuilder:object:root=true
type VLANClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VLANClaim `json:"items"`
}
