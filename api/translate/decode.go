package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// DecodeSpec reads spec, the JSON of a resource's spec, into into (a
// pointer to the kind's spec struct) as the API server would: a field of
// the wrong type is an error naming the field, and an unknown field (a
// typo such as prefixLenght) is a warning naming it, since the API server
// drops it with a warning too. kind, namespace and name identify the
// resource in both.
func DecodeSpec(kind, namespace, name string, spec []byte, into any) (warnings []*FieldError, err error) {
	fe := func(field, msg string) *FieldError {
		return &FieldError{Kind: kind, Namespace: namespace, Name: name, Field: field, Msg: msg}
	}
	// A strict pass decodes a clean spec at once. It stops reporting at
	// its first problem, so when there is one a lenient pass tells a
	// field of the wrong type (an error) from an unknown field (a warning).
	d := json.NewDecoder(bytes.NewReader(spec))
	d.DisallowUnknownFields()
	strict := d.Decode(into)
	if strict == nil {
		return nil, nil
	}
	if err := json.Unmarshal(spec, into); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			var raw any
			_ = json.Unmarshal(spec, &raw)
			field, t := locate(raw, reflect.TypeOf(into).Elem(), strings.Split(te.Field, "."))
			return nil, fe(joinField("spec", field), expected(t))
		}
		return nil, fe("spec", "cannot be read: "+err.Error())
	}
	if f, ok := strings.CutPrefix(strict.Error(), "json: unknown field "); ok {
		warnings = append(warnings, fe("spec", "unknown field "+f+" is ignored"))
	}
	return warnings, nil
}

// locate finds the field of raw (decoded JSON of a value of type t) at
// path, as encoding/json names it (struct fields only), and adds the list
// index json leaves out: spec.prefixes[1].prefix, not spec.prefixes.prefix.
// It returns the path and the Go type of the field.
func locate(raw any, t reflect.Type, path []string) (string, reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if len(path) == 0 || path[0] == "" {
		return "", t
	}
	switch t.Kind() {
	case reflect.Slice:
		list, _ := raw.([]any)
		for i, e := range list {
			b, _ := json.Marshal(e)
			if json.Unmarshal(b, reflect.New(t.Elem()).Interface()) != nil {
				f, ft := locate(e, t.Elem(), path)
				return fmt.Sprintf("[%d]", i) + dotted(f), ft
			}
		}
		return strings.Join(path, "."), t
	case reflect.Struct:
		m, _ := raw.(map[string]any)
		for i := range t.NumField() {
			sf := t.Field(i)
			if name, _, _ := strings.Cut(sf.Tag.Get("json"), ","); name == path[0] {
				f, ft := locate(m[name], sf.Type, path[1:])
				if strings.HasPrefix(f, "[") {
					return name + f, ft
				}
				return joinField(name, f), ft
			}
		}
	}
	return strings.Join(path, "."), t
}

// dotted is f as the rest of a path after a list index.
func dotted(f string) string {
	if f == "" || strings.HasPrefix(f, "[") {
		return f
	}
	return "." + f
}

// joinField is the dotted path of field under parent.
func joinField(parent, field string) string {
	if field == "" {
		return parent
	}
	return parent + "." + field
}

// expected says what a field of type t must be.
func expected(t reflect.Type) string {
	if t == nil {
		return "has the wrong type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "must be a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "must be an integer in range"
	case reflect.Bool:
		return "must be true or false"
	case reflect.Map:
		return "must map keys to " + strings.TrimPrefix(strings.TrimPrefix(expected(t.Elem()), "must be "), "a ") + " values"
	case reflect.Slice:
		return "must be a list"
	case reflect.Struct:
		return "must be a map"
	}
	return "has the wrong type"
}
