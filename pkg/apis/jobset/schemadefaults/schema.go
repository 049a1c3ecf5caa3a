package schemadefaults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/generated/openapi"
)

// node is the structural view of one schema: a definition, or an inline
// array or map schema inside a property.
type node struct {
	// name is the definition name, empty for an inline schema.
	name string
	// goType is the Go type the node describes, pointers removed, or nil if
	// unknown or if the type has a JSON form of its own; the typed
	// pre-check (needs) then assumes a default may be missing.
	goType reflect.Type

	props      map[string]*slot
	items      *slot
	additional *slot

	// required lists the properties the schema requires (see check.go).
	required []string

	// reach says whether an effective default can be reached from here.
	reach bool

	// problems found while building this node; the tests expect none
	// reachable from the roots but known ones.
	problems []string

	// defaults are the properties with an effective default, sorted by
	// name; walk the properties whose schema reaches one. Both are set
	// once reach is known.
	defaults []namedSlot
	walk     []namedSlot
}

// slot is a place that holds a value: a property, the items of an array or
// the values of a map.
type slot struct {
	// schema of the value; nil for a scalar.
	schema *node
	// def is the effective default, as a JSON value (string, bool, int64,
	// float64, map[string]interface{}, []interface{}); valid if hasDef.
	def    interface{}
	hasDef bool
	// nullable keeps a present null from being defaulted.
	nullable bool
	// enum lists the allowed values, as JSON values; empty allows any.
	enum []interface{}

	// The Go field of a property, when known: its index path in the
	// struct (through inlined structs) and its JSON options.
	field *fieldInfo
}

// fieldInfo is a struct field as the unstructured converter sees it.
type fieldInfo struct {
	typ       reflect.Type
	index     []int
	omitEmpty bool
	omitZero  bool
	// ownForm: the field type has a JSON form of its own.
	ownForm bool
}

type namedSlot struct {
	name string
	slot *slot
}

// reaches says whether a default can be set at or below s.
func (s *slot) reaches() bool {
	return s != nil && (s.hasDef || (s.schema != nil && s.schema.reach))
}

// descends says whether the value in s can get a default below it.
func (s *slot) descends() bool {
	return s != nil && s.schema != nil && s.schema.reach
}

// structural is the whole view, built once.
type structural struct {
	nodes map[string]*node
}

var (
	buildOnce sync.Once
	built     *structural
)

// get returns the view, building it on first use.
func get() *structural {
	buildOnce.Do(func() {
		built = build(openapi.GetOpenAPIDefinitions, seedTypes())
	})
	return built
}

// seedTypes are the Go types whose reachable types name the definitions.
// Definitions outside of them still work, with the zero-default rule of an
// unknown Go type (see effective).
func seedTypes() []reflect.Type {
	return []reflect.Type{
		reflect.TypeOf(v1alpha2.JobSet{}),
		reflect.TypeOf(v1alpha2.JobSetList{}),
		reflect.TypeOf(batchv1.Job{}),
		reflect.TypeOf(batchv1.CronJob{}),
		reflect.TypeOf(corev1.Pod{}),
		reflect.TypeOf(corev1.PodTemplate{}),
		reflect.TypeOf(corev1.PersistentVolumeClaim{}),
	}
}

// refPrefix is what the reference callback puts before a definition name.
const refPrefix = "#/definitions/"

type builder struct {
	defs  map[string]common.OpenAPIDefinition
	types map[string]reflect.Type
	view  *structural
	all   []*node
}

// build turns the definitions into the structural view.
func build(get common.GetOpenAPIDefinitions, seeds []reflect.Type) *structural {
	b := &builder{
		defs: get(func(name string) spec.Ref {
			return spec.MustCreateRef(refPrefix + name)
		}),
		types: modelTypes(seeds),
		view:  &structural{nodes: map[string]*node{}},
	}
	names := make([]string, 0, len(b.defs))
	for name := range b.defs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		b.definition(name)
	}
	b.computeReach()
	return b.view
}

// problem records a mismatch on the node it was found in.
func (b *builder) problem(n *node, format string, args ...interface{}) {
	n.problems = append(n.problems, fmt.Sprintf(format, args...))
}

