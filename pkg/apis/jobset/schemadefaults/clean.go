package schemadefaults

import (
	"reflect"
)

// clean says whether the unstructured check of the typed value v against n
// certainly finds nothing wrong. It reads the typed value directly, without
// the conversion to JSON values that the exact check needs (which costs as
// much as the rest of a create's validation), so a valid template, the usual
// case, is accepted cheaply. Like needs, it errs on the side of false:
// whenever the Go value does not match what the node knows of it, or a
// value is not a plain string where an enum applies, the exact check
// decides.
func (n *node) clean(v reflect.Value) bool {
	if n.checksNothing() {
		return true
	}
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return true // null: nothing below it is checked
		}
		v = v.Elem()
	}
	if n.goType == nil || v.Type() != n.goType {
		return false
	}
	switch v.Kind() {
	case reflect.Struct:
		return n.structClean(v)
	case reflect.Slice, reflect.Array:
		if n.items == nil {
			return true
		}
		for i := 0; i < v.Len(); i++ {
			if e := v.Index(i); !isNull(e) && !n.items.clean(e) {
				return false
			}
		}
		return true
	case reflect.Map:
		if len(n.props) > 0 || len(n.required) > 0 || v.Type().Key().Kind() != reflect.String {
			return false
		}
		if n.additional == nil {
			return true
		}
		iter := v.MapRange()
		for iter.Next() {
			if e := iter.Value(); !isNull(e) && !n.additional.clean(e) {
				return false
			}
		}
		return true
	}
	// A scalar where the schema has an object or an array: the exact check
	// skips it as well, but that is not a case worth trusting here.
	return false
}

func (n *node) structClean(v reflect.Value) bool {
	if n.additional != nil {
		return false
	}
	for _, name := range n.required {
		s := n.props[name]
		if s == nil || s.field == nil {
			return false
		}
		fv, err := v.FieldByIndexErr(s.field.index)
		if err != nil || absentOrNullField(fv, s.field, s.nullable) {
			return false
		}
	}
	for _, s := range n.props {
		if s.schema.checksNothing() && len(s.enum) == 0 {
			continue
		}
		if s.field == nil {
			return false
		}
		fv, err := v.FieldByIndexErr(s.field.index)
		if err != nil {
			return false
		}
		if !present(fv, s.field) {
			continue
		}
		if s.field.ownForm || !s.clean(fv) {
			return false
		}
	}
	return true
}

// checksNothing says whether the exact check of any value against n
// finds nothing to check: no schema, object metadata (not walked), or a
// definition of its own JSON form, such as IntOrString, with no properties.
func (n *node) checksNothing() bool {
	return n == nil || n.name == objectMetaDefinition ||
		(len(n.props) == 0 && n.items == nil && n.additional == nil && len(n.required) == 0)
}

// clean checks a present, non-null value of the slot.
func (s *slot) clean(v reflect.Value) bool {
	if len(s.enum) > 0 && !inStringEnum(v, s.enum) {
		return false
	}
	return s.schema.clean(v)
}

// present says whether the field fv shows up in the JSON form with a
// value other than null.
func present(fv reflect.Value, f *fieldInfo) bool {
	switch fv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice:
		if fv.IsNil() {
			return false
		}
	}
	if f.omitEmpty && isEmpty(fv) {
		return false
	}
	return !(f.omitZero && fv.IsZero())
}

// inStringEnum says whether v is a plain string (or a pointer to one) that
// the enum lists. Anything else is left to the exact check.
func inStringEnum(v reflect.Value, enum []interface{}) bool {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return false
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.String || ownJSONForm(v.Type()) {
		return false
	}
	s := v.String()
	for _, e := range enum {
		if es, ok := e.(string); ok && es == s {
			return true
		}
	}
	return false
}
