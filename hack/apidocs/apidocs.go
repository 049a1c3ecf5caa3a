package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// typeDoc is one documented type of the API package.
type typeDoc struct {
	name    string // Go name
	doc     string // doc comment without markers
	markers []string
	// kind and resource are set for the types the scheme serves.
	kind, resource string
	// listOf is set for a list kind: the kind of its items.
	listOf     string
	fields     []fieldDoc // a struct's fields
	values     []valueDoc // a string enum's constants
	expr       *ast.StructType
	imports    map[string]string // file's import name -> path
	underlying string            // for non-struct types: the Go type it is defined as
}

type fieldDoc struct {
	json     string
	goName   string
	typ      ast.Expr
	doc      string
	optional bool
	def      string
}

type valueDoc struct {
	value, doc string
}

// apiPackage is what the generator reads from a types package.
type apiPackage struct {
	importPath string
	doc        string
	gv         schema.GroupVersion
	types      map[string]*typeDoc
}

// load parses the non-generated Go files of dir, the package importPath,
// and names the kinds that addToScheme registers for gv.
func load(dir, importPath string, gv schema.GroupVersion, addToScheme func(*runtime.Scheme) error) (*apiPackage, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") ||
			strings.HasPrefix(n, "zz_generated") || strings.HasSuffix(n, ".pb.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	// PreserveAST: the field comments are read from the declarations.
	pkg, err := doc.NewFromFiles(fset, files, importPath, doc.PreserveAST)
	if err != nil {
		return nil, err
	}
	p := &apiPackage{importPath: importPath, doc: cleanDoc(pkg.Doc), gv: gv, types: map[string]*typeDoc{}}

	fileOf := func(pos token.Pos) *ast.File {
		for _, f := range files {
			if f.Pos() <= pos && pos <= f.End() {
				return f
			}
		}
		return nil
	}
	for _, t := range pkg.Types {
		if !ast.IsExported(t.Name) {
			continue
		}
		spec := t.Decl.Specs[0].(*ast.TypeSpec)
		f := fileOf(spec.Pos())
		td := &typeDoc{name: t.Name, doc: cleanDoc(t.Doc), markers: typeMarkers(f, t.Decl), imports: imports(f)}
		switch e := spec.Type.(type) {
		case *ast.StructType:
			td.expr = e
			td.fields = structFields(e)
		case *ast.Ident:
			td.underlying = e.Name
			for _, c := range t.Consts {
				for _, s := range c.Decl.Specs {
					vs := s.(*ast.ValueSpec)
					if len(vs.Values) != 1 {
						continue
					}
					lit, ok := vs.Values[0].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						return nil, err
					}
					td.values = append(td.values, valueDoc{value: v, doc: cleanDoc(vs.Doc.Text())})
				}
			}
		default:
			continue
		}
		p.types[t.Name] = td
	}

	// The served kinds, from the scheme: the Go name of each type the
	// package registers for gv, and its kind.
	scheme := runtime.NewScheme()
	if err := addToScheme(scheme); err != nil {
		return nil, err
	}
	byKind := map[string]*typeDoc{}
	for gvk, rt := range scheme.AllKnownTypes() {
		if gvk.GroupVersion() != gv || rt.PkgPath() != importPath {
			continue
		}
		td, ok := p.types[rt.Name()]
		if !ok {
			return nil, fmt.Errorf("the scheme serves %s as %s, but %s declares no such type", rt.Name(), gvk.Kind, dir)
		}
		td.kind = gvk.Kind
		byKind[gvk.Kind] = td
	}
	for kind, td := range byKind {
		if item, ok := byKind[strings.TrimSuffix(kind, "List")]; ok && item != td {
			td.listOf = item.kind
			continue
		}
		td.resource = strings.ToLower(kind) + "s"
		for _, m := range td.markers {
			if r, ok := strings.CutPrefix(m, "+resourceName="); ok {
				td.resource = r
			}
		}
	}
	for _, td := range byKind {
		if td.listOf != "" {
			td.resource = byKind[td.listOf].resource
		}
	}
	return p, nil
}

