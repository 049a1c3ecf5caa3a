// Package metricslist reads a list of metric families, one per line as
// "name type label,label,...", such as the list of jobset-apiserver
// families the dashboard may use: the dashboard's query checks and the
// integration test against the real server read the same file with it.
package metricslist

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// Family is one listed family: its type (counter, gauge, histogram, ...)
// and the names of the labels its series carry.
type Family struct {
	Type   string
	Labels []string
}

// Read reads the list at path; blank lines and lines starting with # are
// skipped, and a line without a name and a type is an error.
func Read(path string) (map[string]Family, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]Family{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 || len(fields) > 3 {
			return nil, fmt.Errorf("%s:%d: %q is not \"name type [label,label,...]\"", path, n, line)
		}
		fam := Family{Type: fields[1]}
		if len(fields) == 3 {
			fam.Labels = strings.Split(fields[2], ",")
		}
		out[fields[0]] = fam
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s lists no family", path)
	}
	return out, nil
}
