// Command jobset-inplace-agent runs in every pod of a JobSet with
// restartStrategy InPlaceRestart (see pkg/inplaceagent). It is configured
// like upstream's agent, through the environment, and flags override it:
//
//	JOBSET_NAME                 --jobset       the pod's JobSet (required)
//	POD_NAME                    --pod          the pod (required)
//	POD_NAMESPACE or NAMESPACE  --namespace    else the service account's namespace file
//	IN_PLACE_RESTART_EXIT_CODE  --restart-exit-code  default 1
//	WORKER_COMMAND              --worker-command     wrapper mode when set
//	STARTUP_PROBE_PATH/_PORT    --probe-path/--probe-port  sidecar mode, default /barrier-is-down :8081
//
// --kubeconfig points it at a cluster from outside a pod. With
// --restart-via-annotation the process does not exit to restart: it writes
// the exit code on the pod annotation inplace-restart.stage.kwok.x-k8s.io/exit-code,
// waits until something (the local cluster's kwok stage) has restarted the
// pod's container and removed the annotation, and starts over, as a
// restarted container would. That is how the local kwok cluster, which runs
// no containers, exercises in-place restarts; it also needs get and watch on
// pods.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	versioned "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
	"github.com/nativejobset/jobset/pkg/httpserver"
	"github.com/nativejobset/jobset/pkg/inplaceagent"
	"github.com/nativejobset/jobset/pkg/version"
)

const namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

type options struct {
	kubeconfig           string
	namespace            string
	pod                  string
	jobSet               string
	restartExitCode      int
	workerCommand        string
	probePath            string
	probePort            string
	restartViaAnnotation bool
	version              bool
}

func envOr(names []string, def string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return def
}

func parseOptions(args []string) (*options, error) {
	fs := flag.NewFlagSet("jobset-inplace-agent", flag.ContinueOnError)
	o := &options{}
	code, err := strconv.Atoi(envOr([]string{"IN_PLACE_RESTART_EXIT_CODE"}, "1"))
	if err != nil {
		return nil, fmt.Errorf("IN_PLACE_RESTART_EXIT_CODE: %v", err)
	}
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; empty: in-cluster configuration")
	fs.StringVar(&o.namespace, "namespace", envOr([]string{"POD_NAMESPACE", "NAMESPACE"}, ""), "namespace of the pod and its JobSet")
	fs.StringVar(&o.pod, "pod", os.Getenv("POD_NAME"), "name of the pod")
	fs.StringVar(&o.jobSet, "jobset", os.Getenv("JOBSET_NAME"), "name of the pod's JobSet")
	fs.IntVar(&o.restartExitCode, "restart-exit-code", code, "exit code that restarts the pod in place")
	fs.StringVar(&o.workerCommand, "worker-command", os.Getenv("WORKER_COMMAND"), "command run with $SHELL -c (else bash, else /bin/sh) once the barrier lifts (wrapper mode)")
	fs.StringVar(&o.probePath, "probe-path", os.Getenv("STARTUP_PROBE_PATH"), "sidecar mode: path that answers 200 once the barrier lifts (default /barrier-is-down)")
	fs.StringVar(&o.probePort, "probe-port", os.Getenv("STARTUP_PROBE_PORT"), "sidecar mode: port of the probe server (default 8081); 0 turns it off")
	fs.BoolVar(&o.restartViaAnnotation, "restart-via-annotation", false, "signal restarts on the pod and start over instead of exiting (local kwok cluster)")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.version {
		// Before the checks below: --version needs no pod environment.
		return o, nil
	}
	if o.workerCommand != "" && (o.probePath != "" || o.probePort != "") {
		return nil, fmt.Errorf("a worker command (wrapper mode) excludes the startup probe settings (sidecar mode)")
	}
	if o.workerCommand == "" {
		if o.probePath == "" {
			o.probePath = "/barrier-is-down"
		}
		if o.probePort == "" {
			o.probePort = "8081"
		}
	}
	if o.namespace == "" {
		if b, err := os.ReadFile(namespaceFile); err == nil {
			o.namespace = strings.TrimSpace(string(b))
		}
	}
	var missing []string
	for name, v := range map[string]string{"namespace (POD_NAMESPACE)": o.namespace, "pod (POD_NAME)": o.pod, "jobset (JOBSET_NAME)": o.jobSet} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing: %s", strings.Join(missing, ", "))
	}
	return o, nil
}

func main() {
	o, err := parseOptions(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobset-inplace-agent:", err)
		os.Exit(2)
	}
	if o.version {
		fmt.Println(version.String("jobset-inplace-agent"))
		os.Exit(0)
	}
	os.Exit(run(o))
}

func run(o *options) int {
	var cfg *rest.Config
	var err error
	if o.kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobset-inplace-agent:", err)
		return 2
	}
	cfg = inplaceagent.RESTConfig(cfg)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobset-inplace-agent:", err)
		return 2
	}
	js, err := versioned.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobset-inplace-agent:", err)
		return 2
	}

	// A signal ends the agent with 128+signal, so that it never looks like
	// a success or an in-place restart request.
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	var got os.Signal
	go func() { got = <-sigs; cancel() }()

	conf := inplaceagent.Config{
		Namespace: o.namespace, PodName: o.pod, JobSet: o.jobSet,
		RestartExitCode: o.restartExitCode, WorkerCommand: o.workerCommand,
	}
	if o.workerCommand != "" {
		// Before reporting anything: an agent that cannot run its worker
		// must not take part in the barrier.
		if conf.Shell, err = inplaceagent.WorkerShell(os.Getenv, exec.LookPath); err != nil {
			fmt.Fprintln(os.Stderr, "jobset-inplace-agent:", err)
			return 2
		}
	}
	if o.workerCommand == "" && o.probePort != "0" {
		ln, err := net.Listen("tcp", ":"+o.probePort)
		if err != nil {
			fmt.Fprintln(os.Stderr, "jobset-inplace-agent:", err)
			return 2
		}
		defer ln.Close()
		conf.LiftBarrier = func() { httpserver.Serve(ctx, "startup probe", probeServer(o.probePath), ln) }
	}
	for {
		code := inplaceagent.New(conf, kube, js).Run(ctx)
		if got != nil {
			if s, ok := got.(syscall.Signal); ok {
				return 128 + int(s)
			}
			return 1
		}
		if !o.restartViaAnnotation || code == 0 {
			return code
		}
		if err := inplaceagent.SignalExit(ctx, kube, o.namespace, o.pod, code); err != nil {
			fmt.Fprintln(os.Stderr, "jobset-inplace-agent:", err)
			return code
		}
	}
}

// probeServer answers the startup probe; it is served once the barrier
// is lifted.
func probeServer(path string) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return httpserver.New(mux)
}
