package localcluster

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// RunBenchmarks is the TestMain of a benchmark package: it brings a cluster
// up only when a benchmark will run (-test.bench), stores it in *c for the
// benchmarks, runs them, stops the cluster and returns the exit code.
func RunBenchmarks(m *testing.M, o Options, c **Cluster) int {
	if !strings.Contains(strings.Join(os.Args, " "), "-test.bench") {
		return m.Run()
	}
	started, err := Start(o)
	defer started.Stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*c = started
	return m.Run()
}
