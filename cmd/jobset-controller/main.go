// Command jobset-controller runs the JobSet controller: it turns JobSets
// into child Jobs, a headless Service and shared claims, and keeps their
// status.
package main

import (
	goflag "flag"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

func main() {
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
