package node

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nativejobset/jobset/hack/tools/localtool/proc"
)

// The node's programs are recorded like the rest of the cluster's (package
// proc), so that "localtool down" and this package stop each other's.
func (c *Config) procs() proc.Dirs {
	return proc.Dirs{Logs: c.logDir(), Pids: filepath.Join(c.LocalDir, "pids"), Logf: c.logf}
}

func (c *Config) start(p proc.Process) error              { return c.procs().Start(p) }
func (c *Config) running(name string) (int, bool)         { return c.procs().Running(name) }
func (c *Config) stop(name string, t time.Duration) error { return c.procs().Stop(name, t) }

// waitFor polls ready until it succeeds, the component exits, or the
// configured wait passes.
func (c *Config) waitFor(name, what string, ready func() error) error {
	return c.procs().WaitFor(context.Background(), name, what, c.Wait, ready)
}

// run runs a short command and returns its combined output in the error.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
