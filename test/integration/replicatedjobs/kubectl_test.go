package replicatedjobs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nativejobset/jobset/test/integration/framework"
	"github.com/nativejobset/jobset/test/localcluster"
)

// kubectlBinary finds the kubectl to drive the server with: $KUBECTL, else
// the pinned build in _output/bin (make test builds it first), else the one
// on PATH. Without one the test skips, except in CI, where it must run.
func kubectlBinary(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("KUBECTL"), filepath.Join(localcluster.RepoRoot(), "_output", "bin", "kubectl")}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if _, err := os.Stat(c); err == nil {
			return c
		}
	}
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no kubectl: set KUBECTL or run hack/build-tools.sh kubectl (make test-integration does)")
	}
	t.Skip("no kubectl: set KUBECTL or run hack/build-tools.sh kubectl")
	return ""
}

// kubectl runs kubectl against the server and returns its combined output.
func kubectl(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(kubectlBinary(t), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECACHEDIR="+filepath.Join(filepath.Dir(kubeconfig), "cache"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func writeKubeconfig(t *testing.T, s *framework.Server) string {
	t.Helper()
	cfg := s.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		InsecureSkipTLSVerify:    cfg.Insecure,
		TLSServerName:            cfg.ServerName,
	}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatalf("writing kubeconfig: %v", err)
	}
	return path
}

// TestKubectl drives replicatedjobs with kubectl: get by short name, scale
// by kind/name, and explain through the OpenAPI kind.
func TestKubectl(t *testing.T) {
	kubectlBinary(t)
	s := framework.StartServer(t)
	kc := writeKubeconfig(t, s)
	ns := "rj-kubectl"
	create(t, s, newJobSet(ns, "kc"))

	out, err := kubectl(t, kc, "get", "rj", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl get rj: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAME JOBSET REPLICAS PARALLELISM READY SUCCEEDED FAILED AGE" {
		t.Errorf("kubectl get rj:\n%s", out)
	}
	if f := strings.Fields(lines[2]); len(f) < 4 || f[0] != "kc.workers" || f[1] != "kc" || f[2] != "2" || f[3] != "2" {
		t.Errorf("workers row %q", lines[2])
	}

	out, err = kubectl(t, kc, "scale", "-n", ns, "replicatedjob/kc.workers", "--replicas=6")
	if err != nil {
		t.Fatalf("kubectl scale: %v\n%s", err, out)
	}
	js := getJobSet(t, s, ns, "kc")
	if p, c := deref(rjSpec(js, "workers").Parallelism), deref(rjSpec(js, "workers").Completions); p != 6 || c != 6 {
		t.Errorf("after kubectl scale: parallelism %d completions %d, want 6", p, c)
	}
	out, err = kubectl(t, kc, "get", "rj", "-n", ns, "kc.workers", "-o", "jsonpath={.spec.parallelism}")
	if err != nil || out != "6" {
		t.Errorf("kubectl get rj kc.workers parallelism: %q %v", out, err)
	}

	out, err = kubectl(t, kc, "scale", "-n", ns, "replicatedjob/kc.workers", "--replicas=0")
	if err == nil || !strings.Contains(out, "suspend") {
		t.Errorf("kubectl scale to 0: %v\n%s", err, out)
	}

	out, err = kubectl(t, kc, "explain", "replicatedjobs.spec.parallelism")
	if err != nil || !strings.Contains(out, "ReplicatedJob") || !strings.Contains(out, "parallelism") {
		t.Errorf("kubectl explain: %v\n%s", err, out)
	}
}
