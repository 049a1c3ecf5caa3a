// Package cluster starts and stops the local development cluster: real
// control-plane processes on 127.0.0.1 with kwok playing the kubelets of
// fake nodes, jobset-apiserver and jobset-controller, and on request
// Kubeflow Trainer, KEDA and a real node (package node). Each program is a
// component (components.go) with its flags, its readiness check and its
// place in the stop order; Up starts them in order and undoes a failed
// start, Down stops them.
//
// Everything lives under LOCAL_DIR: pki/, kubeconfigs/, logs/<name>.log,
// pids/<name>.pid (package proc), data/, and env, which a shell can source
// to talk to the cluster.
package cluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nativejobset/jobset/hack/tools/localtool/probe"
	"github.com/nativejobset/jobset/hack/tools/localtool/proc"
)

// Cluster is a cluster being started or stopped.
type Cluster struct {
	*Config
	ctx   context.Context
	out   io.Writer
	procs proc.Dirs
	// Whether jobset-apiserver and jobset-controller run (JOBSET=auto
	// decides by what BIN_DIR has).
	withJobSet bool
}

func newCluster(ctx context.Context, cfg *Config, out io.Writer) *Cluster {
	c := &Cluster{Config: cfg, ctx: ctx, out: out}
	c.procs = proc.Dirs{Logs: c.path("logs"), Pids: c.path("pids"), Logf: c.logf}
	return c
}

func (c *Cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.out, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (c *Cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.LocalDir}, elem...)...)
}
func (c *Cluster) data(elem ...string) string { return c.path(append([]string{"data"}, elem...)...) }

// pki is a certificate's or key's path without extension.
func (c *Cluster) pki(name string) string { return c.path("pki", name) }
func (c *Cluster) kubeconfig(name string) string {
	return c.path("kubeconfigs", name+".kubeconfig")
}
func (c *Cluster) adminKubeconfig() string { return c.path("kubeconfig") }
func (c *Cluster) bin(name string) string  { return filepath.Join(c.BinDir, name) }
func (c *Cluster) port(name string) int {
	// An unknown name is a typo here: it gives port 0, which the tests
	// look for in every component's flags.
	return c.Port[name]
}
func (c *Cluster) local(portName string) string {
	return "127.0.0.1:" + strconv.Itoa(c.port(portName))
}
func (c *Cluster) apiURL() string { return "https://" + c.local("APISERVER_PORT") }

// start runs a program of the cluster.
func (c *Cluster) start(name string, argv []string, env ...string) error {
	return c.procs.Start(proc.Process{Name: name, Argv: argv, Env: env})
}

// waitFor waits for a program's readiness for at most WAIT_TIMEOUT.
func (c *Cluster) waitFor(name, what string, ready func() error) error {
	return c.procs.WaitFor(c.ctx, name, what, c.Wait, ready)
}

// probeTLS checks an https URL against the cluster's CA, with a client
// certificate (a pki name) or none.
func (c *Cluster) probeTLS(url, clientCert string) func() error {
	o := probe.Options{CACert: c.pki("ca") + ".crt"}
	if clientCert != "" {
		o.CertFile, o.KeyFile = c.pki(clientCert)+".crt", c.pki(clientCert)+".key"
	}
	return func() error { return probe.Get(url, o) }
}

// probeHTTP checks a plain-HTTP loopback URL (health ports).
func probeHTTP(url string) func() error {
	return func() error { return probe.Get(url, probe.Options{}) }
}