// definition returns the node of a definition, building it on first use.
// The node is registered before it is filled, so that a cycle of references
// ends on the node under construction.
func (b *builder) definition(name string) *node {
	if n, ok := b.view.nodes[name]; ok {
		return n
	}
	n := &node{name: name}
	b.view.nodes[name] = n
	b.all = append(b.all, n)
	def, ok := b.defs[name]
	if !ok {
		b.problem(n, "%s: no such definition", name)
		return n
	}
	b.fill(n, &def.Schema, b.types[name], name)
	return n
}

// refName gives the definition a schema refers to, or "".
func refName(s *spec.Schema) string {
	ref := s.Ref.String()
	if ref == "" && len(s.AllOf) == 1 {
		ref = s.AllOf[0].Ref.String()
	}
	return strings.TrimPrefix(ref, refPrefix)
}

// value returns the node of the value a schema describes: the referenced
// definition, a new inline node, or nil for a scalar. t is the Go type of the
// value, nil if unknown.
func (b *builder) value(s *spec.Schema, t reflect.Type, where string) *node {
	if ref := refName(s); ref != "" {
		return b.definition(ref)
	}
	hasItems := s.Items != nil && s.Items.Schema != nil
	hasAdditional := s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil
	if len(s.Properties) == 0 && !hasItems && !hasAdditional {
		return nil
	}
	n := &node{}
	b.all = append(b.all, n)
	b.fill(n, s, t, where)
	return n
}

// fill reads the properties, items and additional properties of s into n.
func (b *builder) fill(n *node, s *spec.Schema, t reflect.Type, where string) {
	t = indirect(t)
	if t != nil && !ownJSONForm(t) {
		n.goType = t
	}
	n.required = append([]string(nil), s.Required...)
	if len(s.Properties) > 0 {
		var fields map[string]*fieldInfo
		if t != nil && t.Kind() == reflect.Struct {
			fields = map[string]*fieldInfo{}
			jsonFields(t, nil, fields)
		}
		n.props = make(map[string]*slot, len(s.Properties))
		for name := range s.Properties {
			prop := s.Properties[name]
			var f *fieldInfo
			var ft reflect.Type
			if fields != nil {
				if f = fields[name]; f != nil {
					ft = f.typ
				} else {
					b.problem(n, "%s.%s: no Go field in %v", where, name, t)
				}
			}
			sl := b.slot(n, &prop, ft, where+"."+name)
			sl.field = f
			n.props[name] = sl
		}
	}
	if s.Items != nil && s.Items.Schema != nil {
		var et reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			et = t.Elem()
		}
		n.items = b.slot(n, s.Items.Schema, et, where+"[]")
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		var et reflect.Type
		if t != nil && t.Kind() == reflect.Map {
			et = t.Elem()
		}
		n.additional = b.slot(n, s.AdditionalProperties.Schema, et, where+"{}")
	}
}

// slot reads the place described by s, whose Go type is t (nil if unknown),
// in the node owner.
func (b *builder) slot(owner *node, s *spec.Schema, t reflect.Type, where string) *slot {
	sl := &slot{
		schema:   b.value(s, t, where),
		nullable: s.Nullable,
	}
	for _, e := range s.Enum {
		if v, err := normalize(e); err == nil {
			sl.enum = append(sl.enum, v)
		} else {
			b.problem(owner, "%s: enum value %#v: %v", where, e, err)
		}
	}
	if s.Default == nil {
		return sl
	}
	def, err := normalize(s.Default)
	if err != nil {
		b.problem(owner, "%s: default %#v: %v", where, s.Default, err)
		return sl
	}
	if !effective(def, t) {
		return sl
	}
	if t != nil {
		if err := decodes(def, t); err != nil {
			b.problem(owner, "%s: default %s does not decode into %v: %v", where, mustJSON(def), t, err)
			return sl
		}
	}
	sl.def, sl.hasDef = def, true
	return sl
}

// effective says whether setting def on an absent field of Go type t can
// change the typed value. A pointer tells absent from zero, so any default
// on it counts. On any other field the zero value is what the field holds
// anyway, so only a non-zero default counts. Without a Go type, the same
// rule as for a non-pointer is used.
func effective(def interface{}, t reflect.Type) bool {
	if t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface) {
		return true
	}
	return !isZeroJSON(def)
}

// isZeroJSON says whether v is the JSON zero of its kind.
func isZeroJSON(v interface{}) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case int64:
		return x == 0
	case float64:
		return x == 0
	case map[string]interface{}:
		return len(x) == 0
	case []interface{}:
		return len(x) == 0
	}
	return false
}

