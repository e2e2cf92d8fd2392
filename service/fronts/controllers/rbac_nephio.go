//go:build rbac_nephio

package controllers

// The ClusterRole ipam-controller-nephio of blueprints/ipam-nephio,
// generated into blueprints/ipam-nephio/rbac-controller-nephio-role.yaml
// by `make blueprint-rbac` (rbac.sh): Nephio's NetworkInstances,
// IPPrefixes, IPClaims, VLANClaims and VLANIndexes with their status and
// finalizers.

// +kubebuilder:rbac:groups=ipam.resource.nephio.org,resources=networkinstances;ipprefixes;ipclaims,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ipam.resource.nephio.org,resources=networkinstances/status;ipprefixes/status;ipclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ipam.resource.nephio.org,resources=networkinstances/finalizers;ipprefixes/finalizers;ipclaims/finalizers,verbs=update
// +kubebuilder:rbac:groups=vlan.resource.nephio.org,resources=vlanclaims;vlanindices,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=vlan.resource.nephio.org,resources=vlanclaims/status;vlanindices/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=vlan.resource.nephio.org,resources=vlanclaims/finalizers;vlanindices/finalizers,verbs=update
