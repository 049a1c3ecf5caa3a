package anchor

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/nativejobset/jobset/test/localcluster"
	"github.com/nativejobset/jobset/test/reporoot"
)

// Upstream JobSet v0.12.0 on a cluster started without our components:
// its CRD and webhook configurations from its module's config/, its
// controller manager (make upstream-jobset) as a host process. kube-apiserver
// reaches the webhooks through an ExternalName Service "localhost" and
// trusts them through the cluster's CA.

const (
	upstreamNamespace = "jobset-system"
	// The Service name of upstream's webhook kustomize base.
	upstreamWebhookService = "webhook-service"
	// Offsets from the cluster's PORT_BASE, above those of localtool up.
	upstreamWebhookOffset, upstreamHealthOffset = 90, 91
)

func upstreamBinary() string {
	return filepath.Join(localcluster.RepoRoot(), "_output", "bin", "jobset-upstream-manager")
}

// upstreamBuilt says how to build upstream's manager when it is missing.
func upstreamBuilt() error {
	if _, err := os.Stat(upstreamBinary()); err != nil {
		return fmt.Errorf("%s is missing: run make upstream-jobset (or leave upstream out with BENCH_LARGE_ONLY / BENCH_SETTLED_ONLY)", upstreamBinary())
	}
	return nil
}

// requireUpstream stops the benchmark before any cluster comes up when
// upstream's side is to run and its manager has not been built: found
// missing only at that side's turn, it would cost the sides before it.
func requireUpstream(b *testing.B) {
	b.Helper()
	if err := upstreamBuilt(); err != nil {
		b.Fatal(err)
	}
}

