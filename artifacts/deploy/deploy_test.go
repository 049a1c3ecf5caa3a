package deploy_test

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/nativejobset/jobset/pkg/apiserver"
)

// closeMargin is what the embedded etcd and the process need after the
// last request: closing the database and exiting.
const closeMargin = 5 * time.Second

// The pod's grace period covers the whole graceful shutdown its flags
// configure, so the kubelet's SIGKILL never cuts off the embedded etcd's
// close; and the probes are the server's /livez and /readyz.
func TestAPIServerGracePeriodMatchesFlags(t *testing.T) {
	for _, file := range []string{
		"overlays/embedded-etcd/apiserver-statefulset.yaml",
		"overlays/external-etcd/apiserver-deployment.yaml",
	} {
		t.Run(file, func(t *testing.T) {
			pod := podTemplate(t, file)
			c := pod.Spec.Containers[0]
			opts := apiserver.NewOptions(io.Discard, io.Discard)
			fs := pflag.NewFlagSet("jobset-apiserver", pflag.ContinueOnError)
			opts.AddFlags(fs)
			if err := fs.Parse(c.Args); err != nil {
				t.Fatalf("the manifest's arguments do not parse: %v", err)
			}
			run := opts.ServerRun
			need := run.ShutdownDelayDuration + run.RequestTimeout + run.ShutdownWatchTerminationGracePeriod + closeMargin
			if pod.Spec.TerminationGracePeriodSeconds == nil {
				t.Fatalf("no terminationGracePeriodSeconds; the shutdown needs %v", need)
			}
			if got := time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second; got < need {
				t.Errorf("terminationGracePeriodSeconds %v < %v (shutdown delay + request timeout + watch grace + %v)", got, need, closeMargin)
			}
			if !run.ShutdownSendRetryAfter {
				t.Errorf("--shutdown-send-retry-after is off: requests after the delay would see refused connections instead of a retryable 429")
			}
			checkProbe(t, "liveness", c.LivenessProbe, "/livez")
			checkProbe(t, "readiness", c.ReadinessProbe, "/readyz")
		})
	}
}

func TestControllerGracePeriodMatchesFlags(t *testing.T) {
	pod := podTemplate(t, "base/controller-deployment.yaml")
	var grace time.Duration
	fs := pflag.NewFlagSet("jobset-controller", pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	fs.DurationVar(&grace, "shutdown-grace-period", 0, "")
	if err := fs.Parse(pod.Spec.Containers[0].Args); err != nil {
		t.Fatal(err)
	}
	if grace == 0 {
		t.Fatal("the controller's --shutdown-grace-period is not set in the manifest")
	}
	if pod.Spec.TerminationGracePeriodSeconds == nil || time.Duration(*pod.Spec.TerminationGracePeriodSeconds)*time.Second < grace+closeMargin {
		t.Errorf("terminationGracePeriodSeconds %v does not cover --shutdown-grace-period %v + %v", pod.Spec.TerminationGracePeriodSeconds, grace, closeMargin)
	}
}

func checkProbe(t *testing.T, kind string, p *corev1.Probe, path string) {
	t.Helper()
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path {
		t.Errorf("the %s probe is not an HTTP GET of %s: %+v", kind, path, p)
	}
}

// podTemplate reads the pod template of a Deployment or StatefulSet.
func podTemplate(t *testing.T, file string) corev1.PodTemplateSpec {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var kind struct{ Kind string }
	if err := yaml.Unmarshal(data, &kind); err != nil {
		t.Fatal(err)
	}
	switch strings.TrimSpace(kind.Kind) {
	case "Deployment":
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict(data, &d); err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template
	case "StatefulSet":
		var s appsv1.StatefulSet
		if err := yaml.UnmarshalStrict(data, &s); err != nil {
			t.Fatal(err)
		}
		return s.Spec.Template
	}
	t.Fatalf("%s: unexpected kind %q", file, kind.Kind)
	return corev1.PodTemplateSpec{}
}

// Measured in test/bench (BenchmarkWire, list fixtures, protobuf storage):
// jobset-apiserver's RSS and the embedded etcd's database in use per
// 1,000 JobSets, and the server's RSS with none.
const (
	rssPerThousandJobSets = 80 << 20
	dbPerThousandJobSets  = 8 << 20
	baseRSS               = 100 << 20
)

// The embedded etcd's quota, as the manifest's memory limit sizes it (or
// its explicit flag), holds no more JobSets than the memory limit leaves
// room for in the watch cache: a database full of live JobSets must not
// take the server past its limit. Only the embedded-etcd StatefulSet runs
// an embedded etcd (the chart renders the same pod, which the chart tests
// compare with it).
func TestEmbeddedEtcdQuotaFitsTheMemoryLimit(t *testing.T) {
	pod := podTemplate(t, "overlays/embedded-etcd/apiserver-statefulset.yaml")
	c := pod.Spec.Containers[0]
	limit, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		t.Fatal("jobset-apiserver has no memory limit: the default quota would be 2 GiB, far more than any watch cache fits")
	}
	opts := apiserver.NewOptions(io.Discard, io.Discard)
	fs := pflag.NewFlagSet("jobset-apiserver", pflag.ContinueOnError)
	opts.AddFlags(fs)
	if err := fs.Parse(c.Args); err != nil {
		t.Fatalf("the manifest's arguments do not parse: %v", err)
	}
	quota := opts.EmbeddedEtcdQuotaBackendBytes
	if quota == 0 {
		quota = apiserver.DefaultQuotaFor(limit.Value())
	}
	jobsets := quota / dbPerThousandJobSets * 1000
	need := baseRSS + jobsets*rssPerThousandJobSets/1000
	t.Logf("memory limit %s: quota %d MiB, about %d JobSets, needing about %d MiB", limit.String(), quota>>20, jobsets, need>>20)
	if need > limit.Value() {
		t.Errorf("a quota of %d MiB holds about %d JobSets, which need about %d MiB, more than the limit %s", quota>>20, jobsets, need>>20, limit.String())
	}
}

// DefaultQuotaFor never sizes a quota whose live JobSets exceed the memory
// they come from, over the limits operators use.
func TestDefaultQuotaForFitsEveryLimit(t *testing.T) {
	for _, limit := range []int64{256 << 20, 512 << 20, 1 << 30, 4 << 30, 16 << 30, 64 << 30} {
		quota := apiserver.DefaultQuotaFor(limit)
		if need := baseRSS + quota/dbPerThousandJobSets*rssPerThousandJobSets; need > limit {
			t.Errorf("limit %d MiB: quota %d MiB needs about %d MiB", limit>>20, quota>>20, need>>20)
		}
	}
	if got := apiserver.DefaultQuotaFor(0); got != 2<<30 {
		t.Errorf("without a limit the quota is %d, want etcd's 2 GiB", got)
	}
}
