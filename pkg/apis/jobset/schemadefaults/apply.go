package schemadefaults

import (
	"fmt"
	"reflect"
	"sort"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Definition names of the roots this package defaults.
var (
	JobTemplateSpecDefinition       = batchv1.JobTemplateSpec{}.OpenAPIModelName()
	PersistentVolumeClaimDefinition = corev1.PersistentVolumeClaim{}.OpenAPIModelName()
)

// ApplyToJobTemplate sets in t every schema default of JobTemplateSpec whose
// field is absent. It fails only if t cannot be converted to and from its
// unstructured form, which no typed value does (see the package doc); t is
// left as it was on error.
func ApplyToJobTemplate(t *batchv1.JobTemplateSpec) error {
	return applyTo(get(), JobTemplateSpecDefinition, t)
}

// ApplyToPersistentVolumeClaim sets in p every schema default of
// PersistentVolumeClaim whose field is absent. Errors are as for
// ApplyToJobTemplate.
func ApplyToPersistentVolumeClaim(p *corev1.PersistentVolumeClaim) error {
	return applyTo(get(), PersistentVolumeClaimDefinition, p)
}

// applyTo defaults *obj against the definition root of view. A typed
// pre-check skips the conversion when no default can be missing. The typed
// value is only replaced when a default was set and the conversion back
// succeeded.
func applyTo[T any](view *structural, root string, obj *T) error {
	n := view.nodes[root]
	if n == nil || obj == nil || !n.needs(reflect.ValueOf(obj).Elem()) {
		return nil
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("schema defaults of %s: to unstructured: %w", root, err)
	}
	if !n.apply(u) {
		return nil
	}
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, &out); err != nil {
		return fmt.Errorf("schema defaults of %s: from unstructured: %w", root, err)
	}
	*obj = out
	return nil
}

// apply defaults the JSON value v against n and says whether it set
// anything.
func (n *node) apply(v interface{}) bool {
	switch x := v.(type) {
	case map[string]interface{}:
		return n.applyObject(x)
	case []interface{}:
		return n.applyItems(x)
	}
	return false
}

func (n *node) applyObject(obj map[string]interface{}) bool {
	changed := false
	for _, d := range n.defaults {
		if absentOrNull(obj, d.name, d.slot) {
			obj[d.name] = runtime.DeepCopyJSONValue(d.slot.def)
			changed = true
		}
	}
	for _, w := range n.walk {
		if v, ok := obj[w.name]; ok && v != nil {
			if w.slot.schema.apply(v) {
				changed = true
			}
		}
	}
	if a := n.additional; a.reaches() {
		for k, v := range obj {
			if _, known := n.props[k]; known {
				continue
			}
			if v == nil && a.hasDef && !a.nullable {
				v = runtime.DeepCopyJSONValue(a.def)
				obj[k] = v
				changed = true
			}
			if a.descends() && v != nil && a.schema.apply(v) {
				changed = true
			}
		}
	}
	return changed
}

func (n *node) applyItems(items []interface{}) bool {
	it := n.items
	if !it.reaches() {
		return false
	}
	changed := false
	for i, v := range items {
		if v == nil && it.hasDef && !it.nullable {
			v = runtime.DeepCopyJSONValue(it.def)
			items[i] = v
			changed = true
		}
		if it.descends() && v != nil && it.schema.apply(v) {
			changed = true
		}
	}
	return changed
}

// absentOrNull says whether the property gets its default: it is missing,
// or null where the schema does not allow null.
func absentOrNull(obj map[string]interface{}, name string, s *slot) bool {
	v, ok := obj[name]
	return !ok || (v == nil && !s.nullable)
}

// DeclaredDefaults lists, sorted, every effective default reachable from the
// definition root as `path=value`, the value in JSON, for example
// `spec.template.spec.containers[].ports[].protocol="TCP"`. An array item is
// written `[]`, a map value `{}`. A reference back to a definition already on
// the path is not followed again, so a recursive schema gives a finite list.
// The list is nil for an unknown definition.
func DeclaredDefaults(root string) []string {
	return declared(get(), root)
}

func declared(view *structural, root string) []string {
	n := view.nodes[root]
	if n == nil {
		return nil
	}
	var out []string
	onPath := map[*node]bool{}
	var walk func(n *node, path string)
	visit := func(s *slot, path string) {
		if s == nil {
			return
		}
		if s.hasDef {
			out = append(out, path+"="+mustJSON(s.def))
		}
		if s.descends() {
			walk(s.schema, path)
		}
	}
	walk = func(n *node, path string) {
		if !n.reach || onPath[n] {
			return
		}
		onPath[n] = true
		defer delete(onPath, n)
		names := make([]string, 0, len(n.props))
		for name := range n.props {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			p := name
			if path != "" {
				p = path + "." + name
			}
			visit(n.props[name], p)
		}
		visit(n.items, path+"[]")
		visit(n.additional, path+"{}")
	}
	walk(n, "")
	sort.Strings(out)
	return out
}
