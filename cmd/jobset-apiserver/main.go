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

// defaultGCPercent is the garbage collector's target when GOGC is not
// set. What jobset-apiserver keeps is mostly its watch cache, but a burst
// of writes leaves the versions it kept scattered among the burst's freed
// ones, and Go does not move objects: the spans that hold them stay in
// use. At 50 the heap grows to one and a half times what is live before a
// collection instead of twice, so freed slots are reused sooner and fewer
// spans stay behind. Measured after 10,000 JobSets had settled (two
// pairs against upstream, against three pairs at Go's 100): heap in use
// 15.4 MiB per 1,000 JobSets against 19.4, RSS 29.1 against 33.2; 25
// held less heap but no less RSS in a trial run (test/bench/README.md).
const defaultGCPercent = 50

func main() {
	memlimit.DefaultGCPercent(defaultGCPercent)
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
