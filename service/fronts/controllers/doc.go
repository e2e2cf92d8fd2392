// Package controllers is ipam-controller: it reconciles custom resources
// against ipam-server over gRPC. The Nephio kinds of ipam.nephio.org
// (NetworkInstance, IPPrefix, IPAllocation) always; as fronts, turned on by
// flags and when their CRDs are installed: Cluster API's IPAddressClaims of
// the ipam.nephio.org pools (InClusterIPPool, GlobalInClusterIPPool) with
// their IPAddresses, Metal3's IPPool/IPClaim/IPAddress (--metal3) and
// NVIDIA's per-node IPPool/CIDRPool (--nvidia).
//
// The service stays the single source of truth: a reconciler translates a
// resource into the matching idempotent call (CreateNetworkInstance,
// CreatePrefix, Allocate), writes the result into status.prefix and
// status.gateway with the Synced and Ready conditions, and releases it
// through a finalizer when the resource is deleted (DeleteNetworkInstance,
// DeletePrefix, Release). Every object is keyed in the service by
// (owner, namespace, name), so a restarted controller gets the same answers.
//
// Every kind runs the one reconcile loop of Reconciler (get, paused,
// deleting, finalizer, serve, status, requeue); what is particular to a
// kind (its pool, its pause, its request, its status and result objects)
// is its adapter, in the kind's file. The ClusterRoles of the blueprints
// are generated from the +kubebuilder:rbac markers of rbac_*.go.
//
// Resources that wait for something (a missing aggregate, a full pool, a
// prefix that still has children) are retried with a growing delay and, as
// soon as a resource of the same network instance turns Ready or goes away,
// at once. Every resource is called again after the resync period so that
// a restarted service or a lost status converges.
package controllers