// normalize turns a default written in Go (int, typed string constants...)
// into the JSON value the unstructured form uses: integers as int64, other
// numbers as float64.
func normalize(v interface{}) (interface{}, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out interface{}
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return numbers(out), nil
}

func numbers(v interface{}) interface{} {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]interface{}:
		for k := range x {
			x[k] = numbers(x[k])
		}
	case []interface{}:
		for i := range x {
			x[i] = numbers(x[i])
		}
	}
	return v
}

// decodes checks that def is a valid JSON value for Go type t.
func decodes(def interface{}, t reflect.Type) error {
	data, err := json.Marshal(def)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, reflect.New(t).Interface())
}

func mustJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(data)
}

// computeReach marks, up to a fixpoint, every node from which an effective
// default can be reached, then lists the defaults and the properties to walk
// into. A fixpoint rather than one depth-first pass keeps cycles of
// references right.
func (b *builder) computeReach() {
	for changed := true; changed; {
		changed = false
		for _, n := range b.all {
			if n.reach {
				continue
			}
			if n.items.reaches() || n.additional.reaches() {
				n.reach, changed = true, true
				continue
			}
			for _, p := range n.props {
				if p.reaches() {
					n.reach, changed = true, true
					break
				}
			}
		}
	}
	for _, n := range b.all {
		if !n.reach {
			continue
		}
		names := make([]string, 0, len(n.props))
		for name := range n.props {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			p := n.props[name]
			if p.hasDef {
				n.defaults = append(n.defaults, namedSlot{name, p})
			}
			if p.descends() {
				n.walk = append(n.walk, namedSlot{name, p})
			}
		}
	}
}

// modelTypes maps the OpenAPI model name of every type reachable from the
// seeds to its Go type.
func modelTypes(seeds []reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	seen := map[reflect.Type]bool{}
	for _, t := range seeds {
		collectModelTypes(t, out, seen)
	}
	return out
}

type modelNamer interface {
	OpenAPIModelName() string
}

var modelNamerType = reflect.TypeOf((*modelNamer)(nil)).Elem()

func collectModelTypes(t reflect.Type, out map[string]reflect.Type, seen map[reflect.Type]bool) {
	for {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			t = t.Elem()
			continue
		}
		break
	}
	if seen[t] {
		return
	}
	seen[t] = true
	switch {
	case t.Implements(modelNamerType):
		out[reflect.Zero(t).Interface().(modelNamer).OpenAPIModelName()] = t
	case reflect.PointerTo(t).Implements(modelNamerType):
		out[reflect.New(t).Interface().(modelNamer).OpenAPIModelName()] = t
	}
	if t.Kind() == reflect.Struct {
		for i := 0; i < t.NumField(); i++ {
			collectModelTypes(t.Field(i).Type, out, seen)
		}
	}
}

// jsonFields maps the JSON names of the fields of struct t, with inlined
// structs flattened the way the JSON and unstructured conversions do, to
// the fields. prefix is the index path of t in the outer struct.
func jsonFields(t reflect.Type, prefix []int, out map[string]*fieldInfo) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		index := append(append([]int(nil), prefix...), i)
		if et := indirect(f.Type); name == "" && (f.Anonymous || hasOption(opts, "inline")) && et.Kind() == reflect.Struct {
			jsonFields(et, index, out)
			continue
		}
		if name == "" {
			name = f.Name
		}
		if !f.IsExported() {
			continue
		}
		if _, taken := out[name]; !taken {
			out[name] = &fieldInfo{
				typ:       f.Type,
				index:     index,
				omitEmpty: hasOption(opts, "omitempty"),
				omitZero:  hasOption(opts, "omitzero"),
				ownForm:   ownJSONForm(f.Type),
			}
		}
	}
}

func hasOption(opts, want string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == want {
			return true
		}
	}
	return false
}

var (
	jsonMarshalerType          = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	unstructuredConverterIface = reflect.TypeOf((*interface{ ToUnstructured() interface{} })(nil)).Elem()
)

// ownJSONForm says whether t (or *t) has a JSON or unstructured form of its
// own, like Time, Quantity or IntOrString: its fields say nothing of it.
func ownJSONForm(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Implements(jsonMarshalerType) || pt.Implements(jsonMarshalerType) ||
		t.Implements(unstructuredConverterIface) || pt.Implements(unstructuredConverterIface)
}

// indirect removes pointers from t.
func indirect(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