// typeMarkers returns the "+marker" lines of the comments between the
// previous declaration and decl, and of decl's own doc comment.
func typeMarkers(f *ast.File, decl *ast.GenDecl) []string {
	var prevEnd token.Pos
	for _, d := range f.Decls {
		if d.End() < decl.Pos() && d.End() > prevEnd {
			prevEnd = d.End()
		}
	}
	var markers []string
	for _, cg := range f.Comments {
		if cg.Pos() > prevEnd && cg.End() <= decl.Pos() || cg == decl.Doc {
			markers = append(markers, markerLines(cg.Text())...)
		}
	}
	return markers
}

func imports(f *ast.File) map[string]string {
	m := map[string]string{}
	for _, is := range f.Imports {
		p, _ := strconv.Unquote(is.Path.Value)
		name := path.Base(p)
		if is.Name != nil {
			name = is.Name.Name
		}
		m[name] = p
	}
	return m
}

func structFields(st *ast.StructType) []fieldDoc {
	var out []fieldDoc
	for _, f := range st.Fields.List {
		tag := ""
		if f.Tag != nil {
			tag, _ = strconv.Unquote(f.Tag.Value)
		}
		jsonTag := reflect.StructTag(tag).Get("json")
		name, opts, _ := strings.Cut(jsonTag, ",")
		if name == "-" {
			continue
		}
		text := ""
		if f.Doc != nil {
			text = f.Doc.Text()
		}
		markers := markerLines(text)
		fd := fieldDoc{json: name, typ: f.Type, doc: cleanDoc(text)}
		if len(f.Names) > 0 {
			fd.goName = f.Names[0].Name
			if !ast.IsExported(fd.goName) {
				continue
			}
		}
		// Inlined (TypeMeta) has no field of its own on the wire.
		if name == "" && strings.Contains(","+opts+",", ",inline,") {
			continue
		}
		if fd.json == "" {
			fd.json = fd.goName
		}
		fd.optional = strings.Contains(","+opts+",", ",omitempty,")
		for _, m := range markers {
			if m == "+optional" {
				fd.optional = true
			}
			if v, ok := strings.CutPrefix(m, "+default="); ok {
				fd.def = "`" + v + "`"
			}
		}
		if fd.def == "" {
			fd.def = defaultFromDoc(fd.doc)
		}
		out = append(out, fd)
	}
	return out
}

// markerLines returns the lines of a comment that are markers (+name...).
func markerLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "+") {
			out = append(out, l)
		}
	}
	return out
}

// cleanDoc drops the marker lines of a comment and joins the rest into
// one paragraph.
func cleanDoc(text string) string {
	var words []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "+") {
			continue
		}
		words = append(words, l)
	}
	return strings.Join(words, " ")
}

// defaultFromDoc is the rest of the sentence after "Defaults to " in a
// field's comment, the project's way of stating a default.
func defaultFromDoc(text string) string {
	_, rest, ok := strings.Cut(text, "Defaults to ")
	if !ok {
		return ""
	}
	if i := strings.Index(rest, ". "); i >= 0 {
		rest = rest[:i]
	}
	return strings.TrimSuffix(rest, ".")
}

// order returns the documented types: the served kinds by kind, then the
// types they reach, breadth first in field order, then the rest by name.
func (p *apiPackage) order() (kinds, others []*typeDoc) {
	seen := map[string]bool{}
	for _, t := range p.types {
		if t.kind != "" {
			kinds = append(kinds, t)
			seen[t.name] = true
		}
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].kind < kinds[j].kind })
	queue := append([]*typeDoc(nil), kinds...)
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		for _, f := range t.fields {
			for _, n := range localIdents(f.typ) {
				if r, ok := p.types[n]; ok && !seen[n] {
					seen[n] = true
					others = append(others, r)
					queue = append(queue, r)
				}
			}
		}
	}
	var rest []*typeDoc
	for n, t := range p.types {
		if !seen[n] {
			rest = append(rest, t)
		}
	}
	sort.Slice(rest, func(i, j int) bool { return rest[i].name < rest[j].name })
	return kinds, append(others, rest...)
}

// localIdents are the package-local type names a type expression uses.
func localIdents(e ast.Expr) []string {
	switch t := e.(type) {
	case *ast.Ident:
		return []string{t.Name}
	case *ast.StarExpr:
		return localIdents(t.X)
	case *ast.ArrayType:
		return localIdents(t.Elt)
	case *ast.MapType:
		return append(localIdents(t.Key), localIdents(t.Value)...)
	}
	return nil
}

