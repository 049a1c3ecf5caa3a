package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestPlacementFlags(t *testing.T) {
	d := defaultOptions()
	if d.placementTimeout != 2*time.Minute || d.placementQPS != 100 || d.placementBurst != 200 {
		t.Fatalf("defaults: %v %v %d", d.placementTimeout, d.placementQPS, d.placementBurst)
	}
	o := defaultOptions()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse([]string{"--topology-placement-timeout=30s", "--placement-kube-api-qps=300", "--placement-kube-api-burst=600"}); err != nil {
		t.Fatal(err)
	}
	if o.placementTimeout != 30*time.Second || o.placementQPS != 300 || o.placementBurst != 600 {
		t.Fatalf("options: %v %v %d", o.placementTimeout, o.placementQPS, o.placementBurst)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	for flag, mod := range map[string]func(*options){
		"--topology-placement-timeout": func(o *options) { o.placementTimeout = 0 },
		"--placement-kube-api-qps":     func(o *options) { o.placementQPS = 0 },
	} {
		bad := defaultOptions()
		mod(bad)
		if err := bad.validate(); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s: validate = %v", flag, err)
		}
	}
}
