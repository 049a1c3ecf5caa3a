package vulndb

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// osvEntry writes a minimal OSV entry into dir.
func osvEntry(t *testing.T, dir, id string, affected ...map[string]any) {
	t.Helper()
	e := map[string]any{
		"schema_version": "1.3.1",
		"id":             id,
		"modified":       "0001-01-01T00:00:00Z",
		"summary":        "synthetic " + id,
		"affected":       affected,
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, id+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// affects describes one affected module; events alternate introduced and
// fixed, "" skipping a slot.
func affects(module string, imports []map[string]any, events ...string) map[string]any {
	var evs []map[string]string
	for i, v := range events {
		if v == "" {
			continue
		}
		if i%2 == 0 {
			evs = append(evs, map[string]string{"introduced": v})
		} else {
			evs = append(evs, map[string]string{"fixed": v})
		}
	}
	a := map[string]any{
		"package": map[string]string{"name": module, "ecosystem": "Go"},
		"ranges":  []map[string]any{{"type": "SEMVER", "events": evs}},
	}
	if imports != nil {
		a["ecosystem_specific"] = map[string]any{"imports": imports}
	}
	return a
}

func TestFixedVersion(t *testing.T) {
	r := func(events ...string) osvRange {
		var o osvRange
		if err := json.Unmarshal([]byte(`{"type":"SEMVER"}`), &o); err != nil {
			t.Fatal(err)
		}
		for i, v := range events {
			var ev struct {
				Introduced string `json:"introduced,omitempty"`
				Fixed      string `json:"fixed,omitempty"`
			}
			if i%2 == 0 {
				ev.Introduced = v
			} else {
				ev.Fixed = v
			}
			if v != "" {
				o.Events = append(o.Events, ev)
			}
		}
		return o
	}
	for _, tc := range []struct {
		name   string
		ranges []osvRange
		want   string
	}{
		{"one fix", []osvRange{r("0", "1.2.3")}, "1.2.3"},
		{"no fix", []osvRange{r("0")}, ""},
		{"two fixes, highest wins", []osvRange{r("0", "1.20.5", "1.21.0-0", "1.21.1")}, "1.21.1"},
		{"reintroduced after the fix", []osvRange{r("0", "1.2.0", "1.5.0")}, ""},
		{"events out of order", []osvRange{r("1.21.0-0", "1.21.1", "0", "1.20.5")}, "1.21.1"},
		{"any open range", []osvRange{r("0", "2.0.0"), r("3.0.0")}, ""},
		{"across ranges", []osvRange{r("0", "2.0.0"), r("3.0.0", "3.1.0")}, "3.1.0"},
		{"pseudo-versions", []osvRange{r("0", "0.0.0-20250101000000-abcdefabcdef")}, "0.0.0-20250101000000-abcdefabcdef"},
		{"not semver", []osvRange{r("0", "latest")}, ""},
		{"other range type", []osvRange{{Type: "GIT"}}, ""},
	} {
		if got := fixedVersion(tc.ranges); got != tc.want {
			t.Errorf("%s: fixedVersion = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestBuildIndex(t *testing.T) {
	src := t.TempDir()
	osvEntry(t, src, "GO-2099-0002",
		affects("example.com/b", nil, "0", "1.4.0"),
		affects("example.com/a", nil, "1.0.0"))
	osvEntry(t, src, "GO-2099-0001",
		affects("example.com/a", nil, "0", "0.9.0"),
		// The same module twice in one entry is indexed once.
		affects("stdlib", nil, "0", "1.20.5"),
		affects("stdlib", nil, "1.21.0-0", "1.21.1"))
	// Not an entry of the database: ignored.
	if err := os.WriteFile(filepath.Join(src, "README.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	when := time.Date(2026, 11, 5, 23, 49, 57, 0, time.UTC)
	idx, files, err := BuildIndex(src, when)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files["GO-2099-0001"] != filepath.Join(src, "GO-2099-0001.json") {
		t.Errorf("files = %v", files)
	}
	if !idx.DB.Modified.Equal(when) {
		t.Errorf("db modified = %v, want %v", idx.DB.Modified, when)
	}
	got, err := json.Marshal(idx.Modules)
	if err != nil {
		t.Fatal(err)
	}
	z := `"modified":"0001-01-01T00:00:00Z"`
	want := `[{"path":"example.com/a","vulns":[{"id":"GO-2099-0001",` + z + `,"fixed":"0.9.0"},{"id":"GO-2099-0002",` + z + `}]},` +
		`{"path":"example.com/b","vulns":[{"id":"GO-2099-0002",` + z + `,"fixed":"1.4.0"}]},` +
		`{"path":"stdlib","vulns":[{"id":"GO-2099-0001",` + z + `,"fixed":"1.21.1"}]}]`
	if string(got) != want {
		t.Errorf("modules index:\n got %s\nwant %s", got, want)
	}
}

func TestBuildIndexRejectsMisnamedEntry(t *testing.T) {
	src := t.TempDir()
	osvEntry(t, src, "GO-2099-0001", affects("example.com/a", nil, "0"))
	if err := os.Rename(filepath.Join(src, "GO-2099-0001.json"), filepath.Join(src, "GO-2099-0009.json")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := BuildIndex(src, time.Time{}); err == nil {
		t.Fatal("an entry whose id is not its file name was accepted")
	}
	if _, _, err := BuildIndex(t.TempDir(), time.Time{}); err == nil {
		t.Fatal("an empty source directory was accepted")
	}
}

func TestWrite(t *testing.T) {
	src := t.TempDir()
	osvEntry(t, src, "GO-2099-0001", affects("example.com/a", nil, "0", "1.0.0"))
	osvEntry(t, src, "GO-2099-0002", affects("example.com/b", nil, "0"))
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	out := t.TempDir()
	read := func(dir string) map[string]string {
		m := map[string]string{}
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			m[rel] = string(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	var dbs []map[string]string
	for _, name := range []string{"one", "two"} {
		written, err := Write(src, filepath.Join(out, name), when)
		if err != nil || !written {
			t.Fatalf("Write %s = %v, %v", name, written, err)
		}
		dbs = append(dbs, read(filepath.Join(out, name)))
	}
	db := dbs[0]
	for _, f := range []string{"index/db.json", "index/modules.json", "ID/GO-2099-0001.json", "ID/GO-2099-0002.json"} {
		if _, ok := db[f]; !ok {
			t.Errorf("%s missing; have %v", f, db)
		}
	}
	if len(db) != 4 {
		t.Errorf("want 4 files, have %d", len(db))
	}
	if want := `{"modified":"2026-01-02T03:04:05Z"}`; db["index/db.json"] != want {
		t.Errorf("db.json = %s, want %s", db["index/db.json"], want)
	}
	orig, _ := os.ReadFile(filepath.Join(src, "GO-2099-0001.json"))
	if db["ID/GO-2099-0001.json"] != string(orig) {
		t.Error("entry not copied byte for byte")
	}
	for f := range db {
		if db[f] != dbs[1][f] {
			t.Errorf("%s differs between two builds of the same input", f)
		}
	}

	// A present database is kept: it stands for a fixed vulndb version.
	osvEntry(t, src, "GO-2099-0003", affects("example.com/c", nil, "0"))
	written, err := Write(src, filepath.Join(out, "one"), when)
	if err != nil || written {
		t.Fatalf("second Write = %v, %v; want it skipped", written, err)
	}
	if len(read(filepath.Join(out, "one"))) != 4 {
		t.Error("an existing database was rewritten")
	}
	// No temporary directories are left beside the databases.
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 2 {
		t.Errorf("output has %d entries, want 2", len(ents))
	}

	// A failed build leaves nothing behind.
	if err := os.WriteFile(filepath.Join(src, "GO-2099-0004.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(src, filepath.Join(out, "three"), when); err == nil {
		t.Fatal("a broken entry was accepted")
	}
	if ents, _ := os.ReadDir(out); len(ents) != 2 {
		t.Errorf("a failed Write left %d entries, want 2", len(ents))
	}
}
