// Package vulndb turns the OSV entries of the golang.org/x/vulndb module
// into a directory in the layout of the Go vulnerability database, so that
// govulncheck can read it with -db file:///dir and never reach the network.
//
// The layout written (all plain JSON, which is what govulncheck's file
// source reads):
//
//	index/db.json       {"modified": <time>}
//	index/modules.json  [{"path": ..., "vulns": [{"id", "modified", "fixed"}]}]
//	ID/<id>.json        the OSV entry, byte for byte
package vulndb

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/semver"
)

// entry holds the fields of an OSV entry that the index needs.
type entry struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	Affected []struct {
		Package struct {
			Name string `json:"name"`
		} `json:"package"`
		Ranges []osvRange `json:"ranges"`
	} `json:"affected"`
}

type osvRange struct {
	Type   string `json:"type"`
	Events []struct {
		Introduced string `json:"introduced,omitempty"`
		Fixed      string `json:"fixed,omitempty"`
	} `json:"events"`
}

// DBMeta is index/db.json.
type DBMeta struct {
	Modified time.Time `json:"modified"`
}

// ModuleMeta is one element of index/modules.json.
type ModuleMeta struct {
	Path  string       `json:"path"`
	Vulns []ModuleVuln `json:"vulns"`
}

// ModuleVuln names one entry that affects a module.
type ModuleVuln struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	// Fixed is a version from which on the entry no longer affects the
	// module; govulncheck skips the entry for versions at or above it
	// without reading it. Empty means "read it whatever the version".
	Fixed string `json:"fixed,omitempty"`
}

var idRE = regexp.MustCompile(`^GO-[0-9]{4}-[0-9]{4,}$`)

// Index is the content of the two index files.
type Index struct {
	DB      DBMeta
	Modules []ModuleMeta
}

// BuildIndex reads every GO-*.json file of srcDir and returns the index
// over them. modified is a lower bound for DB.Modified: the entries in
// the vulndb repository carry a zero time (the real ones are set when the
// public database is deployed), so the caller passes the commit time of
// the vulndb version.
func BuildIndex(srcDir string, modified time.Time) (*Index, map[string]string, error) {
	names, err := filepath.Glob(filepath.Join(srcDir, "GO-*.json"))
	if err != nil {
		return nil, nil, err
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("no GO-*.json OSV entries in %s", srcDir)
	}
	slices.Sort(names)
	files := make(map[string]string, len(names)) // id -> source file
	mods := map[string]*ModuleMeta{}
	idx := &Index{DB: DBMeta{Modified: modified.UTC()}, Modules: []ModuleMeta{}}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, nil, err
		}
		var e entry
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		// govulncheck looks entries up as ID/<id>.json, so a file whose
		// name disagrees with its id would be unreachable.
		if !idRE.MatchString(e.ID) || filepath.Base(name) != e.ID+".json" {
			return nil, nil, fmt.Errorf("%s: id %q does not match the file name", name, e.ID)
		}
		files[e.ID] = name
		if e.Modified.After(idx.DB.Modified) {
			idx.DB.Modified = e.Modified.UTC()
		}
		for _, a := range e.Affected {
			path := a.Package.Name
			if path == "" {
				return nil, nil, fmt.Errorf("%s: affected entry without a module path", name)
			}
			m := mods[path]
			if m == nil {
				m = &ModuleMeta{Path: path}
				mods[path] = m
			}
			fixed := fixedVersion(a.Ranges)
			// One entry may name a module more than once (the standard
			// library, per package): index it once, with a fix that
			// covers all of its ranges.
			if n := len(m.Vulns); n > 0 && m.Vulns[n-1].ID == e.ID {
				m.Vulns[n-1].Fixed = laterFix(m.Vulns[n-1].Fixed, fixed)
				continue
			}
			m.Vulns = append(m.Vulns, ModuleVuln{ID: e.ID, Modified: e.Modified.UTC(), Fixed: fixed})
		}
	}
	for _, m := range mods {
		slices.SortStableFunc(m.Vulns, func(a, b ModuleVuln) int { return strings.Compare(a.ID, b.ID) })
		idx.Modules = append(idx.Modules, *m)
	}
	slices.SortFunc(idx.Modules, func(a, b ModuleMeta) int { return strings.Compare(a.Path, b.Path) })
	return idx, files, nil
}

// fixedVersion returns the highest fixed version of ranges, or "" when
// some range is still open at its top (its highest event is an
// introduction) or cannot be read. Erring towards "" only costs
// govulncheck the reading of one more entry; a too low value would hide
// a vulnerability.
func fixedVersion(ranges []osvRange) string {
	best := ""
	for _, r := range ranges {
		if r.Type != "SEMVER" {
			return ""
		}
		top, topFixed := "", false
		for _, ev := range r.Events {
			for _, c := range []struct {
				v     string
				fixed bool
			}{{ev.Introduced, false}, {ev.Fixed, true}} {
				// "0" is the start of time, below every version
				// (also below pseudo-versions v0.0.0-...): never the top.
				if c.v == "" || c.v == "0" && !c.fixed {
					continue
				}
				v := "v" + c.v
				if !semver.IsValid(v) {
					return ""
				}
				// At an equal version a fix wins: introduced and
				// fixed at one version is an empty range.
				if top == "" || semver.Compare(v, top) > 0 || (semver.Compare(v, top) == 0 && c.fixed) {
					top, topFixed = v, c.fixed
				}
			}
		}
		if !topFixed {
			return ""
		}
		if best == "" || semver.Compare(top, best) > 0 {
			best = top
		}
	}
	return strings.TrimPrefix(best, "v")
}

// laterFix combines two index fixes of one entry: "" (no fix) wins.
func laterFix(a, b string) string {
	if a == "" || b == "" {
		return ""
	}
	if semver.Compare("v"+a, "v"+b) >= 0 {
		return a
	}
	return b
}

// Write builds the database from the OSV entries in srcDir into outDir.
// It writes into a sibling temporary directory and renames it into place
// at the end, so that an existing outDir is always a complete database.
// When outDir exists already it is left alone: it is keyed by the vulndb
// version, whose content never changes.
func Write(srcDir, outDir string, modified time.Time) (written bool, err error) {
	if _, err := os.Stat(outDir); err == nil {
		return false, nil
	}
	idx, files, err := BuildIndex(srcDir, modified)
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(outDir), 0o755); err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(outDir), "."+filepath.Base(outDir)+".tmp-")
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err := writeIndex(tmp, idx); err != nil {
		return false, err
	}
	if err := os.Mkdir(filepath.Join(tmp, "ID"), 0o755); err != nil {
		return false, err
	}
	for id, src := range files {
		b, err := os.ReadFile(src)
		if err != nil {
			return false, err
		}
		if err := os.WriteFile(filepath.Join(tmp, "ID", id+".json"), b, 0o644); err != nil {
			return false, err
		}
	}
	// MkdirTemp makes the directory 0700; others may read the cache.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, outDir); err != nil {
		return false, err
	}
	return true, nil
}

func writeIndex(dir string, idx *Index) error {
	if err := os.Mkdir(filepath.Join(dir, "index"), 0o755); err != nil {
		return err
	}
	db, err := json.Marshal(idx.DB)
	if err != nil {
		return err
	}
	mods, err := json.Marshal(idx.Modules)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "index", "db.json"), db, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "index", "modules.json"), mods, 0o644)
}
