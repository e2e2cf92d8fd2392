package ipam

// Kubernetes label syntax, written here in pure Go so that the core knows
// nothing of Kubernetes: the rules of k8s.io/apimachinery's
// validation.IsQualifiedName (keys) and validation.IsValidLabelValue
// (values), which a differential fuzz test in package ipamtest checks
// against apimachinery itself.

// Limits of Kubernetes label syntax.
const (
	// MaxLabelNameLength bounds the name part of a label key (after the
	// optional "prefix/") and a label value.
	MaxLabelNameLength = 63
	// MaxLabelPrefixLength bounds the prefix of a label key (a DNS-1123
	// subdomain).
	MaxLabelPrefixLength = 253
)

// LabelKeySyntax returns why k is not a Kubernetes label key, or "" when
// it is one: an optional prefix, a DNS-1123 subdomain of at most 253
// bytes followed by "/", and a name of 1 to 63 bytes of [A-Za-z0-9_.-]
// that begins and ends with a letter or digit.
func LabelKeySyntax(k string) string {
	name := k
	for i := 0; i < len(k); i++ {
		if k[i] != '/' {
			continue
		}
		prefix := k[:i]
		name = k[i+1:]
		if prefix == "" {
			return "the prefix before '/' is empty"
		}
		if why := dnsSubdomainSyntax(prefix); why != "" {
			return "the prefix " + why
		}
		break
	}
	switch {
	case name == "":
		return "the name is empty"
	case len(name) > MaxLabelNameLength:
		return "the name is longer than 63 bytes"
	case !nameSyntax(name):
		return "the name must be letters, digits, '-', '_' or '.', beginning and ending with a letter or digit"
	}
	return ""
}

// LabelValueSyntax returns why v is not a Kubernetes label value, or ""
// when it is one: empty, or at most 63 bytes of [A-Za-z0-9_.-] beginning
// and ending with a letter or digit.
func LabelValueSyntax(v string) string {
	switch {
	case v == "":
		return ""
	case len(v) > MaxLabelNameLength:
		return "longer than 63 bytes"
	case !nameSyntax(v):
		return "must be letters, digits, '-', '_' or '.', beginning and ending with a letter or digit"
	}
	return ""
}

// IsLabelValue reports whether v is a Kubernetes label value.
func IsLabelValue(v string) bool { return LabelValueSyntax(v) == "" }

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// nameSyntax: a non-empty string of [A-Za-z0-9_.-] beginning and ending
// with an alphanumeric character.
func nameSyntax(s string) bool {
	if s == "" || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// dnsSubdomainSyntax returns why s is not a DNS-1123 subdomain (at most
// 253 bytes of lower-case labels of [a-z0-9-] separated by '.', each
// beginning and ending with a letter or digit), or "".
func dnsSubdomainSyntax(s string) string {
	if len(s) > MaxLabelPrefixLength {
		return "is longer than 253 bytes"
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			c := s[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "must be a DNS subdomain: lower-case letters, digits, '-' and '.'"
			}
			continue
		}
		label := s[start:i]
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return "must be a DNS subdomain: dot-separated parts that begin and end with a letter or digit"
		}
		start = i + 1
	}
	return ""
}
