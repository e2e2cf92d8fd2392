package ipam

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nephio-project/ipam/api/vocab"
)

// Limits on what one request may carry, so that no request can make the
// allocator (or an error message about it) grow without bound. They follow
// Kubernetes' own limits, so every valid custom resource fits.
const (
	// MaxNameLength bounds object names, owners, network instance and
	// network names (a DNS-1123 subdomain is at most 253 bytes).
	MaxNameLength = 253
	// MaxNamespaceLength bounds namespaces (a DNS-1123 label).
	MaxNamespaceLength = 63
	// MaxLabelKeyLength bounds a label key: a DNS subdomain prefix of up
	// to 253 bytes, "/", and a name of up to 63 bytes.
	MaxLabelKeyLength = 253 + 1 + 63
	// MaxLabelValueLength bounds a label value.
	MaxLabelValueLength = 63
	// MaxLabels bounds the entries of one label map or selector.
	MaxLabels = 64
	// MaxListEntries bounds other lists of one object: a network
	// instance's prefixes, exclusions and pre-allocations.
	MaxListEntries = 1 << 16
	// MaxSourceLength bounds the source of a Sync (a package's URL).
	MaxSourceLength = 1024
	// MaxGeneration bounds the owner generation a Sync may carry (see
	// SyncRequest.Generation), far above what renders reach, so that the
	// owner's next generation never wraps around (vocab.MaxGeneration,
	// which clients check too).
	MaxGeneration = vocab.MaxGeneration
	// MaxQuoted is how much of a client's value an error message repeats
	// (vocab.MaxQuoted).
	MaxQuoted = vocab.MaxQuoted
)

// printable reports whether s is valid UTF-8 of printable characters only:
// no control characters, no format characters such as bidirectional
// overrides (U+202A–U+202E, U+2066–U+2069) or zero-width ones, no
// invalid bytes. Such characters in names and labels hide what an
// operator reads in a list, a log or a Git diff.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i]-0x20 > 0x7e-0x20 { // not ' '..'~'
			return printableUnicode(s[i:])
		}
	}
	return true
}

func printableUnicode(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return utf8.ValidString(s)
}

// Quote renders a client's value for an error message: quoted with Go
// escapes, and cut to MaxQuoted bytes with its full length named. It is
// vocab.Quote, which clients use for the same messages.
func Quote(s string) string { return vocab.Quote(s) }

// checkText checks one string field against its length limit and for
// printable characters; an empty string passes (required fields are
// checked where they are required).
func checkText(obj string, key Key, field, s string, max int) error {
	if len(s) > max {
		return errf(ErrInvalid, obj, key, field, "%d bytes exceed the limit of %d", len(s), max)
	}
	if !printable(s) {
		return errf(ErrInvalid, obj, key, field, "%s holds a control, format or invalid UTF-8 character", Quote(s))
	}
	return nil
}

// checkKey checks the owner, namespace and name of an object to store:
// checkKeyText's limits, and none blank or starting or ending with a
// space (checkPadding).
func checkKey(obj string, key Key) error {
	if err := checkKeyText(obj, key); err != nil {
		return err
	}
	if err := checkPadding(obj, key, "metadata.name", key.Name); err != nil {
		return err
	}
	if err := checkPadding(obj, key, "metadata.namespace", key.Namespace); err != nil {
		return err
	}
	return checkPadding(obj, key, "owner", key.Owner)
}

// checkPadding refuses a name, namespace, owner or identity to store that
// is blank or starts or ends with a space: " web" and "web" read alike in
// a list, a log or a Git diff but name different objects. Such names are
// refused where objects are written, not where they are looked up or
// restored, so that objects stored before keep being read, listed and
// deleted.
func checkPadding(obj string, key Key, field, s string) error {
	switch {
	case s == "":
		return nil
	case strings.Trim(s, " ") == "":
		return errf(ErrInvalid, obj, key, field, "%s is blank", Quote(s))
	case s[0] == ' ' || s[len(s)-1] == ' ':
		return errf(ErrInvalid, obj, key, field, "%s starts or ends with a space", Quote(s))
	}
	return nil
}

