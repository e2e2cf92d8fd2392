package controllers

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	nipamv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/ipam/v1alpha1"
	vlanv1alpha1 "github.com/nephio-project/ipam/api/nephioresource/vlan/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
	"github.com/nephio-project/ipam/service/client"
)

// The Nephio front: Nephio's IPClaims, VLANClaims and VLANIndexes
// (ipam.resource.nephio.org, vlan.resource.nephio.org) served from
// ipam-server, in place of Nephio's resource backend. IPClaims take
// from the VRFs and prefixes any front declares (an ipam.nephio.org
// NetworkInstance and IPPrefix, or a package's); a claim's allocation is
// keyed translate.NephioIPClaimName / NephioVLANClaimName of its name, a
// VLAN index's VRF translate.VLANVRF of its name.

// nephioIPClaimKind adapts Nephio's IPClaims: an address or prefix
// allocated from ipam-server, released with the claim.
type nephioIPClaimKind struct{ *reconciler }

func (nephioIPClaimKind) conditions(c *nipamv1alpha1.IPClaim) *[]metav1.Condition {
	return &c.Status.Conditions
}

func (nephioIPClaimKind) status(c *nipamv1alpha1.IPClaim) any { return c.Status }

func (r nephioIPClaimKind) release(ctx context.Context, c *nipamv1alpha1.IPClaim) (ctrl.Result, error) {
	return r.finalize(ctx, c, &c.Status.Conditions, "Release", func() error {
		_, err := r.ipam.Release(ctx, &ipamv1.DeleteRequest{Key: &ipamv1.Key{Owner: r.owner, Namespace: c.Namespace, Name: translate.NephioIPClaimName(c.Name)}})
		return err
	})
}

func (r nephioIPClaimKind) serve(ctx context.Context, c *nipamv1alpha1.IPClaim) (verdict, error) {
	keyed := c.DeepCopy()
	keyed.Name = translate.NephioIPClaimName(c.Name)
	want, err := translate.IPClaim(r.owner, keyed)
	var o outcome
	var res *ipamv1.Result
	switch {
	case err != nil:
		var fe *translate.FieldError
		if errors.As(err, &fe) {
			fe.Name = c.Name
		}
		o, err = outcome{synced: true, message: err.Error(), retry: retryResync}, nil
	case c.Spec.Index != nil:
		if err = client.ResolveIndex(ctx, r.ipam.List, want, *c.Spec.Index, nil); err != nil {
			if _, isStatus := status.FromError(err); isStatus {
				o = classify(err, "")
				break
			}
			o = outcome{synced: true, message: "IPClaim " + translate.ID(c.Namespace, c.Name) + ": " + err.Error(), retry: retryBackoff}
			err = nil
		}
	}
	if err == nil && o.message == "" {
		var resp *ipamv1.AllocateResponse
		resp, err = r.ipam.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: want})
		res = resp.GetResult()
		o = classify(err, "allocated "+res.GetPrefix())
	}
	o.message = translate.NephioMessage(o.message)
	setConditions(&c.Status.Conditions, o, c.Generation)
	if o.synced {
		c.Status.Prefix, c.Status.Gateway = optional(res.GetPrefix()), optional(res.GetGateway())
	}
	return verdict{o: o, err: err, action: "Allocate", pool: c.Spec.NetworkInstance.Name}, nil
}

// optional is s, or nil when s is empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nephioVLANClaimKind adapts Nephio's VLANClaims: VLAN IDs allocated from
// their index's VRF, released with the claim.
type nephioVLANClaimKind struct{ *reconciler }

func (nephioVLANClaimKind) conditions(c *vlanv1alpha1.VLANClaim) *[]metav1.Condition {
	return &c.Status.Conditions
}

func (nephioVLANClaimKind) status(c *vlanv1alpha1.VLANClaim) any { return c.Status }

func (r nephioVLANClaimKind) release(ctx context.Context, c *vlanv1alpha1.VLANClaim) (ctrl.Result, error) {
	return r.finalize(ctx, c, &c.Status.Conditions, "Release", func() error {
		_, err := r.ipam.Release(ctx, &ipamv1.DeleteRequest{Key: &ipamv1.Key{Owner: r.owner, Namespace: c.Namespace, Name: translate.NephioVLANClaimName(c.Name)}})
		return err
	})
}

