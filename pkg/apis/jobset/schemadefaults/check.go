package schemadefaults

import (
	"fmt"
	"reflect"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The same schema also carries the `required` properties and `enum` values
// of the embedded types. A CRD-served JobSet rejects a template that breaks
// them before any other rule runs (for example a pod template without
// containers), so the natively served one checks them too, from the same
// generated definitions rather than from a list written by hand.
//
// The check runs on the canonical JSON form of the typed value, as the CRD's
// schema validation runs on the JSON the client sent. A required property is
// missing when it is absent or null (a CRD prunes such a null first); a
// non-pointer scalar that Go always serializes is therefore never missing,
// exactly as for a Go client talking to the CRD. An enum is checked on every
// value present. Object metadata is not walked: a CRD keeps only name,
// namespace, labels, annotations and finalizers of embedded metadata, none
// of which is required or enumerated.

var objectMetaDefinition = metav1.ObjectMeta{}.OpenAPIModelName()

// CheckJobTemplate returns an error for every required property missing in
// t and every value outside its enum; p is the path of t.
func CheckJobTemplate(t *batchv1.JobTemplateSpec, p *field.Path) field.ErrorList {
	return checkAgainst(get(), JobTemplateSpecDefinition, t, p)
}

// CheckPersistentVolumeClaim is CheckJobTemplate for a claim template.
func CheckPersistentVolumeClaim(c *corev1.PersistentVolumeClaim, p *field.Path) field.ErrorList {
	return checkAgainst(get(), PersistentVolumeClaimDefinition, c, p)
}

func checkAgainst(view *structural, root string, obj interface{}, p *field.Path) field.ErrorList {
	n := view.nodes[root]
	if n == nil || obj == nil {
		return nil
	}
	if n.clean(reflect.ValueOf(obj)) {
		return nil
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		// Not reachable for values that came off the wire (see the
		// package doc); report it rather than accept unchecked input.
		return field.ErrorList{field.InternalError(p, fmt.Errorf("schema check of %s: %w", root, err))}
	}
	var errs field.ErrorList
	n.check(u, p, &errs)
	return errs
}

// check validates the JSON value v against n.
func (n *node) check(v interface{}, p *field.Path, errs *field.ErrorList) {
	if n == nil || n.name == objectMetaDefinition {
		return
	}
	switch x := v.(type) {
	case map[string]interface{}:
		for _, name := range n.required {
			if val, ok := x[name]; !ok || (val == nil && !n.props[name].isNullable()) {
				*errs = append(*errs, field.Required(p.Child(name), ""))
			}
		}
		for name, val := range x {
			if s, known := n.props[name]; known {
				s.check(val, p.Child(name), errs)
			} else if n.additional != nil {
				n.additional.check(val, p.Key(name), errs)
			}
		}
	case []interface{}:
		if n.items != nil {
			for i, val := range x {
				n.items.check(val, p.Index(i), errs)
			}
		}
	}
}

// check validates a present value of the slot.
func (s *slot) check(v interface{}, p *field.Path, errs *field.ErrorList) {
	if v == nil {
		return
	}
	if len(s.enum) > 0 && !inEnum(v, s.enum) {
		allowed := make([]string, 0, len(s.enum))
		for _, e := range s.enum {
			allowed = append(allowed, fmt.Sprint(e))
		}
		*errs = append(*errs, field.NotSupported(p, v, allowed))
	}
	if s.schema != nil {
		s.schema.check(v, p, errs)
	}
}

func (s *slot) isNullable() bool { return s != nil && s.nullable }

func inEnum(v interface{}, enum []interface{}) bool {
	for _, e := range enum {
		if reflect.DeepEqual(v, e) {
			return true
		}
	}
	return false
}
