// Package e2e drives a real local cluster — kube-apiserver, kube-controller-
// manager, kube-scheduler, etcd, kwok nodes, jobset-apiserver and
// jobset-controller, all on 127.0.0.1 — with kubectl and client-go. The
// cluster is brought up once by hack/local-up.sh and torn down at the end.
package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	clientset "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
	"github.com/nativejobset/jobset/test/localcluster"
)

// stack is the local cluster the whole suite runs against; cluster holds
// its clients and paths.
var stack *localcluster.Cluster

var cluster struct {
	root       string
	localDir   string
	kubeconfig string
	kubectl    string
	config     *rest.Config
	kube       kubernetes.Interface
	jobsets    clientset.Interface
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Its own directory and ports, so that a developer's `make run` can stay up.
	o := localcluster.Options{Prefix: "E2E_", Dir: "_output/e2e", PortBase: 28400, Nodes: 16}
	return localcluster.RunTests(m, o, func(c *localcluster.Cluster) error {
		stack = c
		cluster.root, cluster.localDir = c.Root, c.LocalDir
		cluster.kubeconfig, cluster.kubectl = c.Kubeconfig, c.KubectlBin
		cluster.config, cluster.kube, cluster.jobsets = c.Config, c.Kube, c.JobSets
		return nil
	})
}

// kubectl runs kubectl against the cluster and returns its output; it fails
// the test when kubectl fails.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectlErr(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// kubectlErr runs kubectl and returns its combined output and error.
func kubectlErr(args ...string) (string, error) {
	return kubectlIn("", args...)
}

// kubectlIn runs kubectl with the given standard input.
func kubectlIn(stdin string, args ...string) (string, error) {
	return stack.Kubectl(stdin, args...)
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
	name = strings.Trim(name, "-") + "-" + fmt.Sprint(time.Now().UnixNano()%100000)
	kubectl(t, "create", "namespace", name)
	t.Cleanup(func() {
		if !t.Failed() || os.Getenv("E2E_KEEP_CLUSTER") != "1" {
			_, _ = kubectlErr("delete", "namespace", name, "--wait=false")
		}
	})
	return name
}
