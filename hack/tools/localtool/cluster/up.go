package cluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nativejobset/jobset/hack/tools/localtool/node"
)

// UpMain runs "localtool up [--detach] [--demo]" with the settings of the
// environment (Help lists them), from the checkout that holds BIN_DIR's
// localtool (or the working directory's, see repoRoot).
func UpMain(args []string) error {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), Help()) }
	detach := fs.Bool("detach", false, "return once everything is ready (also DETACH=1)")
	fs.BoolVar(detach, "d", false, "short for --detach")
	demo := fs.Bool("demo", false, "apply artifacts/examples/simple.yaml (also DEMO=1)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	cfg, err := FromEnv(root, os.Getenv)
	if err != nil {
		return err
	}
	cfg.Detach = cfg.Detach || *detach
	cfg.Demo = cfg.Demo || *demo

	// A signal during start-up cancels it (and what started is stopped);
	// after it, in the foreground, a signal stops the cluster.
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		if s, ok := <-signals; ok {
			cancel(fmt.Errorf("interrupted by %v", s))
		}
	}()
	c := newCluster(ctx, cfg, os.Stdout)
	if err := c.Up(); err != nil {
		return err
	}
	if c.Demo {
		c.demo()
	}
	if c.Detach {
		return nil
	}
	return c.foreground()
}

// repoRoot is the checkout: LOCAL_ROOT when set, else the nearest
// directory above the working directory with hack/versions.env.
func repoRoot() (string, error) {
	if r := os.Getenv("LOCAL_ROOT"); r != "" {
		return filepath.Abs(r)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "versions.env")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the checkout (no hack/versions.env above the working directory); set LOCAL_ROOT")
		}
		dir = parent
	}
}

// Up starts every component in order and returns once all are ready. A
// failed or interrupted start stops what it started, unless
// KEEP_ON_FAILURE=1.
func (c *Cluster) Up() (err error) {
	if err := c.preflight(); err != nil {
		return err
	}
	for _, d := range []string{"pki", "logs", "pids", "kubeconfigs", "data"} {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			return err
		}
	}
	if c.Clean {
		c.logf("CLEAN=1: removing %s", c.data())
		if err := os.RemoveAll(c.data()); err != nil {
			return err
		}
		if err := os.MkdirAll(c.data(), 0o755); err != nil {
			return err
		}
	}
	defer func() {
		if err == nil {
			return
		}
		if c.KeepOnFailure {
			c.logf("start-up failed; KEEP_ON_FAILURE=1 leaves the processes running (hack/local-down.sh stops them)")
			return
		}
		c.logf("start-up failed or interrupted; stopping what was started (KEEP_ON_FAILURE=1 keeps it)")
		// The stop must finish even though the start's context has ended.
		stopper := newCluster(context.Background(), c.Config, c.out)
		if derr := stopper.stopAll(); derr != nil {
			c.logf("stopping failed too: %v", derr)
		}
	}()
	if err := c.credentials(); err != nil {
		return err
	}
	for _, comp := range c.components() {
		if err := comp.up(); err != nil {
			return err
		}
		if err := context.Cause(c.ctx); err != nil {
			return err
		}
	}
	if c.withJobSet {
		// The controller has had the time the rest took; it must still run.
		if _, ok := c.procs.Running("jobset-controller"); !ok {
			return fmt.Errorf("jobset-controller exited; read %s", c.procs.LogPath("jobset-controller"))
		}
	}
	if err := c.writeEnv(); err != nil {
		return err
	}
	c.banner()
	return nil
}

// realNodeUp starts the real node (package node) beside the control plane.
func (c *Cluster) realNodeUp() error {
	return node.Main([]string{"up",
		"-local-dir", c.LocalDir, "-bin-dir", c.BinDir,
		"-port-base", strconv.Itoa(c.PortBase), "-apiserver-port", c.itoa("APISERVER_PORT"),
		"-bridge-address", c.BridgeAddress.String(), "-service-cidr", c.ServiceCIDR,
		"-wait", c.Wait.String(), "-images", strings.Join(c.nodeImages(), ","),
	})
}

