// Package migration checks jobset-migrate end to end on the local cluster:
// JobSets served by upstream JobSet's CustomResourceDefinition (installed
// from the sigs.k8s.io/jobset module), with running Jobs and pods, are moved
// to the native API without a pod being recreated.
//
// It is a module of its own so that the product never depends on
// sigs.k8s.io/jobset.
package migration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/nativejobset/jobset/test/localcluster"
	"github.com/nativejobset/jobset/test/reporoot"
	upstream "sigs.k8s.io/jobset/client-go/clientset/versioned"
)

var (
	stack *localcluster.Cluster
	// migrateBin is jobset-migrate, built for this run.
	migrateBin string
	// crdFile is upstream's CustomResourceDefinition manifest.
	crdFile        string
	dyn            dynamic.Interface
	upstreamClient upstream.Interface
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "jobset-migration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if err := prepare(tmp); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	o := localcluster.Options{Prefix: "MIGRATION_", Dir: "_output/migration", PortBase: 29400, Nodes: 4}
	return localcluster.RunTests(m, o, func(c *localcluster.Cluster) (err error) {
		stack = c
		if dyn, err = dynamic.NewForConfig(c.Config); err != nil {
			return err
		}
		upstreamClient, err = upstream.NewForConfig(c.Config)
		return err
	})
}

// prepare builds jobset-migrate and finds upstream's CRD manifest in the
// module cache.
func prepare(tmp string) error {
	goBin := reporoot.GoCommand()
	migrateBin = filepath.Join(tmp, "jobset-migrate")
	build := exec.Command(goBin, "build", "-o", migrateBin, "./cmd/jobset-migrate")
	build.Dir = localcluster.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building jobset-migrate: %v\n%s", err, out)
	}
	list := exec.Command(goBin, "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/jobset")
	list.Dir = filepath.Join(localcluster.RepoRoot(), "test", "migration")
	out, err := list.Output()
	if err != nil {
		return fmt.Errorf("locating sigs.k8s.io/jobset: %v", err)
	}
	crdFile = filepath.Join(strings.TrimSpace(string(out)), "config", "components", "crd", "bases", "jobset.x-k8s.io_jobsets.yaml")
	if _, err := os.Stat(crdFile); err != nil {
		return fmt.Errorf("upstream's CRD: %w", err)
	}
	return nil
}

// eventually polls cond until it holds, failing the test on timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v)", what, err, last)
	}
}

func kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := stack.Kubectl(stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}
