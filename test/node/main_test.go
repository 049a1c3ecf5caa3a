// Package node proves JobSet on a real node: the local cluster of
// hack/local-up.sh with REAL_NODE=1 (containerd and runc, the CNI bridge, a
// kubelet, kube-proxy and CoreDNS) and no JobSet processes on the host.
// TestMain installs the product in-cluster from artifacts/deploy (the
// embedded-etcd overlay) with this checkout's images, as an operator would;
// every test then runs real containers against that install.
//
// Needs root, the node's tools (hack/build-tools.sh), and the images of
// 'make images' and 'hack/release node-images': 'make test-node' does all of it.
package node

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nativejobset/jobset/test/localcluster"
)

var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "the real-node suite needs root (it runs a kubelet and containerd)")
		return 1
	}
	o := localcluster.Options{Prefix: "NODE_", Dir: "_output/node", PortBase: 24400, Nodes: 1,
		// The JobSet API comes from the in-cluster install, not from host processes.
		Env: []string{"REAL_NODE=1", "JOBSET=0", "SKIP_BUILD=1"}}
	return localcluster.RunTests(m, o, func(c *localcluster.Cluster) error {
		cluster = c
		return c.InstallInCluster()
	})
}

// kubectl runs kubectl against the cluster and fails the test on an error.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := cluster.Kubectl("", args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// apply applies a manifest and fails the test on an error.
func apply(t *testing.T, ns, manifest string) {
	t.Helper()
	if out, err := cluster.Kubectl(manifest, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s\n%s", err, out, manifest)
	}
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	localcluster.Eventually(t, timeout, what, cond)
}

// onRealNode is the part of a pod spec that puts it on the real node: its
// label as node selector and a toleration of its taint.
const onRealNode = `
            nodeSelector:
              jobset.local/real-node: "true"
            tolerations:
            - key: jobset.local/real-node
              operator: Exists
              effect: NoSchedule`

// Images imported into the node's containerd (hack/release node-images).
const (
	busyboxImage      = "localhost/jobset-local/busybox:v1"
	busyboxAgentImage = "localhost/jobset-local/busybox-inplace-agent:v1"
)