// envFile is LOCAL_DIR/env: how this cluster was started, for shells
// (source it) and tests.
func (c *Cluster) envFile() string {
	var b strings.Builder
	b.WriteString("# Written by localtool up (hack/local-up.sh); source it to talk to this cluster.\n")
	fmt.Fprintf(&b, "export KUBECONFIG=%s\nexport PATH=%s:${PATH}\n", c.adminKubeconfig(), c.BinDir)
	bit := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	vars := [][2]string{{"LOCAL_DIR", c.LocalDir}, {"API_URL", c.apiURL()}}
	for _, p := range []string{"ETCD_PORT", "APISERVER_PORT", "KCM_PORT", "SCHEDULER_PORT", "KWOK_PORT", "METRICS_SERVER_PORT",
		"JOBSET_APISERVER_PORT", "JOBSET_CONTROLLER_HEALTH_PORT", "JOBSET_CONTROLLER_METRICS_PORT", "JOBSET_CONTROLLER_SECURE_METRICS_PORT"} {
		vars = append(vars, [2]string{p, c.itoa(p)})
	}
	vars = append(vars, [2]string{"WITH_JOBSET", bit(c.withJobSet)}, [2]string{"WITH_TRAINER", bit(c.WithTrainer)})
	for _, p := range []string{"TRAINER_WEBHOOK_PORT", "TRAINER_HEALTH_PORT", "TRAINER_METRICS_PORT"} {
		vars = append(vars, [2]string{p, c.itoa(p)})
	}
	vars = append(vars, [2]string{"JOBSET_APISERVERS", strconv.Itoa(c.JobSetAPIServers)},
		[2]string{"JOBSET_CONTROLLERS", strconv.Itoa(c.JobSetControllers)}, [2]string{"WITH_KEDA", bit(c.WithKeda)})
	for _, p := range []string{"KEDA_OPERATOR_GRPC_PORT", "KEDA_OPERATOR_METRICS_PORT", "KEDA_OPERATOR_HEALTH_PORT", "KEDA_ADAPTER_PORT", "KEDA_ADAPTER_METRICS_PORT"} {
		vars = append(vars, [2]string{p, c.itoa(p)})
	}
	vars = append(vars, [2]string{"REAL_NODE", bit(c.RealNode)}, [2]string{"NODE_BRIDGE_ADDRESS", c.BridgeAddress.String()})
	for _, v := range vars {
		fmt.Fprintf(&b, "%s=%s\n", v[0], v[1])
	}
	return b.String()
}

func (c *Cluster) writeEnv() error {
	return os.WriteFile(c.path("env"), []byte(c.envFile()), 0o644)
}

// banner tells the user how to reach the cluster and what to try.
func (c *Cluster) banner() {
	w := c.out
	fmt.Fprintf(w, "\nLocal cluster is up (%d kwok nodes, API %s).\n\n", c.Nodes, c.apiURL())
	fmt.Fprintf(w, "  export KUBECONFIG=%s\n  export PATH=%s:$PATH        # kubectl %s\n  (or: source %s)\n\n",
		c.adminKubeconfig(), c.BinDir, c.Versions["KUBERNETES_VERSION"], c.path("env"))
	fmt.Fprintln(w, "Try:")
	fmt.Fprintln(w, "  kubectl get nodes -L topology.kubernetes.io/zone,topology.jobset.x-k8s.io/rack,cloud.google.com/gke-nodepool")
	fmt.Fprintln(w, "  kubectl create deployment demo --image=nginx --replicas=3      # pods go Running on kwok nodes")
	fmt.Fprintln(w, "  kubectl top nodes")
	if c.withJobSet {
		fmt.Fprintln(w, "  kubectl api-resources --api-group=jobset.x-k8s.io")
		fmt.Fprintln(w, "  kubectl get jobsets -A")
	}
	if c.WithTrainer {
		fmt.Fprintf(w, "  kubectl get clustertrainingruntimes,trainjobs -A     # Kubeflow Trainer %s\n", c.Versions["TRAINER_VERSION"])
	}
	if c.WithKeda {
		fmt.Fprintln(w, "  kubectl get scaledobjects -A          # KEDA; see artifacts/examples/autoscaling")
	}
	if c.RealNode {
		fmt.Fprintf(w, "  kubectl get node %s -o wide     # the real node (taint %s=%s:NoSchedule)\n", "jobset-node-0", node.RoleKey, node.RoleValue)
	}
	fmt.Fprint(w, `
Pods on kwok nodes run until told otherwise (see hack/local/kwok/stages.yaml):
  annotation pod-complete.stage.kwok.x-k8s.io/delay: "10s"   -> Succeeded after 10s
  label      pod-fail.stage.kwok.x-k8s.io: "true"            -> Failed after 1s,
  annotation pod-fail.stage.kwok.x-k8s.io/exit-code: "42"       with exit code 42
  annotation kwok.x-k8s.io/usage-cpu: "250m"                 -> CPU usage per container
  annotation pod-terminate.stage.kwok.x-k8s.io/ignores-sigterm -> a deleted pod ends late (1s up to its grace period)

`)
	stop := "hack/local-down.sh"
	if c.LocalDir != filepath.Join(c.Root, "_output", "local") {
		stop += " (with LOCAL_DIR=" + c.LocalDir + ")"
	}
	fmt.Fprintf(w, "Logs: %s/<component>.log     Stop: %s\n", c.path("logs"), stop)
}

