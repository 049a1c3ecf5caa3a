// Package docs checks the repository's Markdown documentation: every
// relative link resolves, every anchor names a heading, and every
// repository path named in code resolves.
//
// What counts as a repository path: a token of an inline code span or of a
// fenced code block that contains a '/' and whose first segment is a
// top-level directory of the repository that holds files (cmd, pkg, hack,
// artifacts, test, charts, docs, .ci, ...). A leading "./" is dropped, and
// so are a trailing ":<line>" and surrounding punctuation. A placeholder
// (`<name>`, `*`, `...`, `$VAR`, `{a,b}`) ends the checked part: the
// directory before it must exist. A Go identifier qualified by a package
// directory (`test/integration/framework.StartServer`) needs the directory.
// Paths under _output/ are made at run
// time and are not checked; neither are paths relative to a file's own
// directory (`base/`, `overlays/external-etcd`), which only links may use.
package docs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// repoFiles lists the repository's files, relative to root and slash
// separated: what git tracks plus what it would track (untracked files
// that are not ignored), so that a page added but not yet committed is
// checked too, and a build output never counts as present.
func repoFiles(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("git ls-files: %v", err)
		}
		t.Skipf("not a git checkout (git ls-files: %v)", err)
	}
	var files []string
	for _, f := range bytes.Split(out, []byte{0}) {
		if len(f) == 0 {
			continue
		}
		// Deleted in the work tree but still in the index: gone.
		if _, err := os.Lstat(filepath.Join(root, string(f))); err != nil {
			continue
		}
		files = append(files, string(f))
	}
	sort.Strings(files)
	return files
}

func TestDocumentationLinksAndPaths(t *testing.T) {
	root := ".."
	files := repoFiles(t, root)
	var pages int
	for _, f := range files {
		if strings.HasSuffix(f, ".md") {
			pages++
		}
	}
	// The README, the index and the pages under docs/ at least.
	if pages < 20 {
		t.Fatalf("found %d Markdown files; is %s the repository root?", pages, root)
	}
	for _, problem := range check(root, files) {
		t.Error(problem)
	}
}

// TestEveryPageIsInTheIndex keeps docs/README.md, the index, complete: a
// page under docs/ that it does not link is one a newcomer never finds.
func TestEveryPageIsInTheIndex(t *testing.T) {
	files := repoFiles(t, "..")
	index, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, m := range linkRE.FindAllStringSubmatch(parse(string(index)).prose, -1) {
		file, _, _ := strings.Cut(m[2], "#")
		linked[path.Clean(path.Join("docs", file))] = true
	}
	pages := 0
	for _, f := range files {
		if !strings.HasPrefix(f, "docs/") || !strings.HasSuffix(f, ".md") || f == "docs/README.md" {
			continue
		}
		pages++
		if !linked[f] {
			t.Errorf("%s is not linked from docs/README.md: add a line for it to the index", f)
		}
	}
	if pages == 0 {
		t.Error("no pages under docs/")
	}
}