func (r nephioVLANClaimKind) serve(ctx context.Context, c *vlanv1alpha1.VLANClaim) (verdict, error) {
	keyed := c.DeepCopy()
	keyed.Name = translate.NephioVLANClaimName(c.Name)
	want, err := translate.VLANClaim(r.owner, keyed)
	var o outcome
	var res *ipamv1.Result
	if err != nil {
		var fe *translate.FieldError
		if errors.As(err, &fe) {
			fe.Name = c.Name
		}
		o = outcome{synced: true, message: err.Error(), retry: retryResync}
		err = nil
	} else {
		var resp *ipamv1.AllocateResponse
		resp, err = r.ipam.Allocate(ctx, &ipamv1.AllocateRequest{Allocation: want})
		res = resp.GetResult()
		o = classify(err, "")
	}
	var id *uint16
	var rng string
	if err == nil && o.ready {
		n, r, verr := translate.VLANResult(c, res)
		switch {
		case verr != nil:
			o = outcome{synced: true, message: verr.Error(), retry: retryBackoff}
		case r != "":
			rng, o.message = r, "allocated VLAN IDs "+r
		default:
			v := uint16(n)
			id, o.message = &v, "allocated VLAN ID "+strconv.Itoa(n)
		}
	}
	o.message = translate.NephioMessage(o.message)
	setConditions(&c.Status.Conditions, o, c.Generation)
	if o.synced {
		c.Status.VLANID, c.Status.VLANRange = id, optional(rng)
	}
	return verdict{o: o, err: err, action: "Allocate", pool: c.Spec.VLANIndex.Name}, nil
}

// nephioVLANIndexKind adapts Nephio's VLANIndexes: the VRF of the index's
// VLAN IDs, deleted with the index unless claims still hold IDs of it.
type nephioVLANIndexKind struct{ *reconciler }

func (nephioVLANIndexKind) conditions(x *vlanv1alpha1.VLANIndex) *[]metav1.Condition {
	return &x.Status.Conditions
}

func (nephioVLANIndexKind) status(x *vlanv1alpha1.VLANIndex) any { return x.Status }

func (r nephioVLANIndexKind) release(ctx context.Context, x *vlanv1alpha1.VLANIndex) (ctrl.Result, error) {
	return r.finalize(ctx, x, &x.Status.Conditions, "DeletePrefix", func() error {
		key := &ipamv1.Key{Owner: r.owner, Namespace: x.Namespace, Name: translate.VLANVRF(x.Name)}
		if _, err := r.ipam.DeletePrefix(ctx, &ipamv1.DeleteRequest{Key: key}); err != nil && !isNotFound(err) {
			return err
		}
		_, err := r.ipam.DeleteNetworkInstance(ctx, &ipamv1.DeleteRequest{Key: key})
		return err
	})
}

func (r nephioVLANIndexKind) serve(ctx context.Context, x *vlanv1alpha1.VLANIndex) (verdict, error) {
	ni, p := translate.VLANIndex(r.owner, x)
	_, err := r.ipam.CreateNetworkInstance(ctx, &ipamv1.CreateNetworkInstanceRequest{NetworkInstance: ni})
	if err == nil {
		_, err = r.ipam.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: p})
	}
	o := classify(err, "VLAN IDs 1-4094 ready")
	setConditions(&x.Status.Conditions, o, x.Generation)
	return verdict{o: o, err: err, action: "CreateNetworkInstance", pool: ni.GetKey().GetName()}, nil
}

// nephioKeyName is the key name of Nephio's IPPrefix named name in the
// cluster: nephio-ipprefix.<name>, apart from an ipam.nephio.org
// IPPrefix of the same name.
func nephioKeyName(name string) string { return "nephio-ipprefix." + name }

// nephioNetworkInstanceKind adapts Nephio's NetworkInstances: the VRF of
// their name with their aggregates, the same VRF an ipam.nephio.org
// NetworkInstance of that name declares.
type nephioNetworkInstanceKind struct{ *reconciler }

