// Package e2e drives a real local cluster — kube-apiserver, kube-controller-
// manager, kube-scheduler, etcd, kwok nodes, jobset-apiserver and
// jobset-controller, all on 127.0.0.1 — with kubectl and client-go. The
// cluster is brought up once by hack/local-up.sh and torn down at the end.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	clientset "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
)

// cluster is the stack the whole suite runs against.
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
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	cluster.root = root
	cluster.localDir = envOr("E2E_LOCAL_DIR", filepath.Join(root, "_output", "e2e"))
	cluster.kubeconfig = filepath.Join(cluster.localDir, "kubeconfig")
	cluster.kubectl = filepath.Join(root, "_output", "bin", "kubectl")

	env := append(os.Environ(),
		"LOCAL_DIR="+cluster.localDir,
		// Its own ports, so that a developer's `make run` can stay up.
		"PORT_BASE="+envOr("E2E_PORT_BASE", "28400"),
		"NODES="+envOr("E2E_NODES", "8"),
		"JOBSET=1",
		"CLEAN=1",
	)
	keep := os.Getenv("E2E_KEEP_CLUSTER") == "1"
	if os.Getenv("E2E_REUSE_CLUSTER") != "1" {
		up := exec.Command(filepath.Join(root, "hack", "local-up.sh"), "--detach")
		up.Env, up.Stdout, up.Stderr = env, os.Stdout, os.Stderr
		if err := up.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "bringing up the local cluster failed: %v (logs in %s/logs)\n", err, cluster.localDir)
			down(env)
			return 1
		}
		if !keep {
			defer down(env)
		}
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", cluster.kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loading %s: %v\n", cluster.kubeconfig, err)
		return 1
	}
	cfg.QPS, cfg.Burst = 100, 200
	cluster.config = cfg
	cluster.kube = kubernetes.NewForConfigOrDie(cfg)
	cluster.jobsets = clientset.NewForConfigOrDie(cfg)
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "component logs are in %s/logs\n", cluster.localDir)
	}
	return code
}

func down(env []string) {
	cmd := exec.Command(filepath.Join(cluster.root, "hack", "local-down.sh"))
	cmd.Env, cmd.Stdout, cmd.Stderr = env, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the local cluster: %v\n", err)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cluster.kubectl, append([]string{"--kubeconfig", cluster.kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	return out.String(), err
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, cond)
	if err != nil {
		t.Fatalf("waiting %s for %s: %v", timeout, what, err)
	}
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
