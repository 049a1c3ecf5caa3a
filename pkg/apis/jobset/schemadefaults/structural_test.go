package schemadefaults

import (
	"reflect"
	"slices"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/utils/ptr"
)

// A small hand-made schema, with Go types behind it, exercises the walk
// where the k8s.io/api templates have no example: maps, arrays of arrays,
// null items, nullable properties, a default that is itself an object with
// defaults inside, and a reference cycle.

type synRoot struct {
	Name     string             `json:"name,omitempty"`     // default "": zero on a non-pointer, skipped
	Count    int32              `json:"count"`              // default 0: zero on a non-pointer, skipped
	Mode     string             `json:"mode,omitempty"`     // default "Fast"
	Flag     *bool              `json:"flag,omitempty"`     // default false: zero on a pointer, kept
	Level    *int32             `json:"level,omitempty"`    // default 0: zero on a pointer, kept
	Leaf     synLeaf            `json:"leaf"`               // default {}: zero on a struct, skipped
	Opt      *synLeaf           `json:"opt,omitempty"`      // default {"size": 3}
	Grid     [][]synLeaf        `json:"grid,omitempty"`     // arrays of arrays
	ByName   map[string]synLeaf `json:"byName,omitempty"`   // map of objects
	Ptrs     []*synLeaf         `json:"ptrs,omitempty"`     // items default {"size": 7}
	Nullable *string            `json:"nullable,omitempty"` // nullable, default "x"
	When     metav1.Time        `json:"when"`               // default {}: would not decode, skipped
	Next     *synRoot           `json:"next,omitempty"`     // a cycle
}

func (synRoot) OpenAPIModelName() string { return "syn.Root" }

type synLeaf struct {
	Kind string  `json:"kind,omitempty"` // default "Plain"
	Note *string `json:"note"`           // default "", like grpc.service
	Size int64   `json:"size,omitempty"`
}

func (synLeaf) OpenAPIModelName() string { return "syn.Leaf" }

func synDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	scalar := func(typ string, def interface{}) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{typ}, Default: def}}
	}
	to := func(name string, def interface{}) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(name), Default: def}}
	}
	array := func(items spec.Schema) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"array"}, Items: &spec.SchemaOrArray{Schema: &items}}}
	}
	object := func(props map[string]spec.Schema) common.OpenAPIDefinition {
		return common.OpenAPIDefinition{Schema: spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: props}}}
	}
	nullable := scalar("string", "x")
	nullable.Nullable = true
	return map[string]common.OpenAPIDefinition{
		"syn.Root": object(map[string]spec.Schema{
			"name":  scalar("string", ""),
			"count": scalar("integer", 0),
			"mode":  scalar("string", "Fast"),
			"flag":  scalar("boolean", false),
			"level": scalar("integer", 0),
			"leaf":  to("syn.Leaf", map[string]interface{}{}),
			"opt":   to("syn.Leaf", map[string]interface{}{"size": 3}),
			"grid":  array(array(to("syn.Leaf", map[string]interface{}{}))),
			"byName": {SchemaProps: spec.SchemaProps{Type: []string{"object"}, AdditionalProperties: &spec.SchemaOrBool{
				Allows: true, Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref("syn.Leaf"), Default: map[string]interface{}{}}},
			}}},
			"ptrs":     array(to("syn.Leaf", map[string]interface{}{"size": 7})),
			"nullable": nullable,
			"when":     to("syn.Time", map[string]interface{}{}),
			"next":     to("syn.Root", nil),
		}),
		"syn.Leaf": object(map[string]spec.Schema{
			"kind": scalar("string", "Plain"),
			"note": scalar("string", ""),
			"size": scalar("integer", 0),
		}),
		"syn.Time": {Schema: spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"string"}, Format: "date-time"}}},
	}
}

func synView() *structural {
	return build(synDefinitions, []reflect.Type{reflect.TypeOf(synRoot{})})
}

func applySyn(t *testing.T, v *structural, obj *synRoot) {
	t.Helper()
	if err := applyTo(v, "syn.Root", obj); err != nil {
		t.Fatalf("applyTo: %v", err)
	}
}

func leaf(kind string, size int64) synLeaf {
	return synLeaf{Kind: kind, Note: ptr.To(""), Size: size}
}

