package main

import (
	"errors"
	"flag"
	"os"
	"time"

	"github.com/nativejobset/jobset/hack/tools/localtool/probe"
)

func runProbe(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ExitOnError)
	var o probe.Options
	fs.StringVar(&o.CACert, "cacert", "", "CA bundle that must have signed the server certificate")
	fs.StringVar(&o.CertFile, "cert", "", "client certificate (optional)")
	fs.StringVar(&o.KeyFile, "key", "", "client key (optional)")
	fs.DurationVar(&o.Timeout, "timeout", 2*time.Second, "request timeout")
	quiet := fs.Bool("q", false, "print nothing on failure")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("usage: localtool probe [-cacert FILE] [-cert FILE -key FILE] URL")
	}
	err := probe.Get(fs.Arg(0), o)
	if err != nil && *quiet {
		os.Exit(1)
	}
	return err
}