// checkKeyText checks the owner, namespace and name of an object against
// the limits and for printable characters. An oversized or unprintable
// key is reported with a key cut to fit, so the error never repeats it.
func checkKeyText(obj string, key Key) error {
	if len(key.Name) <= MaxNameLength && len(key.Namespace) <= MaxNamespaceLength && len(key.Owner) <= MaxNameLength &&
		printable(key.Name) && printable(key.Namespace) && printable(key.Owner) {
		return nil
	}
	safe := safeKey(key)
	if err := checkText(obj, safe, "metadata.name", key.Name, MaxNameLength); err != nil {
		return err
	}
	if err := checkText(obj, safe, "metadata.namespace", key.Namespace, MaxNamespaceLength); err != nil {
		return err
	}
	return checkText(obj, safe, "owner", key.Owner, MaxNameLength)
}

// safeKey is key with every part that breaks a limit replaced by a short
// placeholder, for error messages about key itself.
func safeKey(key Key) Key {
	fix := func(s string, max int) string {
		if len(s) <= max && printable(s) {
			return s
		}
		return fmt.Sprintf("<%d bytes>", len(s))
	}
	return Key{Owner: fix(key.Owner, MaxNameLength), Namespace: fix(key.Namespace, MaxNamespaceLength), Name: fix(key.Name, MaxNameLength)}
}

// CheckKey reports whether key (owner, namespace, name) is within the
// limits, with an *Error naming obj and the field when it is not. Fronts
// check the keys of lookups and deletions with it; the allocator checks
// every object it is asked to store, and refuses besides a name,
// namespace or owner that is blank or starts or ends with a space.
func CheckKey(obj string, key Key) error { return checkKeyText(obj, key) }

// CheckName checks a name that is not part of a key, such as a network
// instance a query names, against MaxNameLength and for printable
// characters.
func CheckName(obj string, key Key, field, name string) error {
	return checkText(obj, key, field, name, MaxNameLength)
}

// CheckNewName checks a name that objects will be stored under, such as
// the owner of a Sync, as CheckName does and for being blank or starting
// or ending with a space.
func CheckNewName(obj string, key Key, field, name string) error {
	if err := CheckName(obj, key, field, name); err != nil {
		return err
	}
	return checkPadding(obj, key, field, name)
}

// checkLabels checks a label map or selector of an object to store: the
// limits of checkLabelLimits, and each key and value in Kubernetes label
// syntax (LabelKeySyntax, LabelValueSyntax), since selectors are
// Kubernetes selectors and the Kubernetes fronts hold nothing else.
// Objects stored before are restored, read and deleted without it.
func checkLabels(obj string, key Key, field string, m map[string]string) error {
	if err := checkLabelLimits(obj, key, field, m); err != nil {
		return err
	}
	for k, v := range m {
		if why := LabelKeySyntax(k); why != "" {
			return errf(ErrInvalid, obj, key, field, "label key %s is not a Kubernetes label key: %s", Quote(k), why)
		}
		if why := LabelValueSyntax(v); why != "" {
			return errf(ErrInvalid, obj, key, field+"["+Quote(k)+"]", "%s is not a Kubernetes label value: %s", Quote(v), why)
		}
	}
	return nil
}

// checkSelector checks the selector of an allocation to store as
// checkLabels checks labels, except that the values of
// nephio.org/network-instance and nephio.org/network-name are checked as
// names (printable, neither blank nor padded; at most
// MaxLabelValueLength bytes, as every selector value): they match the
// system labels the core derives from network instance and network
// names, which may hold characters label values may not.
func checkSelector(obj string, key Key, field string, m map[string]string) error {
	if err := checkLabelLimits(obj, key, field, m); err != nil {
		return err
	}
	for k, v := range m {
		if why := LabelKeySyntax(k); why != "" {
			return errf(ErrInvalid, obj, key, field, "label key %s is not a Kubernetes label key: %s", Quote(k), why)
		}
		if k == LabelNetworkInstance || k == LabelNetworkName {
			if v != "" && (v[0] == ' ' || v[len(v)-1] == ' ') {
				return checkPadding(obj, key, field+"["+Quote(k)+"]", v)
			}
			continue // printable and within the limit: checkLabelLimits
		}
		if why := LabelValueSyntax(v); why != "" {
			return errf(ErrInvalid, obj, key, field+"["+Quote(k)+"]", "%s is not a Kubernetes label value: %s", Quote(v), why)
		}
	}
	return nil
}