// demo applies artifacts/examples/simple.yaml afresh and waits for it to
// complete; a failure leaves the cluster up.
func (c *Cluster) demo() {
	example := filepath.Join(c.Root, "artifacts", "examples", "simple.yaml")
	if !c.withJobSet {
		c.logf("DEMO: jobset-apiserver is not running; not applying %s", example)
		return
	}
	// The cluster keeps its state across runs, and a finished JobSet cannot
	// be changed: start afresh, once the garbage collector removed the old
	// Jobs too.
	selector := "jobset.sigs.k8s.io/jobset-name=simple"
	c.logf("DEMO: kubectl delete --ignore-not-found --cascade=foreground -f %s; kubectl apply -f %s", example, example)
	_, _ = c.kubectl(nil, "delete", "--ignore-not-found", "--cascade=foreground", "--wait=true", "--timeout=60s", "-f", example)
	_, _ = c.kubectl(nil, "wait", "--for=delete", "jobs", "-l", selector, "--timeout=60s")
	out, err := c.kubectl(nil, "apply", "-f", example)
	fmt.Fprint(c.out, string(out))
	if err != nil {
		c.logf("DEMO: applying %s failed; the cluster stays up (see %s): %v", example, c.path("logs"), err)
		return
	}
	// A bounded chance for the controller to create the Jobs before
	// showing them.
	_ = c.procs.WaitFor(c.ctx, "jobset-controller", "the demo's Jobs", 30*time.Second, func() error {
		out, err := c.kubectl(nil, "get", "jobs", "-l", selector, "-o", "name")
		if err == nil && len(strings.TrimSpace(string(out))) == 0 {
			return errors.New("no Jobs yet")
		}
		return err
	})
	c.show("get", "jobsets,jobs,pods", "-o", "wide")
	c.logf("DEMO: waiting for JobSet simple to complete (its pods finish after 10 to 20 s)")
	if _, err := c.kubectl(nil, "wait", "--for=condition=Completed", "jobset/simple", "--timeout=120s"); err != nil {
		c.logf("DEMO: %v", err)
		return
	}
	c.show("get", "jobset", "simple", "-o", "wide")
}

// show prints a kubectl command's output.
func (c *Cluster) show(args ...string) {
	out, err := c.kubectl(nil, args...)
	fmt.Fprint(c.out, string(out))
	if err != nil {
		c.logf("%v", err)
	}
}

// foreground watches the programs until a signal, reporting each that
// exits, then stops the cluster.
func (c *Cluster) foreground() error {
	fmt.Fprintln(c.out, "\nRunning in the foreground; press Ctrl-C to stop everything.")
	reported := map[string]bool{}
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-c.ctx.Done():
			fmt.Fprintln(c.out)
			c.logf("stopping the local cluster")
			return newCluster(context.Background(), c.Config, c.out).stopAll()
		case <-tick.C:
			for _, name := range c.procs.Recorded() {
				if _, ok := c.procs.Running(name); !ok && !reported[name] {
					reported[name] = true
					c.logf("WARNING: %s exited; read %s", name, c.procs.LogPath(name))
				}
			}
		}
	}
}
