//go:build rbac_controller

package controllers

// The ClusterRole ipam-controller of blueprints/ipam, generated into
// blueprints/ipam/rbac-controller-role.yaml by `make blueprint-rbac`
// (rbac.sh): the ipam.nephio.org kinds (the Cluster API pools included)
// with their status and finalizers; as a Cluster API IPAM provider,
// IPAddressClaims and their status, the IPAddresses it creates and
// deletes, and Clusters read-only for their pause; events. Nothing else.

// +kubebuilder:rbac:groups=ipam.nephio.org,resources=networkinstances;ipprefixes;ipallocations;inclusterippools;globalinclusterippools,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ipam.nephio.org,resources=networkinstances/status;ipprefixes/status;ipallocations/status;inclusterippools/status;globalinclusterippools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ipam.nephio.org,resources=networkinstances/finalizers;ipprefixes/finalizers;ipallocations/finalizers;inclusterippools/finalizers;globalinclusterippools/finalizers,verbs=update
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddresses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=core;events.k8s.io,resources=events,verbs=create;patch