func (nephioNetworkInstanceKind) conditions(ni *nipamv1alpha1.NetworkInstance) *[]metav1.Condition {
	return &ni.Status.Conditions
}

func (nephioNetworkInstanceKind) status(ni *nipamv1alpha1.NetworkInstance) any { return ni.Status }

func (r nephioNetworkInstanceKind) release(ctx context.Context, ni *nipamv1alpha1.NetworkInstance) (ctrl.Result, error) {
	return r.releaseKeyed(ctx, ni, &ni.Status.Conditions, "DeleteNetworkInstance", r.ipam.DeleteNetworkInstance)
}

func (r nephioNetworkInstanceKind) serve(ctx context.Context, ni *nipamv1alpha1.NetworkInstance) (verdict, error) {
	_, err := r.ipam.CreateNetworkInstance(ctx, &ipamv1.CreateNetworkInstanceRequest{NetworkInstance: translate.NephioNetworkInstance(r.owner, ni)})
	o := classify(err, "network instance ready")
	setConditions(&ni.Status.Conditions, o, ni.Generation)
	if o.synced {
		ni.Status.Prefixes = nil
		if o.ready {
			ni.Status.Prefixes = append([]nipamv1alpha1.Prefix(nil), ni.Spec.Prefixes...)
		}
	}
	return verdict{o: o, err: err, action: "CreateNetworkInstance", pool: ni.Name}, nil
}

// nephioPrefixKind adapts Nephio's IPPrefixes: recorded in ipam-server
// (a network written with a host part as its network and that address,
// translate.NephioPrefix), deleted with their object unless they still
// hold children.
type nephioPrefixKind struct{ *reconciler }

func (nephioPrefixKind) conditions(p *nipamv1alpha1.IPPrefix) *[]metav1.Condition {
	return &p.Status.Conditions
}

func (nephioPrefixKind) status(p *nipamv1alpha1.IPPrefix) any { return p.Status }

func (r nephioPrefixKind) release(ctx context.Context, p *nipamv1alpha1.IPPrefix) (ctrl.Result, error) {
	return r.finalize(ctx, p, &p.Status.Conditions, "DeletePrefix", func() error {
		for _, name := range []string{translate.NephioHostName(nephioKeyName(p.Name)), nephioKeyName(p.Name)} {
			_, err := r.ipam.DeletePrefix(ctx, &ipamv1.DeleteRequest{Key: &ipamv1.Key{Owner: r.owner, Namespace: p.Namespace, Name: name}})
			if err != nil && !isNotFound(err) {
				return err
			}
		}
		return nil
	})
}

func (r nephioPrefixKind) serve(ctx context.Context, p *nipamv1alpha1.IPPrefix) (verdict, error) {
	keyed := p.DeepCopy()
	keyed.Name = nephioKeyName(p.Name)
	xs, err := translate.NephioPrefix(r.owner, keyed)
	if err != nil {
		o := outcome{synced: true, message: strings.Replace(err.Error(), keyed.Name, p.Name, 1), retry: retryResync}
		setConditions(&p.Status.Conditions, o, p.Generation)
		return verdict{o: o, action: "CreatePrefix", pool: p.Spec.NetworkInstance.Name}, nil
	}
	var res *ipamv1.Result
	if len(xs) == 1 {
		var resp *ipamv1.CreatePrefixResponse
		if resp, err = r.ipam.CreatePrefix(ctx, &ipamv1.CreatePrefixRequest{Prefix: xs[0]}); err == nil {
			res = resp.GetResult()
		}
	} else {
		// The network and the address in it, in one step: a claim served
		// between two calls could take the address.
		var resp *ipamv1.SyncResponse
		if resp, err = r.ipam.Sync(ctx, &ipamv1.SyncRequest{Owner: r.owner, Prefixes: xs}); err == nil {
			if ps := resp.GetPrefixes(); len(ps) > 0 {
				res = ps[len(ps)-1]
			}
		}
	}
	o := classify(err, "recorded "+res.GetPrefix())
	setConditions(&p.Status.Conditions, o, p.Generation)
	if o.synced {
		p.Status.Prefix = optional(res.GetPrefix())
	}
	return verdict{o: o, err: err, action: "CreatePrefix", pool: p.Spec.NetworkInstance.Name}, nil
}
