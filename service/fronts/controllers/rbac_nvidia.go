//go:build rbac_nvidia

package controllers

// The ClusterRole ipam-controller-nvidia of blueprints/ipam-nvidia,
// generated into blueprints/ipam-nvidia/rbac-controller-nvidia-role.yaml
// by `make blueprint-rbac` (rbac.sh): NVIDIA's IPPools and CIDRPools
// with their status and finalizers, and the nodes they select, read-only.

// +kubebuilder:rbac:groups=nv-ipam.nvidia.com,resources=ippools;cidrpools,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=nv-ipam.nvidia.com,resources=ippools/status;cidrpools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=nv-ipam.nvidia.com,resources=ippools/finalizers;cidrpools/finalizers,verbs=update
// +kubebuilder:rbac:groups=core,resources=nodes,verbs=get;list;watch