func TestStructuralDeclaredDefaults(t *testing.T) {
	v := synView()
	if p := problemsFrom(v, "syn.Root"); len(p) != 0 {
		t.Fatalf("problems: %q", p)
	}
	want := []string{
		`byName{}.kind="Plain"`,
		`byName{}.note=""`,
		`flag=false`,
		`grid[][].kind="Plain"`,
		`grid[][].note=""`,
		`leaf.kind="Plain"`,
		`leaf.note=""`,
		`level=0`,
		`mode="Fast"`,
		`nullable="x"`,
		`opt.kind="Plain"`,
		`opt.note=""`,
		`opt={"size":3}`,
		`ptrs[].kind="Plain"`,
		`ptrs[].note=""`,
		`ptrs[]={"size":7}`,
	}
	// The cycle root -> next -> root is not followed: next.* is absent.
	if got := declared(v, "syn.Root"); !slices.Equal(got, want) {
		t.Errorf("declared:\n got %q\nwant %q", got, want)
	}
}

func TestStructuralEmptyObject(t *testing.T) {
	v := synView()
	var obj synRoot
	applySyn(t, v, &obj)
	want := synRoot{
		Mode:     "Fast",
		Flag:     ptr.To(false),
		Level:    ptr.To[int32](0),
		Leaf:     leaf("Plain", 0),         // a struct field is always present
		Opt:      ptr.To(leaf("Plain", 3)), // the default, then the defaults inside it
		Nullable: ptr.To("x"),
	}
	if !reflect.DeepEqual(obj, want) {
		t.Errorf("got  %+v\nwant %+v", obj, want)
	}
}

func TestStructuralNested(t *testing.T) {
	v := synView()
	obj := synRoot{
		Mode: "Slow",
		Flag: ptr.To(true),
		Grid: [][]synLeaf{{{}, {Kind: "X", Note: ptr.To("n")}}, {}, nil},
		ByName: map[string]synLeaf{
			"a": {},
			"b": {Kind: "Y", Size: 2},
		},
		Ptrs: []*synLeaf{nil, {Kind: "Z"}},
		Next: &synRoot{Next: &synRoot{Mode: "Deep"}},
	}
	applySyn(t, v, &obj)
	if obj.Mode != "Slow" || !*obj.Flag {
		t.Errorf("explicit values changed: mode %q flag %v", obj.Mode, *obj.Flag)
	}
	wantGrid := [][]synLeaf{{leaf("Plain", 0), {Kind: "X", Note: ptr.To("n")}}, nil, nil}
	// An empty or null inner array comes back empty or nil.
	if !apiequality.Semantic.DeepEqual(obj.Grid, wantGrid) {
		t.Errorf("grid: got %+v\nwant %+v", obj.Grid, wantGrid)
	}
	wantMap := map[string]synLeaf{"a": leaf("Plain", 0), "b": leaf("Y", 2)}
	if !reflect.DeepEqual(obj.ByName, wantMap) {
		t.Errorf("byName: got %+v\nwant %+v", obj.ByName, wantMap)
	}
	// A null item is a non-nullable null with a default: it gets the items
	// default, and then the defaults inside it.
	wantPtrs := []*synLeaf{ptr.To(leaf("Plain", 7)), ptr.To(leaf("Z", 0))}
	if !reflect.DeepEqual(obj.Ptrs, wantPtrs) {
		t.Errorf("ptrs: got %+v %+v\nwant %+v %+v", obj.Ptrs[0], obj.Ptrs[1], wantPtrs[0], wantPtrs[1])
	}
	if obj.Next.Mode != "Fast" || obj.Next.Next.Mode != "Deep" || obj.Next.Next.Level == nil || obj.Next.Next.Next != nil {
		t.Errorf("cycle: next %+v, next.next %+v", obj.Next, obj.Next.Next)
	}
}

// At the unstructured level: absent and null both get the default, except a
// null the schema declares nullable; a null without a default is left; a
// missing parent is not created; a value of the wrong JSON kind is skipped.
func TestStructuralNulls(t *testing.T) {
	root := synView().nodes["syn.Root"]
	u := map[string]interface{}{
		"mode":     nil,
		"nullable": nil,
		"next":     nil,
		"leaf":     map[string]interface{}{"note": nil, "kind": "K"},
		"grid":     []interface{}{[]interface{}{nil}, "not-an-array"},
		"byName":   "not-a-map",
	}
	if !root.apply(u) {
		t.Fatal("apply reported no change")
	}
	want := map[string]interface{}{
		"mode":     "Fast",
		"flag":     false,
		"level":    int64(0),
		"nullable": nil,
		"next":     nil,
		"opt":      map[string]interface{}{"size": int64(3), "kind": "Plain", "note": ""},
		"leaf":     map[string]interface{}{"note": "", "kind": "K"},
		"grid":     []interface{}{[]interface{}{nil}, "not-an-array"},
		"byName":   "not-a-map",
	}
	if !reflect.DeepEqual(u, want) {
		t.Errorf("got  %#v\nwant %#v", u, want)
	}
	// Defaults are deep copies: changing one set value leaves the schema.
	u["opt"].(map[string]interface{})["size"] = int64(99)
	again := map[string]interface{}{}
	root.apply(again)
	if again["opt"].(map[string]interface{})["size"] != int64(3) {
		t.Errorf("default shared with an earlier result: %v", again["opt"])
	}
	// Nothing to set: no change reported.
	if root.apply(again) {
		t.Errorf("second application reported a change")
	}
}

