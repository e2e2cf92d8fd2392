package ipamv1

import "github.com/nephio-project/ipam/api/vocab"

// kindNames names the object kinds as users know them: the one table
// between the wire's ObjectKind and package vocab's names.
var kindNames = map[ObjectKind]string{
	ObjectKind_OBJECT_KIND_NETWORK_INSTANCE: vocab.ObjNetworkInstance,
	ObjectKind_OBJECT_KIND_PREFIX:           vocab.ObjPrefix,
	ObjectKind_OBJECT_KIND_RANGE:            vocab.ObjRange,
	ObjectKind_OBJECT_KIND_ALLOCATION:       vocab.ObjAllocation,
}

// KindName is the kind a user knows for k (vocab.ObjAllocation, ...);
// the enum's own name for a kind without one.
func KindName(k ObjectKind) string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return k.String()
}

// KindOf is the wire kind of the object kind a user knows as name;
// OBJECT_KIND_UNSPECIFIED for vocab.ObjSync (a request itself) and any
// other name.
func KindOf(name string) ObjectKind {
	for k, n := range kindNames {
		if n == name {
			return k
		}
	}
	return ObjectKind_OBJECT_KIND_UNSPECIFIED
}
