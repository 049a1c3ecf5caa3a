// Package keda checks that KEDA drives a replicatedJob: a local cluster of
// its own (hack/local-up.sh with WITH_KEDA=1) runs KEDA's operator and metrics
// API server, built from the module pinned as KEDA_VERSION, next to the JobSet
// API, and the tests apply the KEDA example of artifacts/examples/autoscaling.
//
// Run it with `make test-keda`. Environment: KEDA_PORT_BASE (default 21400),
// KEDA_LOCAL_DIR, KEDA_KEEP_CLUSTER=1, KEDA_REUSE_CLUSTER=1 (see
// test/localcluster).
package keda

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/nativejobset/jobset/test/localcluster"
)

var (
	stack *localcluster.Cluster
	dyn   dynamic.Interface
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	o := localcluster.Options{
		Prefix: "KEDA_", Dir: "_output/keda", PortBase: 21400, Nodes: 4,
		Env: []string{"WITH_KEDA=1"},
	}
	return localcluster.RunTests(m, o, func(c *localcluster.Cluster) (err error) {
		stack = c
		dyn, err = dynamic.NewForConfig(c.Config)
		return err
	})
}

// kubectl runs kubectl against the cluster; it fails the test when kubectl fails.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := stack.Kubectl("", args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	localcluster.Eventually(t, timeout, what, cond)
}

// namespace creates a namespace for one test and deletes it afterwards.
func namespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	return stack.Namespace(t, strings.Trim(name, "-"))
}
