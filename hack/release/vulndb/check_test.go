package vulndb

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseAllowlist(t *testing.T) {
	al, err := ParseAllowlist(strings.NewReader(`
# comment
GO-2025-1234  not reachable in practice: only used with trusted input
GO-2026-56789	tab separated, and a long id

`))
	if err != nil {
		t.Fatal(err)
	}
	if len(al) != 2 || al["GO-2025-1234"] != "not reachable in practice: only used with trusted input" || al["GO-2026-56789"] != "tab separated, and a long id" {
		t.Errorf("allowlist = %q", al)
	}
	for _, bad := range []string{
		"GO-2025-1234\n",                   // no reason
		"GO-2025-1234   \n",                // blank reason
		"CVE-2025-1234 a reason\n",         // not a Go id
		"GO-2025-1234 a\nGO-2025-1234 b\n", // twice
	} {
		if _, err := ParseAllowlist(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// A govulncheck -format json stream as v1.9.0 writes it: findings for one
// vulnerability at module, package and symbol level, and one at module
// level only.
const sampleReport = `{"config":{"protocol_version":"v1.0.0","scan_level":"symbol","scan_mode":"source"}}
{"progress":{"message":"Scanning your code..."}}
{"osv":{"id":"GO-2099-0001","summary":"called"}}
{"osv":{"id":"GO-2099-0002","summary":"only required"}}
{"osv":{"id":"GO-2099-0003","summary":"read, but fixed in the version used"}}
{"finding":{"osv":"GO-2099-0001","fixed_version":"v1.2.0","trace":[{"module":"example.com/a","version":"v1.1.0"}]}}
{"finding":{"osv":"GO-2099-0002","trace":[{"module":"example.com/b","version":"v0.1.0"}]}}
{"finding":{"osv":"GO-2099-0001","fixed_version":"v1.2.0","trace":[{"module":"example.com/a","version":"v1.1.0","package":"example.com/a/p"}]}}
{"finding":{"osv":"GO-2099-0001","fixed_version":"v1.2.0","trace":[{"module":"example.com/a","version":"v1.1.0","package":"example.com/a/p","function":"Parse","receiver":"*Parser"},{"module":"example.com/me","package":"example.com/me/cmd/x","function":"main"}]}}
`

func TestParseReportAndCheck(t *testing.T) {
	rep, err := ParseReport(strings.NewReader(sampleReport))
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Reachable(); !slices.Equal(got, []string{"GO-2099-0001"}) {
		t.Fatalf("reachable = %v", got)
	}
	if v := rep.Vulns["GO-2099-0002"]; v == nil || v.Reachable || v.Summary != "only required" {
		t.Errorf("GO-2099-0002 = %+v", v)
	}
	if v, ok := rep.Vulns["GO-2099-0003"]; ok {
		t.Errorf("GO-2099-0003 has no finding but is in the report: %+v", v)
	}

	for _, tc := range []struct {
		name  string
		al    Allowlist
		ok    bool
		stale []string
	}{
		{"nothing allowed", Allowlist{}, false, nil},
		{"allowed", Allowlist{"GO-2099-0001": "r"}, true, nil},
		// Only required, never called: the entry is not needed.
		{"stale", Allowlist{"GO-2099-0001": "r", "GO-2099-0002": "r"}, false, []string{"GO-2099-0002"}},
	} {
		res := Check(rep, tc.al)
		if res.OK() != tc.ok || !slices.Equal(res.Stale, tc.stale) {
			t.Errorf("%s: result %+v, want ok=%v stale=%v", tc.name, res, tc.ok, tc.stale)
		}
	}

	var out bytes.Buffer
	Describe(&out, rep, Allowlist{}, Check(rep, Allowlist{}))
	for _, want := range []string{"GO-2099-0001  called", "example.com/a@v1.1.0 (fixed in v1.2.0)", "example.com/a/p.Parser.Parse", "1 reachable, 1 more"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("description lacks %q:\n%s", want, out.String())
		}
	}
}

func TestParseReportRejects(t *testing.T) {
	for _, bad := range []string{
		``, // no config: not govulncheck output, or it failed early
		`{"config":{"protocol_version":"v2.0.0"}}`,
		`{"config":{"protocol_version":"v1.0.0"}}{"finding":{"osv":"GO-2099-0001"}}`,
		`Scanning your code...`,
	} {
		if _, err := ParseReport(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// TestGovulncheckReadsDatabase runs the real govulncheck (the go.mod tool)
// against a database written by Write, holding synthetic entries for the
// standard library at every version: net/http.Get, which the scanned
// program calls, and net/http.ListenAndServeTLS, which it does not.
func TestGovulncheckReadsDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("runs govulncheck")
	}
	src := t.TempDir()
	osvEntry(t, src, "GO-2099-0001", affects("stdlib",
		[]map[string]any{{"path": "net/http", "symbols": []string{"Get"}}}, "0"))
	osvEntry(t, src, "GO-2099-0002", affects("stdlib",
		[]map[string]any{{"path": "net/http", "symbols": []string{"ListenAndServeTLS"}}}, "0"))
	// A fixed version below every Go release: must not be reported.
	osvEntry(t, src, "GO-2099-0003", affects("stdlib",
		[]map[string]any{{"path": "net/http", "symbols": []string{"Get"}}}, "0", "1.0.1"))
	db := filepath.Join(t.TempDir(), "db")
	if _, err := Write(src, db, time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}

	prog := t.TempDir()
	for name, content := range map[string]string{
		"go.mod":  "module example.com/scanned\n\ngo 1.22\n",
		"main.go": "package main\n\nimport \"net/http\"\n\nfunc main() { http.Get(\"http://127.0.0.1:1/\") }\n",
	} {
		if err := os.WriteFile(filepath.Join(prog, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "tool", "govulncheck", "-C", prog, "-db", "file://"+filepath.ToSlash(db), "-format", "json", ".")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("govulncheck: %v\n%s", err, stderr.String())
	}
	rep, err := ParseReport(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Reachable(); !slices.Equal(got, []string{"GO-2099-0001"}) {
		t.Fatalf("reachable = %v, want [GO-2099-0001]; govulncheck said:\n%s", got, out)
	}
	if v := rep.Vulns["GO-2099-0002"]; v == nil || v.Reachable {
		t.Errorf("GO-2099-0002 (imported, not called) = %+v, want an unreachable finding", v)
	}
	if _, ok := rep.Vulns["GO-2099-0003"]; ok {
		t.Errorf("GO-2099-0003 is fixed in every Go release (%s) but was reported", runtime.Version())
	}
	top := rep.Vulns["GO-2099-0001"].Example.Trace
	if top[0].Package != "net/http" || top[0].Function != "Get" || top[len(top)-1].Function != "main" {
		t.Errorf("trace of GO-2099-0001 = %v, want net/http.Get called from main", top)
	}
	if res := Check(rep, Allowlist{}); res.OK() {
		t.Error("a reachable vulnerability passed an empty allowlist")
	}
	if res := Check(rep, Allowlist{"GO-2099-0001": "synthetic"}); !res.OK() {
		t.Errorf("allowlisted vulnerability failed: %+v", res)
	}
}
