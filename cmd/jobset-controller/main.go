// Command jobset-controller runs the JobSet controller: it turns JobSets
// into child Jobs, a headless Service and shared claims, and keeps their
// status.
package main

import (
	goflag "flag"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// defaultGCPercent is the garbage collector's target when GOGC is not
// set. Nearly all of the controller's live heap is its informer caches,
// which live as long as the process; Go's default of 100 lets the heap
// grow to twice that before a collection, so the resident set is about
// twice the caches. At 50 it stays near one and a half times, for more
// frequent collections during bursts of events (none when idle).
const defaultGCPercent = 50

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	o := defaultOptions()
	fs := pflag.NewFlagSet("jobset-controller", pflag.ContinueOnError)
	o.addFlags(fs)
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == pflag.ErrHelp {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		klog.ErrorS(err, "jobset-controller failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}