// checkLabelLimits checks a label map or selector against the limits: its
// size, and each key and value's length and characters.
func checkLabelLimits(obj string, key Key, field string, m map[string]string) error {
	if len(m) > MaxLabels {
		return errf(ErrInvalid, obj, key, field, "%d labels exceed the limit of %d", len(m), MaxLabels)
	}
	for k, v := range m {
		if k == "" {
			return errf(ErrInvalid, obj, key, field, "a label key is empty")
		}
		if err := checkText(obj, key, field, k, MaxLabelKeyLength); err != nil {
			return err
		}
		if len(v) > MaxLabelValueLength || !printable(v) {
			return checkText(obj, key, field+"["+Quote(k)+"]", v, MaxLabelValueLength)
		}
	}
	return nil
}

// CheckLabels checks a label map or selector a front passes on for a
// read (a query's selector, say) against the limits the allocator applies
// to stored labels, but not against label syntax: objects stored before
// the syntax was enforced stay selectable.
func CheckLabels(obj string, key Key, field string, m map[string]string) error {
	return checkLabelLimits(obj, key, field, m)
}

// checkCount bounds the length of a list field.
func checkCount(obj string, key Key, field string, n int) error {
	if n > MaxListEntries {
		return errf(ErrInvalid, obj, key, field, "%d entries exceed the limit of %d", n, MaxListEntries)
	}
	return nil
}

// checkPrefixText checks the strings and lists of a request against the limits;
// recorded objects are restored as they were stored.
func checkPrefixText(p Prefix) error {
	if err := checkKey(ObjPrefix, p.Key); err != nil {
		return err
	}
	if err := checkText(ObjPrefix, p.Key, "spec.networkInstance", p.NetworkInstance, MaxNameLength); err != nil {
		return err
	}
	if err := CheckNewName(ObjPrefix, p.Key, "spec.network", p.Network); err != nil {
		return err
	}
	if err := checkLabels(ObjPrefix, p.Key, "metadata.labels", p.Labels); err != nil {
		return err
	}
	if err := checkCount(ObjPrefix, p.Key, "spec.exclusions", len(p.Exclusions)); err != nil {
		return err
	}
	return nil
}

// checkNIText checks the strings and lists of a request against the limits;
// recorded objects are restored as they were stored.
func checkNIText(ni NetworkInstance) error {
	if err := checkKey(ObjNetworkInstance, ni.Key); err != nil {
		return err
	}
	if err := checkLabels(ObjNetworkInstance, ni.Key, "metadata.labels", ni.Labels); err != nil {
		return err
	}
	if err := checkCount(ObjNetworkInstance, ni.Key, "spec.prefixes", len(ni.Prefixes)); err != nil {
		return err
	}
	for i, p := range ni.Prefixes {
		if err := checkLabels(ObjNetworkInstance, ni.Key, fmt.Sprintf("spec.prefixes[%d].labels", i), p.Labels); err != nil {
			return err
		}
	}
	return nil
}

// checkRangeText checks the strings and lists of a request against the limits;
// recorded objects are restored as they were stored.
func checkRangeText(r IPRange) error {
	k := r.Key
	if err := checkKey(ObjRange, k); err != nil {
		return err
	}
	if err := checkText(ObjRange, k, "spec.networkInstance", r.NetworkInstance, MaxNameLength); err != nil {
		return err
	}
	if err := checkLabels(ObjRange, k, "metadata.labels", r.Labels); err != nil {
		return err
	}
	if err := checkCount(ObjRange, k, "spec.exclusions", len(r.Exclusions)); err != nil {
		return err
	}
	if err := checkCount(ObjRange, k, "spec.preAllocations", len(r.PreAllocations)); err != nil {
		return err
	}
	for name := range r.PreAllocations {
		if name == "" {
			return errf(ErrInvalid, ObjRange, k, "spec.preAllocations", "a pre-allocation name is empty")
		}
		if err := CheckNewName(ObjRange, k, "spec.preAllocations", name); err != nil {
			return err
		}
	}
	return nil
}