// typeString renders a field's type: local types link to their section,
// other packages' types to their Go documentation.
func (p *apiPackage) typeString(t *typeDoc, e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		if _, ok := p.types[x.Name]; ok {
			return fmt.Sprintf("[%s](#%s)", x.Name, strings.ToLower(x.Name))
		}
		return x.Name
	case *ast.StarExpr:
		return p.typeString(t, x.X)
	case *ast.ArrayType:
		return "[]" + p.typeString(t, x.Elt)
	case *ast.MapType:
		return "map[" + p.typeString(t, x.Key) + "]" + p.typeString(t, x.Value)
	case *ast.SelectorExpr:
		pkgName := x.X.(*ast.Ident).Name
		imp := t.imports[pkgName]
		label := path.Base(path.Dir(imp)) + "/" + path.Base(imp) + "." + x.Sel.Name
		return fmt.Sprintf("[%s](https://pkg.go.dev/%s#%s)", label, imp, x.Sel.Name)
	}
	return fmt.Sprintf("%T", e)
}

// text makes a comment safe in a Markdown table cell: '|' is escaped;
// outside code spans '<' and '>' are written as entities, so that
// placeholders like <jobset> are shown rather than taken for HTML, and
// '[', ']', '*' and '_' are escaped, so that a regular expression is not
// taken for a link or emphasis.
func text(s string) string {
	var b strings.Builder
	inCode := false
	for _, r := range s {
		switch {
		case r == '`':
			inCode = !inCode
			b.WriteRune(r)
		case r == '|':
			b.WriteString(`\|`)
		case r == '<' && !inCode:
			b.WriteString("&lt;")
		case r == '>' && !inCode:
			b.WriteString("&gt;")
		case strings.ContainsRune("[]*_", r) && !inCode:
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// render writes the reference page.
func (p *apiPackage) render() []byte {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	kinds, others := p.order()

	w("# API reference: %s\n\n", p.gv.String())
	w("<!-- Generated by hack/apidocs from the Go types in %s; do not edit. Run `make api-docs`. -->\n\n",
		strings.TrimPrefix(p.importPath, "github.com/nativejobset/jobset/"))
	if p.doc != "" {
		w("%s\n\n", text(p.doc))
	}
	w("Every type of the package, with its fields as they appear in JSON and YAML. ")
	w("A field is required unless it is marked optional; a default is what the server fills in when the field is absent. ")
	w("How the API compares with upstream JobSet is in [The API, compared with upstream](../api.md).\n\n")

	w("## Resources\n\n")
	w("| kind | served as | Go type |\n| --- | --- | --- |\n")
	for _, t := range kinds {
		what := "`" + t.resource + "`"
		if t.listOf != "" {
			what = "list of `" + t.resource + "`"
		}
		w("| [%s](#%s) | %s | `%s` |\n", t.kind, strings.ToLower(t.name), what, t.name)
	}
	w("\n")
	for _, t := range kinds {
		p.renderType(&b, t, "###")
	}
	w("## Types\n\n")
	for _, t := range others {
		p.renderType(&b, t, "###")
	}
	return append(bytes.TrimRight(b.Bytes(), "\n"), '\n')
}

func (p *apiPackage) renderType(b *bytes.Buffer, t *typeDoc, level string) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("%s %s\n\n", level, t.name)
	switch {
	case t.listOf != "":
		w("`apiVersion: %s`, `kind: %s`: what a list of `%s` returns.\n\n", p.gv.String(), t.kind, t.resource)
	case t.kind != "":
		w("`apiVersion: %s`, `kind: %s`; resource `%s`.\n\n", p.gv.String(), t.kind, t.resource)
	}
	if t.doc != "" {
		w("%s\n\n", text(t.doc))
	}
	if t.expr != nil {
		if len(t.fields) == 0 {
			w("No fields.\n\n")
			return
		}
		w("| field | type | required | default | description |\n| --- | --- | --- | --- | --- |\n")
		for _, f := range t.fields {
			req := "required"
			if f.optional {
				req = "optional"
			}
			w("| `%s` | %s | %s | %s | %s |\n", f.json, p.typeString(t, f.typ), req, text(f.def), text(f.doc))
		}
		w("\n")
		return
	}
	w("A `%s`.", t.underlying)
	if len(t.values) == 0 {
		w("\n\n")
		return
	}
	w(" One of:\n\n| value | description |\n| --- | --- |\n")
	for _, v := range t.values {
		w("| `%s` | %s |\n", v.value, text(v.doc))
	}
	w("\n")
}
