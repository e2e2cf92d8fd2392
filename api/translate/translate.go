// Package translate is the one translation between the ipam.nephio.org
// resources (package api/ipam/v1alpha1) and the messages of ipam-server
// (package api/proto/ipam/v1). ipam-fn, the Porch injector and the
// in-cluster controllers all build their requests here, so one resource
// makes the same request, or the same error, whichever front reads it.
//
// The translation refuses what the service cannot express (a
// selector.matchExpressions) and leaves every other check to the service,
// which applies one set of rules to every front.
package translate

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
)

// FieldError is a field of a resource that cannot be translated.
type FieldError struct {
	// Kind, Namespace and Name identify the resource.
	Kind, Namespace, Name string
	// Field is the path of the field, e.g. spec.selector.matchExpressions.
	Field string
	// Msg says what is wrong with it.
	Msg string
}

// Error names the resource and the field, in the form the service's own
// messages take.
func (e *FieldError) Error() string {
	return e.Kind + " " + ID(e.Namespace, e.Name) + ": " + e.Field + ": " + e.Msg
}

// ID is how messages name an object: namespace/name, or name alone.
func ID(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// Key is the service's key of obj when owner declares it.
func Key(owner string, obj metav1.Object) *ipamv1.Key {
	return &ipamv1.Key{Owner: owner, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// Labels are the user labels of a prefix or request: metadata.labels with
// spec.labels added (spec wins), or nil when both are empty.
func Labels(meta, spec map[string]string) map[string]string {
	if len(meta)+len(spec) == 0 {
		return nil
	}
	out := maps.Clone(meta)
	if out == nil {
		out = make(map[string]string, len(spec))
	}
	maps.Copy(out, spec)
	return out
}

// NetworkInstance is the service's network instance for ni, declared by
// owner: the VRF with its aggregates.
func NetworkInstance(owner string, ni *ipamv1alpha1.NetworkInstance) *ipamv1.NetworkInstance {
	out := &ipamv1.NetworkInstance{Key: Key(owner, ni), Labels: Labels(ni.Labels, nil)}
	for _, p := range ni.Spec.Prefixes {
		out.Prefixes = append(out.Prefixes, &ipamv1.VRFPrefix{Prefix: p.Prefix, Labels: Labels(p.Labels, nil)})
	}
	return out
}

// Prefix is the service's prefix for p, declared by owner.
func Prefix(owner string, p *ipamv1alpha1.IPPrefix) *ipamv1.Prefix {
	return &ipamv1.Prefix{
		Key:             Key(owner, p),
		Kind:            string(p.Spec.Kind),
		NetworkInstance: p.Spec.NetworkInstance,
		Network:         p.Spec.Network,
		Prefix:          p.Spec.Prefix,
		Labels:          Labels(p.Labels, p.Spec.Labels),
	}
}

// Allocation is the service's request for a, made by owner. A selector
// with matchExpressions is refused with a *FieldError: the service selects
// by labels only, and ignoring the expressions would allocate from
// prefixes they exclude.
func Allocation(owner string, a *ipamv1alpha1.IPAllocation) (*ipamv1.Allocation, error) {
	out := &ipamv1.Allocation{
		Key:             Key(owner, a),
		Kind:            string(a.Spec.Kind),
		NetworkInstance: a.Spec.NetworkInstance,
		Prefix:          a.Spec.Prefix,
		AddressFamily:   string(a.Spec.AddressFamily),
		Labels:          Labels(a.Labels, a.Spec.Labels),
	}
	if a.Spec.PrefixLength != nil {
		out.PrefixLength = *a.Spec.PrefixLength
	}
	if sel := a.Spec.Selector; sel != nil {
		if len(sel.MatchExpressions) > 0 {
			return nil, &FieldError{Kind: ipamv1alpha1.KindIPAllocation, Namespace: a.Namespace, Name: a.Name,
				Field: "spec.selector.matchExpressions", Msg: "not supported: ipam-server selects by labels; use matchLabels"}
		}
		out.Selector = Labels(sel.MatchLabels, nil)
	}
	return out, nil
}

// ItemKind is the kind, as users know it (vocab.ObjAllocation, ...,
// vocab.ObjSync), of the object the item error it is about: its typed
// kind when the server sent one, else its object string (servers before
// ItemError.kind sent only that).
func ItemKind(it *ipamv1.ItemError) string {
	if k := it.GetKind(); k != ipamv1.ObjectKind_OBJECT_KIND_UNSPECIFIED {
		return ipamv1.KindName(k)
	}
	return it.GetObject()
}

// ReadyMessage is the message of the Ready condition of a resource of
// kind that the service accepted with res.
func ReadyMessage(kind string, res *ipamv1.Result) string {
	switch kind {
	case ipamv1alpha1.KindIPAllocation:
		return "allocated " + res.GetPrefix()
	case ipamv1alpha1.KindIPPrefix:
		return "recorded " + res.GetPrefix()
	default:
		return "network instance ready"
	}
}
