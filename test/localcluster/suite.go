package localcluster

import (
	"fmt"
	"os"
	"testing"
)

// RunTests is the TestMain of a test package that needs a cluster of its
// own: it brings the cluster up, hands it to setup (which keeps what the
// tests use, such as clients), runs the tests and stops the cluster. It
// returns the exit code and, when something failed, says where the
// components' logs are.
func RunTests(m *testing.M, o Options, setup func(*Cluster) error) int {
	c, err := Start(o)
	defer c.Stop()
	if err == nil && setup != nil {
		err = setup(c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "component logs are in %s/logs\n", c.LocalDir)
	}
	return code
}
