package vulndb

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// The parts of govulncheck's -format json stream (protocol v1) that the
// check reads. The stream is a sequence of JSON objects, each holding one
// of config, progress, osv or finding.
type message struct {
	Config *struct {
		ProtocolVersion string `json:"protocol_version"`
		DB              string `json:"db"`
		ScanLevel       string `json:"scan_level"`
	} `json:"config"`
	OSV *struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	} `json:"osv"`
	Finding *Finding `json:"finding"`
}

// Finding is one govulncheck finding.
type Finding struct {
	OSV          string   `json:"osv"`
	FixedVersion string   `json:"fixed_version"`
	Trace        []*Frame `json:"trace"`
}

// Frame is one step of a finding's trace; Trace[0] is the vulnerable
// symbol (or only its package or module, when no symbol is reached).
type Frame struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Package  string `json:"package"`
	Function string `json:"function"`
	Receiver string `json:"receiver"`
}

func (f *Frame) String() string {
	s := f.Package
	if s == "" {
		s = f.Module
	}
	if f.Function != "" {
		if f.Receiver != "" {
			s += "." + strings.TrimPrefix(f.Receiver, "*")
		}
		s += "." + f.Function
	}
	return s
}

// Vuln is one vulnerability of a report.
type Vuln struct {
	ID      string
	Summary string
	// Reachable: govulncheck found a call path from the scanned code to a
	// vulnerable symbol. Otherwise the vulnerable module or package is
	// only required or imported.
	Reachable bool
	// Example is the first finding at the most precise level seen.
	Example *Finding
}

// Report is a parsed govulncheck -format json stream.
type Report struct {
	ScanLevel string
	Vulns     map[string]*Vuln
}

// ParseReport reads govulncheck's -format json output.
func ParseReport(r io.Reader) (*Report, error) {
	rep := &Report{Vulns: map[string]*Vuln{}}
	// govulncheck sends an osv message for every entry it read, also
	// those that turn out not to affect the scanned versions: only a
	// finding makes a vulnerability part of the report.
	summaries := map[string]string{}
	sawConfig := false
	dec := json.NewDecoder(bufio.NewReader(r))
	for {
		var m message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("govulncheck output: %w", err)
		}
		switch {
		case m.Config != nil:
			// A different protocol could mean the fields read here
			// moved, and the check would silently pass.
			if !strings.HasPrefix(m.Config.ProtocolVersion, "v1.") {
				return nil, fmt.Errorf("govulncheck output: protocol %q, want v1.x", m.Config.ProtocolVersion)
			}
			rep.ScanLevel = m.Config.ScanLevel
			sawConfig = true
		case m.OSV != nil:
			summaries[m.OSV.ID] = m.OSV.Summary
		case m.Finding != nil:
			f := m.Finding
			if f.OSV == "" || len(f.Trace) == 0 {
				return nil, fmt.Errorf("govulncheck output: finding without osv id or trace")
			}
			v := rep.Vulns[f.OSV]
			if v == nil {
				v = &Vuln{ID: f.OSV}
				rep.Vulns[f.OSV] = v
			}
			reach := f.Trace[0].Function != ""
			if v.Example == nil || (reach && !v.Reachable) {
				v.Example = f
			}
			v.Reachable = v.Reachable || reach
		}
	}
	for id, v := range rep.Vulns {
		v.Summary = summaries[id]
	}
	if !sawConfig {
		return nil, errors.New("govulncheck output: no config message (not -format json output?)")
	}
	return rep, nil
}

