// Package localcluster brings up the local cluster of hack/local-up.sh for a
// test binary — real kube-apiserver, kube-controller-manager, kube-scheduler,
// etcd, kwok nodes, jobset-apiserver and jobset-controller on 127.0.0.1 —
// and gives clients for it.
package localcluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	clientset "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
	"github.com/nativejobset/jobset/test/reporoot"
)

// Options choose where the stack lives. Environment variables override
// them: <Prefix>LOCAL_DIR, <Prefix>PORT_BASE, <Prefix>NODES, and
// <Prefix>KEEP_CLUSTER=1 / <Prefix>REUSE_CLUSTER=1 to keep a stack after the
// run or to run against one that is already up.
type Options struct {
	// Prefix of the environment variables, e.g. "E2E_".
	Prefix string
	// Dir is the stack's directory, relative to the repository root.
	Dir      string
	PortBase int
	Nodes    int
	// APIServers and Controllers: how many jobset-apiserver replicas and
	// jobset-controller processes to run (0 means 1). With more than one API
	// server they share the cluster's etcd behind a loopback load balancer
	// (hack/local-up.sh's JOBSET_APISERVERS and JOBSET_CONTROLLERS).
	APIServers  int
	Controllers int
	// WithoutJobSet starts the cluster without jobset-apiserver and
	// jobset-controller (JOBSET=0), e.g. to install another JobSet
	// implementation on it.
	WithoutJobSet bool
	// Extra environment for hack/local-up.sh, e.g. "NODES_PER_POOL=2".
	Env []string
}

// Cluster is a running local cluster.
type Cluster struct {
	Root       string
	LocalDir   string
	Kubeconfig string
	KubectlBin string
	Config     *rest.Config
	Kube       kubernetes.Interface
	JobSets    clientset.Interface

	env  []string
	keep bool
	// keepFailed: <Prefix>KEEP_CLUSTER=1 also keeps what a failed test left.
	keepFailed bool
}

// RepoRoot is the root of this checkout.
func RepoRoot() string {
	return reporoot.MustDir()
}

// Start brings the stack up (unless reused) and connects to it. Call Stop
// when done, also after an error.
func Start(o Options) (*Cluster, error) {
	root := RepoRoot()
	c := &Cluster{Root: root}
	c.LocalDir = EnvOr(o.Prefix+"LOCAL_DIR", filepath.Join(root, o.Dir))
	c.Kubeconfig = filepath.Join(c.LocalDir, "kubeconfig")
	c.KubectlBin = filepath.Join(root, "_output", "bin", "kubectl")
	c.keep = os.Getenv(o.Prefix+"KEEP_CLUSTER") == "1"
	c.keepFailed = c.keep
	c.env = append(os.Environ(),
		"LOCAL_DIR="+c.LocalDir,
		"PORT_BASE="+EnvOr(o.Prefix+"PORT_BASE", fmt.Sprint(o.PortBase)),
		"NODES="+EnvOr(o.Prefix+"NODES", fmt.Sprint(o.Nodes)),
		"CLEAN=1",
	)
	if o.WithoutJobSet {
		c.env = append(c.env, "JOBSET=0")
	} else {
		c.env = append(c.env, "JOBSET=1")
	}
	if o.APIServers > 1 {
		c.env = append(c.env, fmt.Sprintf("JOBSET_APISERVERS=%d", o.APIServers))
	}
	if o.Controllers > 1 {
		c.env = append(c.env, fmt.Sprintf("JOBSET_CONTROLLERS=%d", o.Controllers))
	}
	c.env = append(c.env, o.Env...)

	if os.Getenv(o.Prefix+"REUSE_CLUSTER") != "1" {
		// The script's output goes through a file: the daemons it starts
		// inherit it, and must not hold the test binary's stdout pipe open.
		out, err := os.CreateTemp("", "local-up-*.log")
		if err != nil {
			return c, err
		}
		defer os.Remove(out.Name())
		defer out.Close()
		up := exec.Command(filepath.Join(root, "hack", "local-up.sh"), "--detach")
		up.Env, up.Stdout, up.Stderr = c.env, out, out
		runErr := up.Run()
		if _, err := out.Seek(0, 0); err == nil {
			_, _ = io.Copy(os.Stdout, out)
		}
		if runErr != nil {
			return c, fmt.Errorf("bringing up the local cluster failed: %w (logs in %s/logs)", runErr, c.LocalDir)
		}
	} else {
		c.keep = true
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return c, fmt.Errorf("loading %s: %w", c.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	c.Config = cfg
	if c.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return c, err
	}
	if c.JobSets, err = clientset.NewForConfig(cfg); err != nil {
		return c, err
	}
	return c, nil
}

// Stop tears the stack down, unless it is to be kept.
func (c *Cluster) Stop() {
	if c == nil || c.keep {
		return
	}
	cmd := exec.Command(filepath.Join(c.Root, "hack", "local-down.sh"))
	cmd.Env, cmd.Stdout, cmd.Stderr = c.env, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the local cluster: %v\n", err)
	}
}

// Kubectl runs kubectl against the cluster with the given standard input
// (none when empty) and returns its combined output.
func (c *Cluster) Kubectl(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.KubectlBin, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	return out.String(), err
}

// PID returns the process id of a component started by hack/local-up.sh.
func (c *Cluster) PID(component string) (int, error) {
	b, err := os.ReadFile(filepath.Join(c.LocalDir, "pids", component+".pid"))
	if err != nil {
		return 0, err
	}
	var pid int
	_, err = fmt.Sscan(strings.Fields(string(b))[0], &pid)
	return pid, err
}

// EnvOr is the environment variable key, or def when it is unset or empty.
func EnvOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// JobSetAPIServerConfig is the admin's configuration for jobset-apiserver's
// own port, bypassing kube-apiserver (for what kube-apiserver does not
// proxy, such as /debug/pprof, or to measure the aggregation hop).
func (c *Cluster) JobSetAPIServerConfig() (*rest.Config, error) {
	port, err := c.Setting("JOBSET_APISERVER_PORT")
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.Host = "https://127.0.0.1:" + port
	return cfg, nil
}

// Setting is one value of the env file the cluster wrote in its
// directory (its ports, for instance), or an error naming it when absent.
func (c *Cluster) Setting(name string) (string, error) {
	path := filepath.Join(c.LocalDir, "env")
	env, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(env), "\n") {
		if v, ok := strings.CutPrefix(line, name+"="); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("no %s in %s", name, path)
}

// EtcdClientTLS is the client side of TLS to the cluster's etcd, with the
// client certificate kube-apiserver uses.
func (c *Cluster) EtcdClientTLS() (*tls.Config, error) {
	pki := filepath.Join(c.LocalDir, "pki")
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "etcd-client.crt"), filepath.Join(pki, "etcd-client.key"))
	if err != nil {
		return nil, fmt.Errorf("the cluster's etcd client certificate: %w", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in %s", filepath.Join(pki, "ca.crt"))
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}