// kubectl runs the cluster's kubectl as the admin, with stdin as its input
// (none when nil), and returns its standard output; the error carries its
// standard error.
func (c *Cluster) kubectl(stdin []byte, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(c.ctx, 2*time.Minute)
	defer cancel()
	argv := append([]string{"--kubeconfig", c.adminKubeconfig(), "--cache-dir", c.path("cache", "kubectl")}, args...)
	cmd := exec.CommandContext(ctx, c.bin("kubectl"), argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// apply applies manifests (YAML or JSON) given as bytes.
func (c *Cluster) apply(manifest []byte, extra ...string) error {
	_, err := c.kubectl(manifest, append([]string{"apply", "-f", "-"}, extra...)...)
	return err
}

// applyFile applies a file of the checkout.
func (c *Cluster) applyFile(rel string, extra ...string) error {
	_, err := c.kubectl(nil, append([]string{"apply", "-f", filepath.Join(c.Root, rel)}, extra...)...)
	return err
}

// getJSON reads objects with kubectl into v.
func (c *Cluster) getJSON(v any, args ...string) error {
	out, err := c.kubectl(nil, append(append([]string{"get"}, args...), "-o", "json")...)
	if err != nil {
		return err
	}
	return json.Unmarshal(out, v)
}

// condition is the status of an object's condition, "" when it has none.
type conditions struct {
	Status struct {
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
	} `json:"status"`
}

func (o conditions) is(condType string) bool {
	for _, cond := range o.Status.Conditions {
		if cond.Type == condType {
			return cond.Status == "True"
		}
	}
	return false
}

// hasCondition is a readiness check: the object has the condition True.
func (c *Cluster) hasCondition(resource, name, condType string) func() error {
	return func() error {
		var o conditions
		if err := c.getJSON(&o, resource, name); err != nil {
			return err
		}
		if !o.is(condType) {
			return fmt.Errorf("%s %s is not %s yet", resource, name, condType)
		}
		return nil
	}
}

// render reads a manifest of artifacts/local with its @@NAME@@ words
// filled in.
func (c *Cluster) render(name string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(c.Root, "artifacts", "local", name))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(c.pki("ca") + ".crt")
	if err != nil {
		return nil, err
	}
	pairs := []string{"@@CA_BUNDLE@@", base64.StdEncoding.EncodeToString(caPEM)}
	for _, p := range []string{"JOBSET_APISERVER_PORT", "METRICS_SERVER_PORT", "TRAINER_WEBHOOK_PORT", "TRAINER_HEALTH_PORT", "TRAINER_METRICS_PORT", "KEDA_ADAPTER_PORT"} {
		pairs = append(pairs, "@@"+p+"@@", strconv.Itoa(c.port(p)))
	}
	out := strings.NewReplacer(pairs...).Replace(string(data))
	if i := strings.Index(out, "@@"); i >= 0 {
		end := min(len(out), i+40)
		return nil, fmt.Errorf("artifacts/local/%s: no value for %q", name, out[i:end])
	}
	return []byte(out), nil
}

// applyRendered renders a manifest of artifacts/local and applies it.
func (c *Cluster) applyRendered(name string) error {
	data, err := c.render(name)
	if err != nil {
		return err
	}
	return c.apply(data)
}

// portFree fails when something already listens on 127.0.0.1:port.
func portFree(port int, what string) error {
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 500*time.Millisecond)
	if err != nil {
		return nil
	}
	conn.Close()
	return fmt.Errorf("port %d (%s) on 127.0.0.1 is in use; pick other ports with PORT_BASE=<n> (and a separate LOCAL_DIR)", port, what)
}

// moduleDir is where the Go module cache holds a tool module's dependency
// (its manifests and CRDs), downloading it if need be.
func (c *Cluster) moduleDir(toolModule, dependency string) (string, error) {
	cmd := exec.CommandContext(c.ctx, "go", "mod", "download", "-json", dependency)
	cmd.Dir = filepath.Join(c.Root, "hack", "tools", toolModule)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s (in hack/tools/%s): %w", dependency, toolModule, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", err
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", dependency, m.Error)
	}
	return m.Dir, nil
}

func copyFile(from, to string, mode os.FileMode) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, data, mode)
}

func (c *Cluster) itoa(portName string) string { return strconv.Itoa(c.port(portName)) }
