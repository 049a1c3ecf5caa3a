// Command jobset-controller runs the JobSet controller: it turns JobSets
// into child Jobs, a headless Service and shared claims, and keeps their
// status.
package main

import (
	goflag "flag"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/nativejobset/jobset/pkg/memlimit"
	"github.com/nativejobset/jobset/pkg/version"
)

// defaultGCPercent is the garbage collector's target when GOGC is not
// set. Nearly all of the controller's live heap is its informer caches,
// which live as long as the process; Go's default of 100 lets the heap
// grow to twice that before a collection, so the resident set is about
// twice the caches. At 25 the heap's target is one and a quarter times
// the caches, for more frequent collections during bursts of events (none
// when idle): measured
// at 8,000 one-pod Jobs, 1.7 KiB of RSS per pod against 2.1 at 50, for
// 17 % more CPU while the Jobs were created (test/bench/README.md).
const defaultGCPercent = 25

func main() {
	memlimit.DefaultGCPercent(defaultGCPercent)
	o, exit, err := parseArgs(os.Args[1:], os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if exit {
		os.Exit(0)
	}
	if err := run(o); err != nil {
		klog.ErrorS(err, "jobset-controller failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

// parseArgs parses the command line. exit is true when the command is done
// (--help, or --version, which prints the version to stdout).
func parseArgs(args []string, stdout io.Writer) (o *options, exit bool, err error) {
	o = defaultOptions()
	fs := pflag.NewFlagSet("jobset-controller", pflag.ContinueOnError)
	o.addFlags(fs)
	showVersion := fs.Bool("version", false, "Print the version and exit.")
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	if err := fs.Parse(args); err != nil {
		if err == pflag.ErrHelp {
			return nil, true, nil
		}
		return nil, false, err
	}
	if *showVersion {
		_, err := fmt.Fprintln(stdout, version.String("jobset-controller"))
		return nil, true, err
	}
	return o, false, nil
}
