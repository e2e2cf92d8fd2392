package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/kptdev/krm-functions-sdk/go/fn"
	"google.golang.org/protobuf/proto"

	ipamv1alpha1 "github.com/nephio-project/ipam/api/ipam/v1alpha1"
	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/vocab"
)

// Annotations of the root Kptfile that tie a package to its owner on
// ipam-server.
const (
	// AnnotationPackageID is the package's identity. The first run writes
	// it; ipam-server binds the owner to it and refuses a Sync of the same
	// owner from a package with another identity (a copy that kept the
	// Kptfile name) while the owner holds objects.
	AnnotationPackageID = ipamv1alpha1.Group + "/package-id"
	// AnnotationSource on the root Kptfile says where the package lives
	// (a URL of its directory in Git) when the functionConfig sets no
	// source; ipam-server keeps it for people (the web view's owner link).
	AnnotationSource = ipamv1alpha1.Group + "/source"
	// AnnotationAdopt, set to "true", lets the package take over an owner
	// bound to another identity, or changed by another copy since this
	// one was rendered. The run that adopts removes it, so it acts once.
	AnnotationAdopt = ipamv1alpha1.Group + "/adopt"
	// AnnotationGeneration is the owner generation the package was last
	// rendered at. Each run sends it (none: 0) and writes the one
	// ipam-server answers when it differs. ipam-server refuses a run that
	// would change the owner's objects from a generation below the
	// owner's: another copy of the package (cp -r keeps the owner and the
	// identity) changed them since, and this one would undo that.
	AnnotationGeneration = ipamv1alpha1.Group + "/generation"
)

// identity is the package identity of a run: the root Kptfile that holds
// it (nil: none), the id, the owner generation the package was last
// rendered at, whether it adopts, and whether the run uses identities
// (and generations) at all.
type identity struct {
	kptfile    *fn.KubeObject
	id         string
	generation uint64
	adopt      bool
	off        bool
}

// readIdentity reads the identity annotations of the root Kptfile k (nil:
// no identity); with off, the run sends and writes no identity and no
// generation. A malformed adopt or generation annotation is an error
// result.
func readIdentity(k *fn.KubeObject, off bool) (identity, fn.Results) {
	if k == nil || off {
		return identity{kptfile: k, off: true}, nil
	}
	idn := identity{kptfile: k, id: strings.TrimSpace(k.GetAnnotation(AnnotationPackageID))}
	var results fn.Results
	if v, ok := k.GetAnnotations()[AnnotationAdopt]; ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			results = append(results, kptfileResult(k, annotationField(AnnotationAdopt), fmt.Sprintf("%q is not \"true\" or \"false\"", v), "InvalidArgument"))
		}
		idn.adopt = b
	}
	if v, ok := k.GetAnnotations()[AnnotationGeneration]; ok {
		g, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil || g > vocab.MaxGeneration {
			results = append(results, kptfileResult(k, annotationField(AnnotationGeneration), fmt.Sprintf(
				"%s is not an owner generation (a number from 0 to %d, written by ipam-fn)", vocab.Quote(v), uint64(vocab.MaxGeneration)), "InvalidArgument"))
		}
		idn.generation = g
	}
	return idn, results
}

// mint derives the identity of a package that has none from what it
// declares: the same package rendered twice, or by two people, gets the
// same id, and a copy edited before its first run gets another.
func (idn *identity) mint(req *ipamv1.SyncRequest) {
	if idn.off || idn.id != "" {
		return
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	sum := sha256.Sum256(b)
	idn.id = hex.EncodeToString(sum[:10])
}

// write records the identity in the Kptfile copy next: the minted id,
// the owner generation ipam-server answered (0: an older server, which
// keeps none), and the adopt annotation consumed.
func (idn *identity) write(next *fn.KubeObject, generation uint64) (bool, error) {
	if idn.off {
		return false, nil
	}
	changed := false
	if next.GetAnnotation(AnnotationPackageID) != idn.id {
		if err := next.SetAnnotation(AnnotationPackageID, idn.id); err != nil {
			return false, err
		}
		changed = true
	}
	if g := strconv.FormatUint(generation, 10); generation > 0 && next.GetAnnotation(AnnotationGeneration) != g {
		if err := next.SetAnnotation(AnnotationGeneration, g); err != nil {
			return false, err
		}
		changed = true
	}
	if _, ok := next.GetAnnotations()[AnnotationAdopt]; ok {
		if _, err := next.RemoveNestedField("metadata", "annotations", AnnotationAdopt); err != nil {
			return false, err
		}
		changed = true
	}
	return changed, nil
}

// annotationField is the result field path of a metadata annotation.
func annotationField(key string) string { return "metadata.annotations[" + key + "]" }

// kptfileResult is an error result about field of the Kptfile k.
func kptfileResult(k *fn.KubeObject, field, msg, code string) *fn.Result {
	o := &object{item: k, kind: k.GetKind(), name: k.GetName()}
	return objectResult(o, field, msg, code)
}

// identityResult is the result of the server's refusal of the package's
// identity (item field "identity" of the Sync of owner), on the Kptfile
// when there is one. The server's fact stays; its advice, after the last
// "; ", becomes the package's.
func identityResult(idn identity, owner, msg, code string) *fn.Result {
	msg = strings.TrimPrefix(msg, "Sync "+owner+": identity: ")
	if i := strings.LastIndex(msg, "; "); i >= 0 {
		msg = msg[:i]
	}
	msg += fmt.Sprintf(": a copy of a package needs an owner of its own (change metadata.name of its Kptfile, or the owner setting); "+
		"a package that replaces the other one takes the owner over with the Kptfile annotation %s: \"true\", once", AnnotationAdopt)
	if idn.kptfile == nil {
		return &fn.Result{Severity: fn.Error, Message: "ipam-fn: " + msg, Tags: map[string]string{"code": code}}
	}
	return kptfileResult(idn.kptfile, annotationField(AnnotationPackageID), msg, code)
}

// generationResult is the result of the server's refusal of the package's
// owner generation (item field "generation" of the Sync of owner): another
// copy of the package changed the owner since this one was rendered. The
// server's fact stays; its advice, after the last "; ", becomes the
// package's.
func generationResult(idn identity, owner, msg, code string) *fn.Result {
	msg = strings.TrimPrefix(msg, "Sync "+owner+": generation: ")
	if i := strings.LastIndex(msg, "; "); i >= 0 {
		msg = msg[:i]
	}
	msg += fmt.Sprintf(" (or the output of a later render of this one was not kept), "+
		"and this render would undo that change: render the current copy instead; "+
		"to fork this package on purpose, give it an owner of its own (change metadata.name of its Kptfile, or the owner setting); "+
		"a package that replaces the other one takes the owner over with the Kptfile annotation %s: \"true\", once",
		AnnotationAdopt)
	if idn.kptfile == nil {
		return &fn.Result{Severity: fn.Error, Message: "ipam-fn: " + msg, Tags: map[string]string{"code": code}}
	}
	return kptfileResult(idn.kptfile, annotationField(AnnotationGeneration), msg, code)
}
