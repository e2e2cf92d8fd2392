// Package resource serves Nephio's resource backend API
// (resource.Resource, package api/proto/resource) over ipam-server's own
// service: each call becomes the Sync, Get, List, Release, DeletePrefix,
// DeleteNetworkInstance or Watch call of ipam.v1.IPAM that the shared
// translation (package translate) makes of its object, made in-process
// with the caller's context, so it passes the same authorization (the
// owner is the header's owner, see Owner) and the same limits as any
// other call, and nothing about allocation is decided here.
//
// What a call means:
//   - CreateIndex of a NetworkInstance declares its VRF (its aggregates
//     come as claims of kind aggregate, as Nephio's client sends them);
//     of a VLANIndex, the VRF of its VLAN IDs (translate.VLANIndex).
//   - Claim of an IPClaim with createPrefix and a prefix declares that
//     prefix (how Nephio's client sends IPPrefixes and aggregates); any
//     other IPClaim, and every VLANClaim, is an allocation keyed
//     translate.NephioIPClaimName / NephioVLANClaimName of its name.
//   - GetClaim reads it, DeleteClaim and DeleteIndex release it (an
//     absent one is no error), WatchClaim streams the changes of the
//     claims of the owners of one kind.
package resource