// Reachable returns the IDs of the reachable vulnerabilities, sorted.
func (r *Report) Reachable() []string {
	var ids []string
	for id, v := range r.Vulns {
		if v.Reachable {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Allowlist maps a vulnerability ID to the reason it is accepted.
type Allowlist map[string]string

// ParseAllowlist reads lines of "GO-YYYY-NNNN  reason"; blank lines and
// lines starting with # are skipped. Every entry needs a reason, so that
// whoever reads the list later can judge whether it still holds.
func ParseAllowlist(r io.Reader) (Allowlist, error) {
	al := Allowlist{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, reason := line, ""
		if i := strings.IndexAny(line, " \t"); i >= 0 {
			id, reason = line[:i], strings.TrimSpace(line[i:])
		}
		switch {
		case !idRE.MatchString(id):
			return nil, fmt.Errorf("line %d: %q is not a GO-YYYY-NNNN id", n, id)
		case reason == "":
			return nil, fmt.Errorf("line %d: %s has no reason", n, id)
		case al[id] != "":
			return nil, fmt.Errorf("line %d: %s listed twice", n, id)
		}
		al[id] = reason
	}
	return al, sc.Err()
}

// Result is the verdict of Check.
type Result struct {
	// Failing are the reachable vulnerabilities not in the allowlist.
	Failing []string
	// Allowed are the reachable vulnerabilities in the allowlist.
	Allowed []string
	// Stale are allowlist entries that match no reachable vulnerability:
	// they should be removed, or they would hide a later regression.
	Stale []string
}

// OK reports whether the check passes.
func (r Result) OK() bool { return len(r.Failing) == 0 && len(r.Stale) == 0 }

// Check applies the allowlist to the report.
func Check(rep *Report, al Allowlist) Result {
	var res Result
	reach := rep.Reachable()
	for _, id := range reach {
		if _, ok := al[id]; ok {
			res.Allowed = append(res.Allowed, id)
		} else {
			res.Failing = append(res.Failing, id)
		}
	}
	for id := range al {
		if !slices.Contains(reach, id) {
			res.Stale = append(res.Stale, id)
		}
	}
	slices.Sort(res.Stale)
	return res
}

// Describe writes a human-readable account of the result.
func Describe(w io.Writer, rep *Report, al Allowlist, res Result) {
	line := func(id string) {
		v := rep.Vulns[id]
		fmt.Fprintf(w, "  %s  %s\n", id, v.Summary)
		if f := v.Example; f != nil {
			top := f.Trace[0]
			fixed := f.FixedVersion
			if fixed == "" {
				fixed = "none"
			}
			fmt.Fprintf(w, "      in %s@%s (fixed in %s)\n", top.Module, top.Version, fixed)
			// The trace runs from the vulnerable symbol to the caller
			// in the scanned code; print it caller first, the middle of
			// long ones elided ('go tool govulncheck -show traces' has
			// it all).
			n := len(f.Trace)
			for i := n - 1; i >= 0; i-- {
				if n > 6 && i < n-3 && i > 1 {
					if i == 2 {
						fmt.Fprintf(w, "        ... %d calls\n", n-5)
					}
					continue
				}
				fmt.Fprintf(w, "      %s\n", f.Trace[i])
			}
		}
	}
	if len(res.Failing) > 0 {
		fmt.Fprintf(w, "reachable vulnerabilities (bump the module, or add the id with a reason to the allowlist):\n")
		for _, id := range res.Failing {
			line(id)
		}
	}
	if len(res.Allowed) > 0 {
		fmt.Fprintf(w, "reachable but allowlisted:\n")
		for _, id := range res.Allowed {
			fmt.Fprintf(w, "  %s  (%s)\n", id, al[id])
		}
	}
	if len(res.Stale) > 0 {
		fmt.Fprintf(w, "allowlist entries that match no reachable vulnerability (remove them):\n")
		for _, id := range res.Stale {
			fmt.Fprintf(w, "  %s  (%s)\n", id, al[id])
		}
	}
	unreach := len(rep.Vulns) - len(rep.Reachable())
	fmt.Fprintf(w, "%d reachable, %d more in required modules or imported packages but not called (scan level %s)\n",
		len(rep.Reachable()), unreach, rep.ScanLevel)
}