// upstreamModuleDir is where the Go module cache holds the sigs.k8s.io/jobset
// that test/bench/upstream pins.
func upstreamModuleDir() (string, error) {
	list := exec.Command(reporoot.GoCommand(), "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/jobset")
	list.Dir = filepath.Join(localcluster.RepoRoot(), "test", "bench", "upstream")
	list.Env = append(os.Environ(), "GOWORK=off")
	out, err := list.Output()
	if err != nil {
		return "", fmt.Errorf("locating sigs.k8s.io/jobset from test/bench/upstream: %v", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// upstream is a running upstream controller manager.
type upstream struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startUpstream installs upstream JobSet on c and starts its manager; it
// returns once JobSets are admitted through its webhooks.
func startUpstream(c *localcluster.Cluster, portBase int) (*upstream, error) {
	if err := upstreamBuilt(); err != nil {
		return nil, err
	}
	mod, err := upstreamModuleDir()
	if err != nil {
		return nil, err
	}
	webhookPort, healthPort := portBase+upstreamWebhookOffset, portBase+upstreamHealthOffset

	crd := filepath.Join(mod, "config", "components", "crd", "bases", "jobset.x-k8s.io_jobsets.yaml")
	if out, err := c.Kubectl("", "apply", "--server-side", "-f", crd); err != nil {
		return nil, fmt.Errorf("applying upstream's CRD: %v\n%s", err, out)
	}
	// Polled: kubectl wait fails at once while the CRD has no conditions yet.
	established := func(ctx context.Context) (bool, error) {
		out, err := c.Kubectl("", "get", "crd", "jobsets.jobset.x-k8s.io", "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		return err == nil && strings.TrimSpace(out) == "True", nil
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, time.Minute, true, established); err != nil {
		return nil, fmt.Errorf("upstream's CRD not Established: %v", err)
	}
	svc := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: Service
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  type: ExternalName
  externalName: localhost
  ports: [{name: webhook, port: %[3]d, protocol: TCP}]
`, upstreamNamespace, upstreamWebhookService, webhookPort)
	if out, err := c.Kubectl(svc, "apply", "-f", "-"); err != nil {
		return nil, fmt.Errorf("the webhook Service: %v\n%s", err, out)
	}
	hooks, err := upstreamWebhooks(c, filepath.Join(mod, "config", "components", "webhook"), webhookPort)
	if err != nil {
		return nil, err
	}
	if out, err := c.Kubectl(string(hooks), "apply", "-f", "-"); err != nil {
		return nil, fmt.Errorf("upstream's webhook configurations: %v\n%s", err, out)
	}

	// The serving certificate, for the name kube-apiserver asks for, from
	// the cluster's CA; the manager reads tls.crt and tls.key from certDir.
	dir := filepath.Join(c.LocalDir, "upstream")
	certDir := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		return nil, err
	}
	host := upstreamWebhookService + "." + upstreamNamespace + ".svc"
	gen := exec.Command(filepath.Join(localcluster.RepoRoot(), "_output", "bin", "localtool"), "cert",
		"-ca", filepath.Join(c.LocalDir, "pki", "ca"), "-out", filepath.Join(certDir, "tls"),
		"-cn", host, "-san", host+",localhost,127.0.0.1", "-server")
	if out, err := gen.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("the webhook serving certificate: %v\n%s", err, out)
	}
	// Its own cert management off (the certificate is given), no leader
	// election (one replica), metrics off (not read here).
	config := fmt.Sprintf(`apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
webhook: {host: 127.0.0.1, port: %d, certDir: %s}
health: {healthProbeBindAddress: "127.0.0.1:%d"}
metrics: {bindAddress: "0"}
`, webhookPort, certDir, healthPort)
	configPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		return nil, err
	}

	logPath := filepath.Join(c.LocalDir, "logs", "jobset-upstream-manager.log")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	// The cluster admin's kubeconfig: RBAC is not what is measured.
	cmd := exec.Command(upstreamBinary(), "--config="+configPath)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	u := &upstream{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(u.done) }()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort)
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-u.done:
			return false, fmt.Errorf("jobset-upstream-manager exited; see %s", logPath)
		default:
		}
		resp, err := http.Get(readyz)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err == nil {
		// A JobSet created in dry run goes through both webhooks: this
		// proves kube-apiserver reaches them.
		err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := c.Kubectl(probeJobSet, "create", "--dry-run=server", "-f", "-")
			return err == nil, nil
		})
	}
	if err != nil {
		u.stop()
		return nil, fmt.Errorf("upstream's manager not serving: %v (log in %s)", err, logPath)
	}
	return u, nil
}

const probeJobSet = `apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: probe, namespace: default}
spec:
  replicatedJobs:
  - name: w
    template:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers: [{name: main, image: registry.k8s.io/pause:3.10}]
`

// stop ends the manager (SIGTERM, then SIGKILL after 30 s).
func (u *upstream) stop() {
	if u == nil {
		return
	}
	_ = u.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-u.done:
	case <-time.After(30 * time.Second):
		_ = u.cmd.Process.Kill()
		<-u.done
	}
}

// upstreamWebhooks renders upstream's webhook kustomize base and keeps
// its two webhook configurations, pointed at the local Service's port and
// trusting the cluster's CA.
func upstreamWebhooks(c *localcluster.Cluster, base string, port int) ([]byte, error) {
	rendered, err := c.Kubectl("", "kustomize", base)
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize %s: %v\n%s", base, err, rendered)
	}
	ca, err := os.ReadFile(filepath.Join(c.LocalDir, "pki", "ca.crt"))
	if err != nil {
		return nil, err
	}
	var keep []any
	hooks := 0
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(rendered), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading %s: %w", base, err)
		}
		kind := obj["kind"]
		if kind != "MutatingWebhookConfiguration" && kind != "ValidatingWebhookConfiguration" {
			continue // the in-cluster Service: ours is the ExternalName one
		}
		list, _ := obj["webhooks"].([]any)
		for _, h := range list {
			hook, _ := h.(map[string]any)
			cc, _ := hook["clientConfig"].(map[string]any)
			svc, _ := cc["service"].(map[string]any)
			if svc == nil {
				return nil, fmt.Errorf("webhook %v of %s names no Service", hook["name"], base)
			}
			svc["namespace"], svc["name"], svc["port"] = upstreamNamespace, upstreamWebhookService, port
			cc["caBundle"] = base64.StdEncoding.EncodeToString(ca)
			hooks++
		}
		keep = append(keep, obj)
	}
	if hooks == 0 {
		return nil, fmt.Errorf("no webhooks in %s", base)
	}
	return json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": keep})
}
