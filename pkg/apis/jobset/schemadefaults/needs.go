package schemadefaults

import (
	"reflect"
)

// needs says whether the unstructured walk of the typed value v against n
// could set a default. It reads the typed value directly, along the paths
// that reach a default only, so that a template that already has all its
// defaults (the usual case: the generated defaulters run first) costs no
// conversion at all. It errs on the side of true: whenever the Go value does
// not match what the node knows of it, it says a default may be missing and
// the exact unstructured walk decides.
func (n *node) needs(v reflect.Value) bool {
	if n == nil || !n.reach {
		return false
	}
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return false // null: nothing below it to default
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Struct:
		return n.structNeeds(v)
	case reflect.Slice, reflect.Array:
		if n.goType == nil || v.Type() != n.goType {
			return true
		}
		it := n.items
		if !it.reaches() {
			return false
		}
		for i := 0; i < v.Len(); i++ {
			e := v.Index(i)
			if it.hasDef && !it.nullable && isNull(e) {
				return true
			}
			if it.descends() && it.schema.needs(e) {
				return true
			}
		}
		return false
	case reflect.Map:
		if n.goType == nil || v.Type() != n.goType || len(n.props) > 0 || v.Type().Key().Kind() != reflect.String {
			return true
		}
		a := n.additional
		if !a.reaches() {
			return false
		}
		iter := v.MapRange()
		for iter.Next() {
			e := iter.Value()
			if a.hasDef && !a.nullable && isNull(e) {
				return true
			}
			if a.descends() && a.schema.needs(e) {
				return true
			}
		}
		return false
	}
	// A scalar where the schema has an object or an array: the
	// unstructured walk skips it as well.
	return false
}

func (n *node) structNeeds(v reflect.Value) bool {
	if n.goType == nil || v.Type() != n.goType || n.additional.reaches() {
		return true
	}
	for _, d := range n.defaults {
		f := d.slot.field
		if f == nil {
			return true
		}
		fv, err := v.FieldByIndexErr(f.index)
		if err != nil || absentOrNullField(fv, f, d.slot.nullable) {
			return true
		}
	}
	for _, w := range n.walk {
		f := w.slot.field
		if f == nil {
			return true
		}
		fv, err := v.FieldByIndexErr(f.index)
		if err != nil {
			return true
		}
		if w.slot.schema.needs(fv) {
			return true
		}
	}
	return false
}

// absentOrNullField says whether the field fv shows up in the unstructured
// form as absent, or as a null that gets its default.
func absentOrNullField(fv reflect.Value, f *fieldInfo, nullable bool) bool {
	if f.ownForm {
		// Its form (null for a zero Time, for example) is its own
		// business: assume absent when zero.
		return fv.IsZero()
	}
	switch fv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice:
		if fv.IsNil() {
			// Without omitempty a nil is written as null.
			return f.omitEmpty || f.omitZero || !nullable
		}
	}
	if f.omitEmpty && isEmpty(fv) {
		return true
	}
	return f.omitZero && fv.IsZero()
}

// isEmpty is what omitempty leaves out.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// isNull says whether an array item or map value is written as null.
func isNull(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice:
		return v.IsNil()
	}
	return ownJSONForm(v.Type()) && v.IsZero()
}
