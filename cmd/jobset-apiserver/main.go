// Command jobset-apiserver serves the jobset.x-k8s.io API as an aggregated
// Kubernetes API server.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"
	genericapiserver "k8s.io/apiserver/pkg/server"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/nativejobset/jobset/pkg/apiserver"
	"github.com/nativejobset/jobset/pkg/memlimit"
	"github.com/nativejobset/jobset/pkg/version"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "jobset-apiserver: %v\n", err)
		os.Exit(1)
	}
}

// run parses args and serves; with --version it prints the version to
// stdout and returns before anything starts. `snapshot ...` backs the
// store up or restores it instead (snapshot.go).
func run(args []string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "snapshot" {
		return runSnapshot(args[1:], os.Stdin, stdout, os.Stderr)
	}
	opts := apiserver.NewOptions(os.Stdout, os.Stderr)
	logOpts := logs.NewOptions()

	fs := pflag.NewFlagSet("jobset-apiserver", pflag.ContinueOnError)
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	opts.AddFlags(fs)
	logsapi.AddFlags(logOpts, fs)
	showVersion := fs.Bool("version", false, "Print the version and exit.")
	if err := fs.Parse(args); err != nil {
		if err == pflag.ErrHelp {
			return nil
		}
		return err
	}
	if *showVersion {
		_, err := fmt.Fprintln(stdout, version.String("jobset-apiserver"))
		return err
	}
	if err := logsapi.ValidateAndApply(logOpts, nil); err != nil {
		return err
	}
	defer logs.FlushLogs()

	ctx := genericapiserver.SetupSignalContext()
	limit, soft, err := memlimit.Apply("/")
	if err != nil {
		klog.ErrorS(err, "Reading the container's memory limit failed; the embedded etcd's default quota assumes none")
	}
	if soft > 0 {
		klog.InfoS("Go soft memory limit set from the container's", "limit", limit, "soft", soft)
	}
	opts.MemoryLimit = limit
	if err := opts.Complete(); err != nil {
		return err
	}
	if err := opts.Validate(); err != nil {
		return err
	}
	klog.InfoS("Starting jobset-apiserver")
	if !fieldsV1Interned {
		klog.Warning("Built without the fieldsv1string tag: every cached JobSet holds its own copy of its managedFields (about 5 KB for a realistic JobSet); build with `make build` or `go build -tags fieldsv1string`")
	}
	return opts.Run(ctx)
}
