package anchor

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/nativejobset/jobset/test/benchutil"
	"github.com/nativejobset/jobset/test/localcluster"
)

// cpuMeter reads the CPU time of the processes that serve one side's run,
// so that each phase can say where the machine's time went: on two shared
// cores, a phase is as fast as the busiest process lets it be.
type cpuMeter struct{ procs []meteredProc }

type meteredProc struct {
	name string
	pid  int
}

// benchProcess names this process in readings: the benchmark's watches on
// every side, and on the plain side the plain client's writes too.
const benchProcess = "benchmark"

// newCPUMeter meters every component of c that has a pid file, upstream's
// manager when u is not nil, and this process.
func newCPUMeter(c *localcluster.Cluster, u *upstream) (*cpuMeter, error) {
	entries, err := os.ReadDir(filepath.Join(c.LocalDir, "pids"))
	if err != nil {
		return nil, err
	}
	m := &cpuMeter{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".pid")
		if !ok {
			continue
		}
		pid, err := c.PID(name)
		if err != nil {
			return nil, fmt.Errorf("%s pid: %w", name, err)
		}
		m.procs = append(m.procs, meteredProc{name, pid})
	}
	if u != nil {
		m.procs = append(m.procs, meteredProc{"jobset-upstream-manager", u.cmd.Process.Pid})
	}
	m.procs = append(m.procs, meteredProc{benchProcess, os.Getpid()})
	return m, nil
}

// cpuReading is CPU seconds (user and system) by process name.
type cpuReading map[string]float64

// read takes every metered process's CPU time so far. A process that
// cannot be read fails the benchmark: it died, and the run means nothing.
func (m *cpuMeter) read(b *testing.B) cpuReading {
	b.Helper()
	r := make(cpuReading, len(m.procs))
	for _, p := range m.procs {
		s, err := benchutil.ProcessCPUSeconds(p.pid)
		if err != nil {
			b.Fatalf("reading the CPU time of %s: %v", p.name, err)
		}
		r[p.name] = s
	}
	return r
}

// since is the CPU time each process spent after before.
func (r cpuReading) since(before cpuReading) cpuReading {
	out := make(cpuReading, len(r))
	for name, s := range r {
		out[name] = s - before[name]
	}
	return out
}

func (r cpuReading) total() float64 {
	sum := 0.0
	for _, s := range r {
		sum += s
	}
	return sum
}

// String lists the processes from the busiest down, those under 0.5 s
// left out: "total 212.4 s: kube-apiserver 98.1, kwok 40.2, ...".
func (r cpuReading) String() string {
	names := make([]string, 0, len(r))
	for name := range r {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if r[names[i]] != r[names[j]] {
			return r[names[i]] > r[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, 0, len(names))
	for _, name := range names {
		if r[name] >= 0.5 {
			parts = append(parts, fmt.Sprintf("%s %.1f", name, r[name]))
		}
	}
	return fmt.Sprintf("total %.1f s: %s", r.total(), strings.Join(parts, ", "))
}
