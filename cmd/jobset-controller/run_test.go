package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"

	jsfake "github.com/nativejobset/jobset/pkg/generated/clientset/versioned/fake"
)

func TestFlags(t *testing.T) {
	o := defaultOptions()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse([]string{"--kubeconfig=/k", "--workers=9", "--kube-api-qps=20", "--kube-api-burst=40", "--leader-elect=false", "--health-addr=:9090"}); err != nil {
		t.Fatal(err)
	}
	if o.kubeconfig != "/k" || o.workers != 9 || o.qps != 20 || o.burst != 40 || o.leaderElect || o.healthAddr != ":9090" {
		t.Fatalf("options = %+v", o)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	d := defaultOptions()
	if d.workers != 20 || d.qps != 500 || d.burst != 1000 || !d.leaderElect || d.healthAddr != "127.0.0.1:8081" {
		t.Fatalf("defaults = %+v", d)
	}
	bad := defaultOptions()
	bad.workers = 0
	bad.renewDeadline = bad.leaseDuration
	if err := bad.validate(); err == nil {
		t.Fatal("invalid options accepted")
	}
}

func TestCheckAPI(t *testing.T) {
	c := jsfake.NewSimpleClientset()
	err := checkAPI(context.Background(), c, "https://example:6443", 0)
	if err == nil || !strings.Contains(err.Error(), "not served") {
		t.Fatalf("err = %v", err)
	}
	c.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
		GroupVersion: "jobset.x-k8s.io/v1alpha2",
		APIResources: []metav1.APIResource{{Name: "jobsets", Kind: "JobSet", Namespaced: true}},
	}}
	if err := checkAPI(context.Background(), c, "x", time.Second); err != nil {
		t.Fatal(err)
	}
}
