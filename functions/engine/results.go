package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kptdev/krm-functions-sdk/go/fn"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/api/translate"
	"github.com/nephio-project/ipam/api/vocab"
	"github.com/nephio-project/ipam/service/client"
)

// Annotations that say where an item came from: kpt sets both, the
// legacy one for older functions.
const (
	annotationPath        = "internal.config.kubernetes.io/path"
	annotationPathLegacy  = "config.kubernetes.io/path"
	annotationIndex       = "internal.config.kubernetes.io/index"
	annotationIndexLegacy = "config.kubernetes.io/index"
)

// pathOf is the file it came from, relative to the package, or "".
func pathOf(it *fn.KubeObject) string {
	if p := it.GetAnnotation(annotationPath); p != "" {
		return p
	}
	return it.GetAnnotation(annotationPathLegacy)
}

// fileOf is the file it came from and its position in that file, or nil.
func fileOf(it *fn.KubeObject) *fn.File {
	p := pathOf(it)
	if p == "" {
		return nil
	}
	idx := it.GetAnnotation(annotationIndex)
	if idx == "" {
		idx = it.GetAnnotation(annotationIndexLegacy)
	}
	i, _ := strconv.Atoi(idx)
	return &fn.File{Path: p, Index: i}
}

// objectResult is an error result about field of o (the whole object when
// field is empty). The result's resourceRef, field and file name the place;
// the message says what is wrong there, without repeating the object and
// field a server message starts with, and ends with the file for readers
// of kpt's one-line summary.
func objectResult(o *object, field, msg, code string) *fn.Result {
	msg = strings.TrimPrefix(msg, o.id()+": ")
	for _, a := range o.aliases {
		// A server message about an object o stands for (a claim's
		// allocation, a VLAN index's VRF) starts with that object's name,
		// which the resource ref names better.
		msg = strings.TrimPrefix(msg, a.object+" "+translate.ID(a.ns, a.name)+": ")
	}
	if field != "" {
		msg = strings.TrimPrefix(msg, field+": ")
	}
	file := fileOf(o.item)
	if file != nil {
		msg += " (" + file.Path + ")"
	}
	r := &fn.Result{
		Severity:    fn.Error,
		Message:     msg,
		ResourceRef: &fn.ResourceRef{APIVersion: o.item.GetAPIVersion(), Kind: o.kind, Name: o.name, Namespace: o.ns},
		File:        file,
	}
	if field != "" {
		r.Field = &fn.Field{Path: field}
		if v, ok := scalarAt(o.item, field); ok {
			r.Field.CurrentValue = v
		}
	}
	if code != "" {
		r.Tags = map[string]string{"code": code}
	}
	return r
}

// scalarAt is the string or integer value of a dotted field path without
// list indexes (spec.prefix, spec.prefixLength), if there is one.
func scalarAt(it *fn.KubeObject, field string) (any, bool) {
	if strings.ContainsAny(field, "[]") {
		return nil, false
	}
	fields := strings.Split(field, ".")
	if s, found, err := it.NestedString(fields...); found && err == nil {
		return s, true
	}
	if i, found, err := it.NestedInt64(fields...); found && err == nil {
		return i, true
	}
	return nil, false
}

// syncErrorResults maps a failed Sync to results: one per failed item the
// server names, attached to that item's resource when it is in the
// package, or one result for the whole call.
func syncErrorResults(err error, opts Options, objs []*object, idn identity) fn.Results {
	st, ok := status.FromError(err)
	if !ok {
		return fn.Results{{Severity: fn.Error, Message: fmt.Sprintf("ipam-fn: Sync with ipam-server at %s: %v", opts.Server, err)}}
	}
	var items []*ipamv1.ItemError
	omitted := 0
	for _, d := range st.Details() {
		if sf, ok := d.(*ipamv1.SyncFailure); ok {
			items = append(items, sf.GetItems()...)
			omitted += int(sf.GetOmitted())
		}
	}
	if len(items) == 0 {
		switch {
		case st.Code() == codes.Unavailable,
			st.Code() == codes.DeadlineExceeded,
			errors.Is(err, context.DeadlineExceeded):
			msg := st.Message()
			if st.Code() == codes.DeadlineExceeded {
				msg += fmt.Sprintf(" (no answer within the timeout, %s)", opts.timeout())
			}
			if strings.Contains(msg, "network is unreachable") || strings.Contains(msg, "connection refused") && client.Loopback(opts.Server) {
				// Without --allow-network kpt gives the function container
				// no network: no route, or a loopback of its own where
				// nothing listens.
				msg += " (in container mode, kpt fn render needs --allow-network)"
			}
			return fn.Results{{Severity: fn.Error, Message: fmt.Sprintf(
				"ipam-fn: cannot reach ipam-server at %s (%s): %s", opts.Server, opts.ServerHint, msg)}}
		}
		return fn.Results{{Severity: fn.Error, Message: fmt.Sprintf("ipam-fn: ipam-server at %s: %s: %s", opts.Server, st.Code(), st.Message())}}
	}
	var results fn.Results
	for _, it := range items {
		code := codes.Code(it.GetCode()).String()
		kind := translate.ItemKind(it)
		if it.GetField() == "identity" && kind == vocab.ObjSync {
			results = append(results, identityResult(idn, it.GetKey().GetName(), it.GetMessage(), code))
			continue
		}
		if it.GetField() == "generation" && kind == vocab.ObjSync {
			results = append(results, generationResult(idn, it.GetKey().GetName(), it.GetMessage(), code))
			continue
		}
		matched := false
		for _, o := range objs {
			if o.answers(it) {
				field, msg := it.GetField(), it.GetMessage()
				if o.nres != nil {
					field, msg = o.nephioError(field, msg)
				}
				results = append(results, objectResult(o, field, msg, code))
				matched = true
			}
		}
		if !matched {
			results = append(results, &fn.Result{Severity: fn.Error, Message: it.GetMessage(), Tags: map[string]string{"code": code}})
		}
	}
	if omitted > 0 {
		results = append(results, &fn.Result{Severity: fn.Error, Message: fmt.Sprintf(
			"ipam-fn: %d more resources failed; ipam-server lists the first %d (fix these and render again)", omitted, len(items))})
	}
	return results
}
