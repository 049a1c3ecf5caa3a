// Command jobset-migrate moves every JobSet of an upstream JobSet
// installation (a CustomResourceDefinition with webhooks) to the native
// JobSet API, without stopping the JobSets' Jobs. See package migrate for
// the steps; docs/migration.md walks through a run.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	versioned "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
	"github.com/nativejobset/jobset/pkg/migrate"
	"github.com/nativejobset/jobset/pkg/version"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "jobset-migrate:", err)
		os.Exit(1)
	}
}

// settings are what the command line says.
type settings struct {
	o            migrate.Options
	kubeconfig   string
	qps          float32
	burst        int
	showVersion  bool
	caBundleFile string
}

// parse reads the command line; it touches no cluster.
func parse(args []string) (*settings, error) {
	s := &settings{o: migrate.Options{RegisterAPIService: true}}
	o := &s.o
	o.Defaults()
	var extra []string
	fs := pflag.NewFlagSet("jobset-migrate", pflag.ContinueOnError)
	fs.StringVar(&s.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "Path to a kubeconfig (default $KUBECONFIG, else in-cluster).")
	fs.Float32Var(&s.qps, "qps", 50, "Requests per second to kube-apiserver (client-side limit); higher keeps the windows without a JobSet API short on a large cluster.")
	fs.IntVar(&s.burst, "burst", 100, "Burst of requests to kube-apiserver above --qps.")
	fs.StringVar(&o.BackupDir, "backup-dir", "", "Directory for one JSON backup per JobSet, written before any change and read again once the CRD is gone (required; keep it until the migration finished).")
	fs.BoolVar(&o.DryRun, "dry-run", false, "Print the plan and change nothing.")
	fs.StringVar(&o.StopAfter, "stop-after", "", "Stop successfully after this step, to migrate in stages: "+strings.Join(migrate.Steps, ", ")+".")
	fs.StringVar(&o.CRDName, "crd-name", o.CRDName, "Upstream's CustomResourceDefinition.")
	fs.StringSliceVar(&o.WebhookConfigurations, "webhook-configurations", o.WebhookConfigurations, "Upstream's mutating and validating webhook configurations to delete (missing ones are ignored).")
	fs.StringSliceVar(&extra, "extra-child-resources", nil, "Further resources (<resource>.<version>.<group>, e.g. workloads.v1beta1.kueue.x-k8s.io) whose objects owned by a JobSet are carried over like its Jobs.")
	fs.StringVar(&o.UpstreamController, "upstream-controller", "jobset-system/jobset-controller-manager", "<namespace>/<name> of upstream's controller Deployment, scaled to zero first; not finding it is an error without --no-upstream-controller.")
	fs.BoolVar(&o.NoUpstreamController, "no-upstream-controller", false, "No upstream controller runs in this cluster: a missing --upstream-controller Deployment (or an empty flag) is not an error. Its Lease is checked all the same.")
	fs.StringVar(&o.UpstreamLease, "upstream-lease", o.UpstreamLease, "<namespace>/<name> of upstream's leader election Lease; the run waits until it is released or expired.")
	fs.BoolVar(&o.RegisterAPIService, "register-apiservice", o.RegisterAPIService, "Create or update the APIService v1alpha2.jobset.x-k8s.io; false only waits for one created otherwise.")
	fs.StringVar(&o.APIServiceFile, "apiservice-file", "", "An APIService manifest (YAML or JSON) to register instead of one built from the flags below.")
	fs.StringVar(&o.ServiceNamespace, "service-namespace", o.ServiceNamespace, "Namespace of jobset-apiserver's Service.")
	fs.StringVar(&o.ServiceName, "service-name", o.ServiceName, "Name of jobset-apiserver's Service.")
	fs.Int32Var(&o.ServicePort, "service-port", o.ServicePort, "Port of jobset-apiserver's Service.")
	fs.StringVar(&s.caBundleFile, "ca-bundle-file", "", "PEM file of the CA that signed jobset-apiserver's serving certificate (the APIService's caBundle).")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "Limit of each wait (upstream's controller stopped, its Lease free, the write block enforced, CRD deleted, APIService available).")
	fs.BoolVar(&s.showVersion, "version", false, "Print the version and exit.")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if s.showVersion {
		return s, nil
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if s.qps <= 0 || s.burst < 1 {
		return nil, fmt.Errorf("--qps must be above 0 and --burst at least 1 (got %v and %d)", s.qps, s.burst)
	}
	for _, arg := range extra {
		gvr, _ := schema.ParseResourceArg(arg)
		if gvr == nil {
			return nil, fmt.Errorf("--extra-child-resources: %q is not <resource>.<version>.<group>", arg)
		}
		o.ExtraChildResources = append(o.ExtraChildResources, *gvr)
	}
	if s.caBundleFile != "" {
		data, err := os.ReadFile(s.caBundleFile)
		if err != nil {
			return nil, err
		}
		o.CABundle = data
	}
	return s, nil
}

// run migrates as args say; with --version it prints the version to stdout
// and returns.
func run(args []string, stdout io.Writer) error {
	s, err := parse(args)
	if err != nil {
		return err
	}
	if s.showVersion {
		_, err := fmt.Fprintln(stdout, version.String("jobset-migrate"))
		return err
	}
	s.o.Out = stdout
	cfg, err := s.restConfig()
	if err != nil {
		return err
	}
	var c migrate.Clients
	if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	if c.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if c.JobSets, err = versioned.NewForConfig(cfg); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return migrate.Run(ctx, c, s.o)
}

// restConfig is the cluster's client configuration with the rate limits
// of the command line: client-go's default of 5 requests per second would
// stretch a large cluster's migration, and with it the time JobSet writes
// are blocked, over many minutes.
func (s *settings) restConfig() (*rest.Config, error) {
	cfg, err := config(s.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS = s.qps
	cfg.Burst = s.burst
	return cfg, nil
}

func config(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return rest.InClusterConfig()
}
