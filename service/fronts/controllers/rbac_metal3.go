//go:build rbac_metal3

package controllers

// The ClusterRole ipam-controller-metal3 of blueprints/ipam-metal3,
// generated into blueprints/ipam-metal3/rbac-controller-metal3-role.yaml
// by `make blueprint-rbac` (rbac.sh): the Metal3 IPPools and IPClaims
// with their status and finalizers, and the IPAddresses the controller
// creates and deletes.

// +kubebuilder:rbac:groups=ipam.metal3.io,resources=ippools;ipclaims,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ipam.metal3.io,resources=ippools/status;ipclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ipam.metal3.io,resources=ippools/finalizers;ipclaims/finalizers,verbs=update
// +kubebuilder:rbac:groups=ipam.metal3.io,resources=ipaddresses,verbs=get;list;watch;create;update;patch;delete