// Without the Go types, a zero default cannot be told from openapi-gen's
// own zero defaults and is not applied; non-zero defaults still are.
func TestStructuralWithoutGoTypes(t *testing.T) {
	v := build(synDefinitions, nil)
	got := declared(v, "syn.Root")
	for _, d := range got {
		switch d {
		case `flag=false`, `level=0`, `leaf.note=""`:
			t.Errorf("zero default applied without a Go type: %s", d)
		}
	}
	if !slices.Contains(got, `mode="Fast"`) || !slices.Contains(got, `opt={"size":3}`) {
		t.Errorf("non-zero defaults missing: %q", got)
	}
}

func TestEffective(t *testing.T) {
	str := reflect.TypeOf("")
	pstr := reflect.TypeOf(ptr.To(""))
	for _, tc := range []struct {
		def  interface{}
		t    reflect.Type
		want bool
	}{
		{"", str, false},
		{"", pstr, true},
		{"TCP", str, true},
		{int64(0), reflect.TypeOf(int32(0)), false},
		{int64(0), reflect.TypeOf(ptr.To[int32](0)), true},
		{int64(1), reflect.TypeOf(int32(0)), true},
		{false, reflect.TypeOf(false), false},
		{false, reflect.TypeOf(ptr.To(false)), true},
		{map[string]interface{}{}, reflect.TypeOf(synLeaf{}), false},
		{map[string]interface{}{}, reflect.TypeOf(&synLeaf{}), true},
		{map[string]interface{}{}, reflect.TypeOf(map[string]string{}), false},
		{[]interface{}{}, reflect.TypeOf([]string{}), false},
		{[]interface{}{"a"}, reflect.TypeOf([]string{}), true},
		{"", nil, false},
		{"x", nil, true},
	} {
		if got := effective(tc.def, tc.t); got != tc.want {
			t.Errorf("effective(%#v, %v) = %v, want %v", tc.def, tc.t, got, tc.want)
		}
	}
}

func TestNormalize(t *testing.T) {
	type mode string
	for _, tc := range []struct {
		in   interface{}
		want interface{}
	}{
		{1, int64(1)},
		{int32(-4), int64(-4)},
		{1.5, 1.5},
		{mode("ReadWrite"), "ReadWrite"},
		{map[string]interface{}{"single": map[string]interface{}{}, "n": 2}, map[string]interface{}{"single": map[string]interface{}{}, "n": int64(2)}},
		{[]interface{}{1, "a", true}, []interface{}{int64(1), "a", true}},
	} {
		got, err := normalize(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("normalize(%#v) = %#v, %v; want %#v", tc.in, got, err, tc.want)
		}
	}
}

// A default that does not fit its Go type is dropped and reported, so that
// the conversion back to the typed value cannot fail on it.
func TestUndecodableDefaultReported(t *testing.T) {
	defs := func(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
		d := synDefinitions(ref)
		leafDef := d["syn.Leaf"]
		size := leafDef.Schema.Properties["size"]
		size.Default = "three"
		leafDef.Schema.Properties["size"] = size
		d["syn.Leaf"] = leafDef
		return d
	}
	v := build(defs, []reflect.Type{reflect.TypeOf(synRoot{})})
	p := problemsFrom(v, "syn.Root")
	if len(p) != 1 || !slices.ContainsFunc(p, func(s string) bool {
		return s == `syn.Leaf.size: default "three" does not decode into int64: json: cannot unmarshal string into Go value of type int64`
	}) {
		t.Errorf("problems: %q", p)
	}
	if slices.Contains(declared(v, "syn.Root"), `opt.size="three"`) {
		t.Errorf("undecodable default kept")
	}
	var obj synRoot
	if err := applyTo(v, "syn.Root", &obj); err != nil {
		t.Errorf("applyTo: %v", err)
	}
}