// TestCheckFindsBrokenReferences shows that the check reports each kind of
// broken reference, and nothing for references that resolve.
func TestCheckFindsBrokenReferences(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Top\n\nSee [the guide](docs/guide.md#a-real-node-real_node1), [setup](docs/guide.md#setup-1),\n"+
		"[its\nsecond line](docs/guide.md), [here](#top), [tools](hack/), [a script](hack/run.sh#L3),\n"+
		"[the web](https://example.com/x.md#nothing), `hack/run.sh --help`, `hack/tools/<name>`, `./pkg/...`, `hack/tools.Build`,\n"+
		"`_output/bin/tool`, `base/` and `k8s.io/api/core/v1`.\n\n"+
		"```sh\n# not a heading\nkubectl apply -f pkg/thing.yaml\n```\n\n"+
		// The broken ones:
		"[gone](docs/missing.md), [no anchor](docs/guide.md#nowhere), [self](#not-here),\n"+
		"[outside](../elsewhere.md), `hack/missing.sh`, `hack/nothing.Build`, `pkg/nothing/<x>`, [code](hack/run.sh) `[x](ignored.md)`,\n"+
		"an escaped \\[A-Z\\](missing.md) that is no link.\n"+
		"```\nkubectl apply -f pkg/absent.yaml\n```\n")
	write("docs/guide.md", "# Guide\n\n## A real node: `REAL_NODE=1`\n\n## Setup\n\n## Setup\n\n```\n## Fenced\n```\n")
	write("hack/run.sh", "#!/bin/sh\n")
	write("hack/tools/kube/go.mod", "module x\n")
	write("pkg/thing.yaml", "{}\n")
	files := []string{"README.md", "docs/guide.md", "hack/run.sh", "hack/tools/kube/go.mod", "pkg/thing.yaml"}

	got := check(root, files)
	want := []string{
		`README.md: link "docs/missing.md": no such file`,
		`README.md: link "docs/guide.md#nowhere": docs/guide.md has no heading with anchor "nowhere"`,
		`README.md: link "#not-here": README.md has no heading with anchor "not-here"`,
		`README.md: link "../elsewhere.md": outside the repository`,
		"README.md: path `hack/missing.sh`: no such file or directory",
		"README.md: path `hack/nothing.Build`: no such file or directory",
		"README.md: path `pkg/nothing/<x>`: no such directory pkg/nothing",
		"README.md: path `pkg/absent.yaml`: no such file or directory",
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("check reported:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"Two commands":                                   "two-commands",
		"A real node: `REAL_NODE=1`":                     "a-real-node-real_node1",
		"The in-place agent's rights":                    "the-in-place-agents-rights",
		"Elastic JobSets: `replicatedjobs` and `/scale`": "elastic-jobsets-replicatedjobs-and-scale",
		"Template updates: `spec.updatePolicy`":          "template-updates-specupdatepolicy",
		"1. Images":                                      "1-images",
		"**Capacity:** [see](x.md)":                      "capacity-see",
		"Every jobset-apiserver down":                    "every-jobset-apiserver-down",
		"Résumé — über":                                  "résumé--über",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

var (
	headingRE = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	// An inline link or image: [text](target) or [text](target "title").
	linkRE = regexp.MustCompile(`!?\[([^\]]*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// A reference definition: [label]: target
	refDefRE = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	codeRE   = regexp.MustCompile("`+([^`]+)`+")
	escapeRE = regexp.MustCompile(`\\[[:punct:]]`)
	schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// anchor is the id GitHub gives a heading: its text without Markdown,
// lowercased, every character but letters, digits, '_', '-' and spaces
// removed, and each space turned into '-'.
func anchor(heading string) string {
	text := linkRE.ReplaceAllString(heading, "$1")
	text = strings.NewReplacer("`", "", "*", "").Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// page is a Markdown file split into what is outside code blocks (with
// each fenced block blanked) and the text of its fenced blocks.
type page struct {
	prose   string
	fenced  []string
	anchors map[string]bool
}

func parse(content string) page {
	p := page{anchors: map[string]bool{}}
	seen := map[string]int{}
	var prose, block []string
	inFence, fence := false, ""
	for _, line := range strings.Split(content, "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		if !inFence && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			inFence, fence, block = true, trimmed[:3], nil
			prose = append(prose, "")
			continue
		}
		if inFence {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				inFence = false
				p.fenced = append(p.fenced, strings.Join(block, "\n"))
			} else {
				block = append(block, line)
			}
			prose = append(prose, "")
			continue
		}
		prose = append(prose, line)
		if m := headingRE.FindStringSubmatch(line); m != nil {
			a := anchor(m[2])
			if n := seen[a]; n > 0 {
				seen[a] = n + 1
				a = fmt.Sprintf("%s-%d", a, n)
			} else {
				seen[a] = 1
			}
			p.anchors[a] = true
		}
	}
	p.prose = strings.Join(prose, "\n")
	return p
}

// check returns one line per broken reference in the Markdown files among
// files (paths relative to root, slash separated).
func check(root string, files []string) []string {
	exists := map[string]bool{}
	dirs := map[string]bool{}
	topDirs := map[string]bool{}
	for _, f := range files {
		exists[f] = true
		for d := path.Dir(f); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
		if i := strings.IndexByte(f, '/'); i > 0 {
			topDirs[f[:i]] = true
		}
	}
	pages := map[string]page{}
	load := func(f string) (page, error) {
		if p, ok := pages[f]; ok {
			return p, nil
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return page{}, err
		}
		p := parse(string(b))
		pages[f] = p
		return p, nil
	}

	var problems []string
	for _, f := range files {
		if !strings.HasSuffix(f, ".md") {
			continue
		}
		p, err := load(f)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		report := func(format string, args ...any) {
			problems = append(problems, f+": "+fmt.Sprintf(format, args...))
		}

		// Links, outside code: code spans and backslash escapes (\[) are
		// blanked first.
		prose := codeRE.ReplaceAllStringFunc(p.prose, func(s string) string { return strings.Repeat(" ", len(s)) })
		prose = escapeRE.ReplaceAllString(prose, "  ")
		var targets []string
		for _, m := range linkRE.FindAllStringSubmatch(prose, -1) {
			targets = append(targets, m[2])
		}
		for _, m := range refDefRE.FindAllStringSubmatch(prose, -1) {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if target == "" || schemeRE.MatchString(target) || strings.HasPrefix(target, "//") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			resolved := f
			if file != "" {
				resolved = path.Clean(path.Join(path.Dir(f), file))
				if resolved == ".." || strings.HasPrefix(resolved, "../") || path.IsAbs(file) {
					report("link %q: outside the repository", target)
					continue
				}
				if !exists[resolved] && !dirs[resolved] {
					report("link %q: no such file", target)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(resolved, ".md") || !exists[resolved] {
				continue
			}
			to, err := load(resolved)
			if err != nil {
				report("link %q: %v", target, err)
				continue
			}
			if !to.anchors[frag] {
				report("link %q: %s has no heading with anchor %q", target, resolved, frag)
			}
		}

		// Repository paths named in code spans and fenced blocks.
		var code []string
		for _, m := range codeRE.FindAllStringSubmatch(p.prose, -1) {
			code = append(code, m[1])
		}
		code = append(code, p.fenced...)
		for _, c := range code {
			for _, token := range strings.Fields(c) {
				if problem := checkPath(token, topDirs, exists, dirs); problem != "" {
					report("%s", problem)
				}
			}
		}
	}
	return problems
}

var (
	lineSuffixRE = regexp.MustCompile(`:\d+(-\d+)?$`)
	goIdentRE    = regexp.MustCompile(`^(.+)\.[A-Z][A-Za-z0-9_]*$`)
)

// checkPath returns what is wrong with a token that names a repository
// path, or "" when it resolves or is not a repository path.
func checkPath(token string, topDirs, exists, dirs map[string]bool) string {
	p := strings.Trim(token, "()[]{},;:\"'`")
	p = strings.TrimRight(p, ".")
	p = strings.TrimPrefix(p, "./")
	p = lineSuffixRE.ReplaceAllString(p, "")
	i := strings.IndexByte(p, '/')
	if i <= 0 || !topDirs[p[:i]] || p[:i] == "_output" {
		return ""
	}
	if cut := strings.IndexAny(p, "<*{$["); cut >= 0 || strings.Contains(p, "...") {
		if cut < 0 {
			cut = strings.Index(p, "...")
		}
		dir := strings.TrimSuffix(p[:strings.LastIndexByte(p[:cut+1], '/')+1], "/")
		if dir != "" && !dirs[dir] {
			return fmt.Sprintf("path `%s`: no such directory %s", p, dir)
		}
		return ""
	}
	clean := strings.TrimSuffix(p, "/")
	if exists[clean] || dirs[clean] {
		return ""
	}
	// A Go package's identifier: the package's directory must exist.
	if m := goIdentRE.FindStringSubmatch(clean); m != nil && dirs[m[1]] {
		return ""
	}
	return fmt.Sprintf("path `%s`: no such file or directory", p)
}
